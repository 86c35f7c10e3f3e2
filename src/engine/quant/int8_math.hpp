// The host side of the INT8 scheme: the scale of a calibrated threshold, and quantise ->
// dequantise for the simulated INT8. The arithmetic itself (quantise, dequantise, the
// convolution's epilogue) is the GPU kernels' own definition, engine/cuda/int8/int8_math.hpp, so
// that the host reference, the simulated INT8 and the kernels round alike:
//   scale      = amax / 127 (1 when amax is 0, negative or not finite)
//   quantise   q = saturate(round_half_even(x / scale)) to [-128, 127]; NaN -> 0
//   dequantise x' = float(q) * scale
//   epilogue   v = fmaf(float(acc), x_scale * w_scale[k], bias[k]), optional SiLU, requantised with
//              the output tensor's scale. float(acc) is exact while |acc| < 2^24.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/cuda/int8/int8_math.hpp"

namespace yolocu::engine::quant {

constexpr float kInt8Max = 127.f;

// The scale of a symmetric int8 tensor whose values are clipped to [-amax, amax].
inline float int8_scale(float amax) { return amax > 0.f && std::isfinite(amax) ? amax / kInt8Max : 1.f; }

// quantise -> dequantise (the simulated INT8 of the CPU engine).
inline float fake_quantize(float x, float scale) { return int8::dequantize(int8::quantize(x, scale), scale); }

}  // namespace yolocu::engine::quant

// Symmetric int8 arithmetic shared by the host INT8 reference (int8_conv_ref.hpp), the CPU engine's
// simulated INT8 and the GPU kernels: one definition of scales, rounding and saturation, so that a
// kernel and its reference agree bit for bit (as hd_math.hpp does for the fused float kernels).
//
//   scale      = amax / 127 (1 when amax is 0, negative or not finite); inv_scale = 1.f / scale
//   quantise   q = saturate(rint(x * inv_scale)) to [-128, 127]: the product rounded to float, then
//              round half to even (the default rounding mode; rintf / __float2int_rn); NaN -> 0
//   dequantise x' = q * scale
//   epilogue   v = fmaf(float(acc), x_scale * w_scale[k], bias[k]) (the multiplier a float product,
//              one fused multiply-add), optional SiLU v / (1 + exp(-v)), requantised with the
//              output tensor's inv_scale. float(acc) is exact while |acc| < 2^24.
#pragma once

#include <cmath>
#include <cstdint>

#include "yolocu/geometry.hpp"  // YOLOCU_HD

namespace yolocu::engine::quant {

constexpr float kInt8Max = 127.f;

// The scale of a symmetric int8 tensor whose values are clipped to [-amax, amax].
YOLOCU_HD float int8_scale(float amax) {
  return amax > 0.f && amax < INFINITY ? amax / kInt8Max : 1.f;
}

YOLOCU_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// Round half to even, saturate to [-128, 127]; NaN -> 0.
YOLOCU_HD int8_t saturate_int8(float v) {
  if (!(v == v)) return 0;
  const float r = rintf(v);
  return r >= 127.f ? int8_t{127} : r <= -128.f ? int8_t{-128} : static_cast<int8_t>(r);
}

YOLOCU_HD int8_t quantize_int8(float x, float inv_scale) { return saturate_int8(mul_rn(x, inv_scale)); }

YOLOCU_HD float dequantize_int8(int8_t q, float scale) { return mul_rn(static_cast<float>(q), scale); }

// quantise -> dequantise (the simulated INT8 of the CPU engine).
YOLOCU_HD float fake_quantize(float x, float scale, float inv_scale) {
  return dequantize_int8(quantize_int8(x, inv_scale), scale);
}

YOLOCU_HD float silu_ref(float v) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(v, __fadd_rn(1.f, expf(-v)));
#else
  return v / (1.f + std::exp(-v));
#endif
}

// The float value of one output element of an INT8 convolution before requantisation.
YOLOCU_HD float int8_epilogue(int32_t acc, float multiplier, float bias, bool silu) {
  const float v = fmaf(static_cast<float>(acc), multiplier, bias);
  return silu ? silu_ref(v) : v;
}

}  // namespace yolocu::engine::quant

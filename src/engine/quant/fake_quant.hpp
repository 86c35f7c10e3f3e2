// Simulated INT8 on the CPU engine: the calibration's scales attached to the planned convolution
// steps (CpuStepSpec::int8_x_scale / int8_w_scales), and the quantise -> dequantise passes the
// convolution step runs (the INT8 kernels' rounding, quant/int8_math.hpp): its weights once at build time, per output
// channel, and its input at every run, into a buffer of its own (other readers of the input see
// the float values). Layers the calibration keeps in float run in FP32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cpu/cpu_plan.hpp"
#include "yolocu/int8.hpp"

namespace yolocu::engine::quant {

// Sets the INT8 fields of every convolution step of `sp` from `c`; kInvalidArgument naming the
// Conv (or its tensor) the calibration has no scales for, or a weight-scale count that does not
// match the output channels. Returns the number of convolutions simulated in INT8.
int attach_int8_scales(engine::cpu::CpuStepPlan& sp, const Int8Calibration& c);

// In place over [k, per_channel] weights: each channel quantised with its scale, then dequantised.
void fake_quantize_weights(float* w, int64_t k, int64_t per_channel, const float* scales);
// dst[i] = fake_quantize(src[i], scale) (multithreaded for large n).
void fake_quantize_tensor(const float* src, float* dst, size_t n, float scale);

}  // namespace yolocu::engine::quant

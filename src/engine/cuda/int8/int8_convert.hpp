// The boundaries between INT8 and FP16 regions of a network (int8_convert.cu): per-tensor symmetric
// quantisation of NHWC fp16 activations to int8 and back, with int8_math.hpp's rounding (the INT8
// convolution's own: round half to even, saturate to [-128, 127], NaN -> 0).
// Both enqueue on `stream`, never synchronise, are capturable; they throw yolocu::Error
// (kInvalidArgument) for bad sizes or pointers, Error(kCuda) if the launch fails.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace yolocu::engine {

// x: fp16 NHWC, `pixels` pixels x_pitch halves apart, its first c_src channels used;
// y: int8 NHWC [pixels, c_dst], c_dst % 4 == 0, c_dst >= c_src: y = quantize(x / scale) for the
// first c_src channels, 0 in the others (the INT8 convolution's channel padding to 16).
void int8_quantize_run(const void* x, int x_pitch, int c_src, int8_t* y, int c_dst, int64_t pixels, float scale,
                       cudaStream_t stream);

// x: int8 NHWC [pixels, c]; y: fp16 NHWC, pixels y_pitch halves apart (y_pitch >= c; the other
// channels untouched): y = half(float(x) * scale).
void int8_dequantize_run(const int8_t* x, int c, void* y, int y_pitch, int64_t pixels, float scale,
                         cudaStream_t stream);

}  // namespace yolocu::engine

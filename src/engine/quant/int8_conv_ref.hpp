// The host INT8 reference of a quantised convolution, computed as the GPU INT8 kernel computes it:
// int8 activations x int8 weights accumulated exactly in int32, then the kernels' float epilogue
// (engine/cuda/int8/int8_math.hpp: acc * (x_scale * w_scale[k]) + bias[k], optional SiLU) requantised to int8 with
// the output tensor's scale, or left in float (a layer whose consumer runs in float: the Detect
// head). Plain NCHW int8 tensors, weights [K, C / group, R, S]; single-threaded, for tests and
// parity checks, not for speed.
#pragma once

#include <cstdint>
#include <vector>

namespace yolocu::engine::quant {

struct Int8ConvShape {
  int64_t n = 1, c = 1, h = 1, w = 1;  // input
  int64_t k = 1, r = 1, s = 1;         // output channels, kernel height, width
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t group = 1;

  int64_t out_h() const { return (h + pad_top + pad_bottom - dilation_h * (r - 1) - 1) / stride_h + 1; }
  int64_t out_w() const { return (w + pad_left + pad_right - dilation_w * (s - 1) - 1) / stride_w + 1; }
  int64_t out_numel() const { return n * k * out_h() * out_w(); }
};

// kInvalidArgument naming the field for a shape no convolution has (zero sizes, channels not
// divisible by the group, an empty output).
void check_int8_conv_shape(const Int8ConvShape& shape);

// The exact int32 accumulators [n, k, out_h, out_w] (zero padding; int8 0 is the float 0).
std::vector<int32_t> int8_conv_accumulate(const Int8ConvShape& shape, const int8_t* x, const int8_t* w);

// Per output channel k: x_scale * w_scales[k] as a float product (the epilogue's multiplier).
std::vector<float> int8_multipliers(float x_scale, const std::vector<float>& w_scales);

// The epilogue over accumulators [n, k, hw] (hw = out_h * out_w): requantised with the output
// tensor's scale (int8; int8_math.hpp's requantize, the product by its reciprocal, as the kernels
// do), or left in float. `bias` may be empty (zeros).
std::vector<int8_t> int8_requantize(const std::vector<int32_t>& acc, int64_t k, int64_t hw,
                                    const std::vector<float>& multipliers, const std::vector<float>& bias, bool silu,
                                    float out_scale);
std::vector<float> int8_dequantize_output(const std::vector<int32_t>& acc, int64_t k, int64_t hw,
                                          const std::vector<float>& multipliers, const std::vector<float>& bias,
                                          bool silu);

// Per output channel: max |w| / 127 over the channel's weights (int8_scale), weights [k, rest].
std::vector<float> weight_scales(const float* w, int64_t k, int64_t per_channel);
// The weights quantised with their channel's scale.
std::vector<int8_t> quantize_weights(const float* w, int64_t k, int64_t per_channel, const std::vector<float>& scales);
// A float tensor quantised with one scale.
std::vector<int8_t> quantize_tensor(const float* x, int64_t numel, float scale);

}  // namespace yolocu::engine::quant

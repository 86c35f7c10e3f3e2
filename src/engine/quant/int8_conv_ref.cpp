// Host INT8 convolution reference (int8_conv_ref.hpp).
#include "engine/quant/int8_conv_ref.hpp"

#include <algorithm>
#include <cmath>

#include "core/check.hpp"
#include "engine/quant/int8_math.hpp"

namespace yolocu::engine::quant {

void check_int8_conv_shape(const Int8ConvShape& s) {
  YOLOCU_CHECK(s.n > 0 && s.c > 0 && s.h > 0 && s.w > 0, kInvalidArgument, "int8 conv: input dims must be > 0");
  YOLOCU_CHECK(s.k > 0 && s.r > 0 && s.s > 0, kInvalidArgument, "int8 conv: kernel dims must be > 0");
  YOLOCU_CHECK(s.stride_h > 0 && s.stride_w > 0 && s.dilation_h > 0 && s.dilation_w > 0, kInvalidArgument,
               "int8 conv: strides and dilations must be > 0");
  YOLOCU_CHECK(s.pad_top >= 0 && s.pad_left >= 0 && s.pad_bottom >= 0 && s.pad_right >= 0, kInvalidArgument,
               "int8 conv: pads must be >= 0");
  YOLOCU_CHECK(s.group > 0 && s.c % s.group == 0 && s.k % s.group == 0, kInvalidArgument, "int8 conv: group ",
               s.group, " must divide the input channels ", s.c, " and the output channels ", s.k);
  YOLOCU_CHECK(s.out_h() > 0 && s.out_w() > 0, kInvalidArgument, "int8 conv: the output is empty");
}

std::vector<int32_t> int8_conv_accumulate(const Int8ConvShape& s, const int8_t* x, const int8_t* w) {
  check_int8_conv_shape(s);
  const int64_t oh = s.out_h(), ow = s.out_w(), cg = s.c / s.group, kg = s.k / s.group;
  std::vector<int32_t> acc(static_cast<size_t>(s.out_numel()), 0);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k) {
      const int64_t g = k / kg;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int32_t sum = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < s.r; ++r) {
              const int64_t iy = oy * s.stride_h - s.pad_top + r * s.dilation_h;
              if (iy < 0 || iy >= s.h) continue;
              for (int64_t q = 0; q < s.s; ++q) {
                const int64_t ix = ox * s.stride_w - s.pad_left + q * s.dilation_w;
                if (ix < 0 || ix >= s.w) continue;
                const int32_t xv = x[((n * s.c + g * cg + c) * s.h + iy) * s.w + ix];
                const int32_t wv = w[((k * cg + c) * s.r + r) * s.s + q];
                sum += xv * wv;
              }
            }
          acc[static_cast<size_t>(((n * s.k + k) * oh + oy) * ow + ox)] = sum;
        }
    }
  return acc;
}

std::vector<float> int8_multipliers(float x_scale, const std::vector<float>& w_scales) {
  std::vector<float> m(w_scales.size());
  for (size_t k = 0; k < m.size(); ++k) m[k] = int8::mul_rn(x_scale, w_scales[k]);
  return m;
}

std::vector<float> int8_dequantize_output(const std::vector<int32_t>& acc, int64_t k, int64_t hw,
                                          const std::vector<float>& m, const std::vector<float>& bias, bool silu) {
  YOLOCU_CHECK(k > 0 && hw > 0 && static_cast<int64_t>(m.size()) == k &&
                   (bias.empty() || static_cast<int64_t>(bias.size()) == k),
               kInvalidArgument, "int8 epilogue: ", m.size(), " multipliers and ", bias.size(), " biases for ", k,
               " output channels");
  YOLOCU_CHECK(acc.size() % static_cast<size_t>(k * hw) == 0, kInvalidArgument, "int8 epilogue: ", acc.size(),
               " accumulators are not whole images of ", k, " channels x ", hw, " positions");
  std::vector<float> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    const size_t c = (i / static_cast<size_t>(hw)) % static_cast<size_t>(k);
    out[i] = int8::conv_value(acc[i], m[c], bias.empty() ? 0.f : bias[c], silu);
  }
  return out;
}

std::vector<int8_t> int8_requantize(const std::vector<int32_t>& acc, int64_t k, int64_t hw, const std::vector<float>& m,
                                    const std::vector<float>& bias, bool silu, float out_scale) {
  const std::vector<float> v = int8_dequantize_output(acc, k, hw, m, bias, silu);
  std::vector<int8_t> out(v.size());
  const int8::Scale sc = int8::make_scale(out_scale);
  for (size_t i = 0; i < v.size(); ++i) out[i] = int8::requantize(v[i], sc);
  return out;
}

std::vector<float> weight_scales(const float* w, int64_t k, int64_t per_channel) {
  std::vector<float> scales(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    float amax = 0;
    for (int64_t j = 0; j < per_channel; ++j) amax = std::max(amax, std::fabs(w[i * per_channel + j]));
    scales[static_cast<size_t>(i)] = int8_scale(amax);
  }
  return scales;
}

std::vector<int8_t> quantize_weights(const float* w, int64_t k, int64_t per_channel, const std::vector<float>& scales) {
  YOLOCU_CHECK(static_cast<int64_t>(scales.size()) == k, kInvalidArgument, "quantize_weights: ", scales.size(),
               " scales for ", k, " channels");
  std::vector<int8_t> q(static_cast<size_t>(k * per_channel));
  for (int64_t i = 0; i < k; ++i) {
    const float scale = scales[static_cast<size_t>(i)];
    for (int64_t j = 0; j < per_channel; ++j) q[static_cast<size_t>(i * per_channel + j)] = int8::quantize(w[i * per_channel + j], scale);
  }
  return q;
}

std::vector<int8_t> quantize_tensor(const float* x, int64_t numel, float scale) {
  std::vector<int8_t> q(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) q[static_cast<size_t>(i)] = int8::quantize(x[i], scale);
  return q;
}

}  // namespace yolocu::engine::quant

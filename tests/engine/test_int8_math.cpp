// int8_math.hpp, the float math the INT8 convolution's epilogue and its host references share,
// against independent double-precision math (std::exp, exact division) and hand-computed cases:
// exp within 2 ulp over the range it serves, its limits, SiLU, round half to even, saturation, NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/cuda/int8/int8_math.hpp"

namespace yolocu::engine {
namespace {

TEST(Int8Math, ExpWithinTwoUlp) {
  double worst = 0;
  for (float x = -87.f; x <= 88.f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    worst = std::max(worst, std::fabs(int8::exp_f32(x) - want) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(int8::exp_f32(0.f), 1.f);
  EXPECT_EQ(int8::exp_f32(88.5f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(int8::exp_f32(-87.5f), 0.f);
  EXPECT_TRUE(std::isnan(int8::exp_f32(std::nanf(""))));
}

TEST(Int8Math, Silu) {
  for (float v = -100.f; v <= 100.f; v += 0.173f) {
    const double want = v / (1.0 + std::exp(-static_cast<double>(v)));
    EXPECT_NEAR(int8::silu_f32(v), want, 4e-7 * std::fabs(want) + 1e-30) << v;
  }
  EXPECT_EQ(int8::silu_f32(0.f), 0.f);
}

TEST(Int8Math, ConvValueIsOneFma) {
  // acc * scale + bias rounded once: 3 * (1 + 2^-23) + (-3) = 3 * 2^-23 exactly
  EXPECT_EQ(int8::conv_value(3, 1.f + std::ldexp(1.f, -23), -3.f, false), 3 * std::ldexp(1.f, -23));
  EXPECT_EQ(int8::conv_value(-1000, 0.01f, 10.f, false), std::fmaf(-1000.f, 0.01f, 10.f));
  EXPECT_EQ(int8::add_residual_i8(1.f, -128, 0.5f), -63.f);
}

TEST(Int8Math, QuantizeRoundsHalfToEvenAndSaturates) {
  EXPECT_EQ(int8::quantize(0.5f, 1.f), 0);
  EXPECT_EQ(int8::quantize(1.5f, 1.f), 2);
  EXPECT_EQ(int8::quantize(2.5f, 1.f), 2);
  EXPECT_EQ(int8::quantize(-0.5f, 1.f), 0);
  EXPECT_EQ(int8::quantize(-2.5f, 1.f), -2);
  EXPECT_EQ(int8::quantize(0.3f, 0.1f), 3);  // 0.3f / 0.1f rounds to 3.0000002 in float
  EXPECT_EQ(int8::quantize(127.5f, 1.f), 127);
  EXPECT_EQ(int8::quantize(-128.5f, 1.f), -128);
  EXPECT_EQ(int8::quantize(1e30f, 1e-3f), 127);
  EXPECT_EQ(int8::quantize(-std::numeric_limits<float>::infinity(), 1.f), -128);
  EXPECT_EQ(int8::quantize(std::nanf(""), 1.f), 0);
  EXPECT_EQ(int8::dequantize(-128, 0.25f), -32.f);
}

}  // namespace
}  // namespace yolocu::engine

// int8_math.hpp, the float math the INT8 convolution's epilogue and its host references share,
// against independent double-precision math (std::exp, exact division) and hand-computed cases:
// exp within 2 ulp over the range it serves, its clamp, SiLU, round half to even, saturation, NaN,
// the quantising division without a division instruction. (The device side: test_int8_math_cuda.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "engine/cuda/int8/int8_math.hpp"

namespace yolocu::engine {
namespace {

TEST(Int8Math, ExpWithinItsBound) {
  double worst2 = 0, worst = 0;
  for (float t = -125.f; t <= 125.f; t += 0.00731f) {  // 2^t: 2e-7 relative
    const double want = std::exp2(static_cast<double>(t));
    worst2 = std::max(worst2, std::fabs(int8::exp2_clamped(t) - want) / want);
  }
  EXPECT_LE(worst2, 2e-7);
  for (float x = -86.f; x <= 86.f; x += 0.0137f) {  // e^x: the product x log2 e adds up to |x| * 8e-8
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(int8::exp_clamped(x) - want) / want / (2e-7 + std::fabs(x) * 8e-8));
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_EQ(int8::exp2_clamped(0.f), 1.f);
  EXPECT_EQ(int8::exp2_clamped(-3.f), 0.125f);
  EXPECT_EQ(int8::exp2_clamped(125.f), std::ldexp(1.f, 125));
  // clamped to [-125, 125]; NaN as -125
  EXPECT_EQ(int8::exp2_clamped(126.f), std::ldexp(1.f, 125));
  EXPECT_EQ(int8::exp_clamped(std::numeric_limits<float>::infinity()), std::ldexp(1.f, 125));
  EXPECT_EQ(int8::exp_clamped(-1000.f), std::ldexp(1.f, -125));
  EXPECT_EQ(int8::exp_clamped(std::nanf("")), std::ldexp(1.f, -125));
  EXPECT_LT(1.f + int8::exp2_clamped(125.f), std::ldexp(1.f, 126));  // rcp_rn's range
}

TEST(Int8Math, Silu) {
  double worst = 0;
  for (float v = -86.f; v <= 100.f; v += 0.173f) {
    const double want = v / (1.0 + std::exp(-static_cast<double>(v)));
    if (want == 0) continue;
    worst = std::max(worst, std::fabs(int8::silu_f32(v) - want) / std::fabs(want));
  }
  EXPECT_LE(worst, 4.5e-6);  // exp's bound at |v| <= 86, the reciprocal's and the product's roundings
  EXPECT_EQ(int8::silu_f32(0.f), 0.f);
  EXPECT_EQ(int8::silu_f32(20.f), 20.f * (1.f / (1.f + int8::exp_clamped(-20.f))));
  EXPECT_EQ(int8::silu_f32(-2.f), -2.f * (1.f / (1.f + int8::exp_clamped(2.f))));
  // below -86.6: v * 2^-125, 0 once quantised with a scale above |v| / 2e37, or converted to fp16
  EXPECT_LT(std::fabs(int8::silu_f32(-100.f)), 1e-35f);
  EXPECT_LE(int8::silu_f32(-100.f), 0.f);
  EXPECT_EQ(int8::quantize(int8::silu_f32(-1e30f), 1e-6f), 0);
  EXPECT_TRUE(std::isnan(int8::silu_f32(std::nanf(""))));
}

TEST(Int8Math, ReciprocalOnTheHostIsTheDivision) {
  for (float d : {1.f, 3.f, 7.f, 1.1f, 123456.7f, 5.5e34f, 4e37f}) EXPECT_EQ(int8::rcp_rn(d), 1.f / d) << d;
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

TEST(Int8Math, DivByIsTheIeeeDivision) {
  // The rounded product alone would differ: 1 / 0.1f rounds to 10.0f and -12.15f * 10 = -121.5f, where
  // -12.15f / 0.1f = -121.49999f, so rint gives -122 against the division's -121.
  ASSERT_EQ(int8::make_scale(0.1f).inv, 10.f);
  ASSERT_EQ(-12.15f * 10.f, -121.5f);
  EXPECT_EQ(int8::div_by(-12.15f, int8::make_scale(0.1f)), -12.15f / 0.1f);
  EXPECT_EQ(int8::quantize(-12.15f, 0.1f), -121);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-20.f, 20.f), unit(-1.f, 1.f);
  int64_t checked = 0, differ = 0;
  for (int i = 0; i < 2000000; ++i) {
    const float sc = std::exp2(exponent(rng));
    const int8::Scale q = int8::make_scale(sc);
    // random quotients, and values within a few ulps of (k + 1/2) * scale, where rounding decides
    const float vs[] = {unit(rng) * 300.f * sc, std::nextafter((std::floor(unit(rng) * 130.f) + 0.5f) * sc, 0.f)};
    for (float v0 : vs)
      for (float v = v0, k = 0; k < 3; ++k, v = std::nextafter(v, 1e30f)) {
        const float want = v / sc, got = int8::div_by(v, q);
        ++checked;
        if (std::memcmp(&want, &got, sizeof want) != 0 && differ++ < 3) ADD_FAILURE() << v << " / " << sc << ": " << got << ", the division " << want;
      }
  }
  EXPECT_EQ(differ, 0) << checked << " quotients";
  // overflow, infinities, NaN, zero
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(int8::div_by(3e38f, int8::make_scale(1e-3f)), inf);
  EXPECT_EQ(int8::div_by(-inf, int8::make_scale(2.f)), -inf);
  EXPECT_TRUE(std::isnan(int8::div_by(std::nanf(""), int8::make_scale(2.f))));
  EXPECT_EQ(int8::div_by(0.f, int8::make_scale(0.37f)), 0.f);
  EXPECT_EQ(int8::quantize_value(-3.5f, int8::make_scale(1.f)), -4.f);
  EXPECT_EQ(int8::quantize_value(std::nanf(""), int8::make_scale(1.f)), 0.f);
  EXPECT_EQ(int8::quantize_value(1e38f, int8::make_scale(1e-10f)), 127.f);
}

// The epilogue's requantisation: the product by the rounded reciprocal, rounded half to even and
// saturated as quantize is; against quantize's IEEE division it differs by one step at most, and
// only where v / s lies within two ulps of a half-integer.
TEST(Int8Math, RequantizeIsTheProductRounded) {
  const int8::Scale one = int8::make_scale(1.f);
  EXPECT_EQ(int8::requantize(2.5f, one), 2);
  EXPECT_EQ(int8::requantize(-2.5f, one), -2);
  EXPECT_EQ(int8::requantize(127.5f, one), 127);
  EXPECT_EQ(int8::requantize(-128.5f, one), -128);
  EXPECT_EQ(int8::requantize(std::numeric_limits<float>::infinity(), one), 127);
  EXPECT_EQ(int8::requantize(std::nanf(""), one), 0);
  EXPECT_EQ(int8::requantize(-12.15f, int8::make_scale(0.1f)), -122);  // -121.5 from the product (the division: -121)
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-20.f, 20.f), unit(-1.f, 1.f);
  int64_t checked = 0, differ = 0, far = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float sc = std::exp2(exponent(rng));
    const int8::Scale q = int8::make_scale(sc);
    const float vs[] = {unit(rng) * 300.f * sc, std::nextafter((std::floor(unit(rng) * 130.f) + 0.5f) * sc, 0.f)};
    for (float v : vs) {
      ++checked;
      const int a = int8::requantize(v, q), b = int8::quantize(v, q);
      if (a == b) continue;
      ++differ;
      const double x = static_cast<double>(v) / sc, half = std::floor(x) + 0.5;
      far += std::abs(a - b) > 1 || std::fabs(x - half) > 2 * std::ldexp(std::fabs(x), -23);
    }
  }
  EXPECT_EQ(far, 0) << differ << " of " << checked << " differ from the division";
  EXPECT_GT(differ, 0) << "the sweep meant to reach values where the two round apart";
}

}  // namespace
}  // namespace yolocu::engine

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "yolocu/error.hpp"
#include "yolocu/tensor.hpp"

using namespace yolocu;

TEST(Half, KnownEncodings) {
  // Values from the IEEE 754 binary16 definition.
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);          // rounds to +inf
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // halfway to 0 -> even (0)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
}

TEST(Half, RoundTripAllHalves) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

TEST(Tensor, ShapeAndErrors) {
  Tensor t(DType::kFloat32, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.data_as<float>()[23], 0.0f);
  EXPECT_THROW(t.reshaped({5, 5}), Error);
  EXPECT_THROW(Tensor(DType::kFloat32, {-1, 3}), Error);
  EXPECT_THROW(Tensor(DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 30}), Error);
}

TEST(Tensor, CastFloatInt) {
  Tensor t(DType::kFloat32, {4});
  float v[4] = {1.5f, -2.5f, 3.0f, 65504.0f};
  std::memcpy(t.data(), v, sizeof v);
  Tensor i = cast_tensor(t, DType::kInt64);
  EXPECT_EQ(i.data_as<int64_t>()[0], 1);
  EXPECT_EQ(i.data_as<int64_t>()[1], -2);
  Tensor h = cast_tensor(t, DType::kFloat16);
  EXPECT_EQ(h.data_as<uint16_t>()[3], 0x7bff);
  Tensor back = cast_tensor(h, DType::kFloat32);
  EXPECT_EQ(back.data_as<float>()[0], 1.5f);
}

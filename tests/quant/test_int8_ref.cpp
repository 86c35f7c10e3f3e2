// The host INT8 reference (src/engine/quant/int8_conv_ref.hpp, quant/int8_math.hpp) on small cases whose
// results are worked out by hand in the comments, and SHA-256 against FIPS 180-2's examples.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/sha256.hpp"
#include "engine/quant/int8_conv_ref.hpp"
#include "engine/quant/int8_math.hpp"
#include "test_util.hpp"

namespace yolocu::engine::quant {
namespace {

TEST(Int8Scale, ScalesAndFakeQuantisation) {
  // amax 254 -> scale 2; amax 0 (never seen) or not finite -> 1
  EXPECT_FLOAT_EQ(int8_scale(254.f), 2.f);
  EXPECT_FLOAT_EQ(int8_scale(0.f), 1.f);
  EXPECT_FLOAT_EQ(int8_scale(INFINITY), 1.f);
  // scale 0.5: x / 0.5 rounded half to even, times 0.5
  EXPECT_FLOAT_EQ(fake_quantize(1.3f, 0.5f), 1.5f);     // 2.6 -> 3
  EXPECT_FLOAT_EQ(fake_quantize(1.25f, 0.5f), 1.f);     // 2.5 -> 2
  EXPECT_FLOAT_EQ(fake_quantize(1.75f, 0.5f), 2.f);     // 3.5 -> 4
  EXPECT_FLOAT_EQ(fake_quantize(-1.25f, 0.5f), -1.f);   // -2.5 -> -2
  EXPECT_FLOAT_EQ(fake_quantize(100.f, 0.5f), 63.5f);   // 200 -> 127 (saturated)
  EXPECT_FLOAT_EQ(fake_quantize(-100.f, 0.5f), -64.f);  // -200 -> -128
  EXPECT_FLOAT_EQ(fake_quantize(NAN, 0.5f), 0.f);
}

TEST(Int8Ref, Conv3x3Accumulators) {
  // x (1 x 1 x 3 x 3)    w (1 x 1 x 2 x 2)
  //   1  2  3              1 -1
  //   4  5  6              2  0
  //   7  8  9
  // no padding, stride 1: out[0][0] = 1 - 2 + 8 = 7, out[0][1] = 2 - 3 + 10 = 9,
  // out[1][0] = 4 - 5 + 14 = 13, out[1][1] = 5 - 6 + 16 = 15
  const std::vector<int8_t> x{1, 2, 3, 4, 5, 6, 7, 8, 9}, w{1, -1, 2, 0};
  Int8ConvShape s;
  s.c = 1, s.h = 3, s.w = 3, s.k = 1, s.r = 2, s.s = 2;
  EXPECT_EQ(int8_conv_accumulate(s, x.data(), w.data()), (std::vector<int32_t>{7, 9, 13, 15}));
  // padding 1 on every side, stride 2: output 2 x 2 at input rows/cols -1 and 1.
  // (0,0): window rows -1..0, cols -1..0: only x[0][0] * w[1][1] = 1 * 0 = 0
  // (0,1): rows -1..0, cols 1..2: x[0][1] * w[1][0] + x[0][2] * w[1][1] = 2 * 2 + 0 = 4
  // (1,0): rows 1..2, cols -1..0: x[1][0] * w[0][1] + x[2][0] * w[1][1] = 4 * -1 + 0 = -4
  // (1,1): rows 1..2, cols 1..2: 5 * 1 + 6 * -1 + 8 * 2 + 9 * 0 = 15
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = 1;
  s.stride_h = s.stride_w = 2;
  EXPECT_EQ(int8_conv_accumulate(s, x.data(), w.data()), (std::vector<int32_t>{0, 4, -4, 15}));
}

TEST(Int8Ref, GroupedConvAndExtremes) {
  // 2 channels, group 2, 1x1 kernels: each output channel scales its own input channel.
  // x = [[-128, 127]], [[127, -128]] (1 x 2 x 1 x 2); w = [-128], [127]
  // out channel 0: -128 * -128 = 16384, 127 * -128 = -16256
  // out channel 1: 127 * 127 = 16129, -128 * 127 = -16256
  const std::vector<int8_t> x{-128, 127, 127, -128}, w{-128, 127};
  Int8ConvShape s;
  s.c = 2, s.h = 1, s.w = 2, s.k = 2, s.group = 2;
  EXPECT_EQ(int8_conv_accumulate(s, x.data(), w.data()), (std::vector<int32_t>{16384, -16256, 16129, -16256}));
  // 3 input channels x 3 x 3 taps of -128 * -128: 27 * 16384 = 442368 (beyond int16, exact in int32)
  Int8ConvShape b;
  b.c = 3, b.h = 3, b.w = 3, b.k = 1, b.r = 3, b.s = 3;
  const std::vector<int8_t> xb(27, -128), wb(27, -128);
  EXPECT_EQ(int8_conv_accumulate(b, xb.data(), wb.data()), (std::vector<int32_t>{442368}));
}

TEST(Int8Ref, EpilogueRequantises) {
  // 2 channels x 2 positions. multipliers: x_scale 0.5 * w_scale {1, 0.25} = {0.5, 0.125};
  // bias {1, -2}; output scale 1 (inv 1):
  //   ch 0: acc 5 -> 5 * 0.5 + 1 = 3.5 -> 4;  acc 3 -> 1.5 + 1 = 2.5 -> 2 (half to even)
  //   ch 1: acc 1000 -> 125 - 2 = 123 -> 123; acc -1200 -> -150 - 2 = -152 -> -128 (saturated)
  const std::vector<int32_t> acc{5, 3, 1000, -1200};
  const std::vector<float> m = int8_multipliers(0.5f, {1.f, 0.25f});
  EXPECT_EQ(m, (std::vector<float>{0.5f, 0.125f}));
  EXPECT_EQ(int8_requantize(acc, 2, 2, m, {1.f, -2.f}, false, 1.f), (std::vector<int8_t>{4, 2, 123, -128}));
  // output scale 2 (inv 0.5): 3.5 -> 1.75 -> 2; 2.5 -> 1.25 -> 1; 123 -> 61.5 -> 62; -152 -> -76
  EXPECT_EQ(int8_requantize(acc, 2, 2, m, {1.f, -2.f}, false, 2.f), (std::vector<int8_t>{2, 1, 62, -76}));
  // float outputs (a layer feeding a float consumer): the epilogue values themselves
  EXPECT_EQ(int8_dequantize_output(acc, 2, 2, m, {1.f, -2.f}, false), (std::vector<float>{3.5f, 2.5f, 123.f, -152.f}));
  // SiLU: v / (1 + e^-v). v = 0 -> 0; v = 123 -> 123 (e^-123 vanishes); v = -152 -> -0 (e^152 huge);
  // v = 3.5 -> 3.5 / (1 + 0.030197) = 3.3974 -> 3; v = 2.5 -> 2.5 / 1.082085 = 2.3104 -> 2
  const std::vector<int32_t> acc2{5, 3, 1000, -1200, 0, 0};
  EXPECT_EQ(int8_requantize(acc2, 3, 2, {0.5f, 0.125f, 0.5f}, {1.f, -2.f, 0.f}, true, 1.f),
            (std::vector<int8_t>{3, 2, 123, 0, 0, 0}));
}

TEST(Int8Ref, WeightScalesPerChannel) {
  // channel 0: max |w| = 2.54 -> scale 0.02 -> w / 0.02 = {127, -50, 25} (2.54, -1.0, 0.5)
  // channel 1: all zero -> scale 1, weights 0
  // channel 2: max |w| = 1.27 -> scale 0.01 -> {-127, 1, 0} (-1.27, 0.01, 0.004: 0.4 -> 0)
  const std::vector<float> w{2.54f, -1.f, 0.5f, 0.f, 0.f, 0.f, -1.27f, 0.01f, 0.004f};
  const std::vector<float> scales = weight_scales(w.data(), 3, 3);
  ASSERT_EQ(scales.size(), 3u);
  EXPECT_FLOAT_EQ(scales[0], 0.02f);
  EXPECT_FLOAT_EQ(scales[1], 1.f);
  EXPECT_FLOAT_EQ(scales[2], 0.01f);
  EXPECT_EQ(quantize_weights(w.data(), 3, 3, scales), (std::vector<int8_t>{127, -50, 25, 0, 0, 0, -127, 1, 0}));
}

TEST(Int8Ref, BadShapesAreRefused) {
  Int8ConvShape s;
  s.c = 3, s.k = 2, s.group = 2;
  std::string msg;
  EXPECT_EQ(test::code_of([&] { check_int8_conv_shape(s); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("group 2"), std::string::npos) << msg;
  Int8ConvShape e;
  e.h = 1, e.r = 3;
  EXPECT_EQ(test::code_of([&] { check_int8_conv_shape(e); }), ErrorCode::kInvalidArgument);
}

TEST(Sha256, Fips180Examples) {
  EXPECT_EQ(detail::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(detail::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  detail::Sha256 h;  // incremental = one piece
  h.update("abcdbcdecdefdefgefghfghighijhijkijkljklm");
  h.update("klmnlmnomnopnopq");
  EXPECT_EQ(h.hex(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

}  // namespace
}  // namespace yolocu::engine::quant

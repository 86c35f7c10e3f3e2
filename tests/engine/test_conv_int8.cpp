// The INT8 convolution (conv_int8_kernel.hpp) and the fp16 <-> int8 boundary kernels
// (int8_convert.hpp) against a host reference: plain loops accumulating int8 x int8 products in
// int32, then int8_math.hpp's epilogue.
// What must match, on every instantiated tile, on YOLO-like shapes (1x1, 3x3 stride 1 and 2, the
// 6x6 stride-2 stem, C 16..256, batch 1 and 4, 20..80 pixels, odd sizes leaving partial tiles):
//   - int32 output: the accumulators bit-exact (integer sums are exact in any order);
//   - int8 and fp16 outputs: exactly equal, the float epilogue being one definition for both sides
//     (int8_math.hpp spells out every rounding step);
//   - the same outputs against an independent epilogue in double precision (std::exp, double
//     division): int8 within 1 LSB (the float and the double value may round to either side of a
//     .5 boundary) on at most 1% of the outputs, fp16 within 2^-9 relative + 1e-3 absolute; this
//     is what catches a wrong formula in int8_math.hpp itself.
// Split-K gives the same results. Output channels between k and the pitch are never written;
// refused shapes are named. The same checks run Hopper's kernels in test_conv_int8_sm90.cpp; the
// shared parts are conv_int8_test_util.hpp.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "conv_int8_test_util.hpp"
#include "engine/cuda/int8/conv_int8_kernel.hpp"
#include "engine/cuda/int8/conv_int8_sm90.hpp"
#include "engine/cuda/int8/int8_convert.hpp"
#include "engine/cuda/int8/int8_math.hpp"
#include "test_util.hpp"
#include "yolocu/error.hpp"

namespace yolocu::engine {
namespace {

using namespace int8_test;

TEST(ConvInt8, PointwiseLayers) {
  YOLOCU_REQUIRE_GPU();
  check_shape({1, 32, 40, 40, 64, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8}, 1);
  check_shape({4, 256, 20, 20, 128, 1, 1, 0, false, false, Int8Residual::kNone, Int8Out::kInt32}, 2);
  check_shape({2, 48, 31, 29, 24, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8, 40}, 3);
  check_shape({1, 128, 20, 20, 256, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kHalf}, 4);
}

TEST(ConvInt8, ThreeByThreeStrideOne) {
  YOLOCU_REQUIRE_GPU();
  check_shape({4, 64, 20, 20, 64, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kInt8}, 5);
  check_shape({1, 16, 23, 27, 32, 3, 1, 1, true, true, Int8Residual::kHalf, Int8Out::kHalf}, 6);
  check_shape({1, 256, 20, 20, 256, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kInt8}, 7);
  check_shape({1, 32, 80, 80, 32, 3, 1, 1, false, false, Int8Residual::kNone, Int8Out::kInt32}, 8);
}

TEST(ConvInt8, StrideTwoAndStem) {
  YOLOCU_REQUIRE_GPU();
  check_shape({1, 32, 80, 80, 64, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kHalf}, 9);
  check_shape({4, 128, 40, 40, 256, 3, 2, 1, false, false, Int8Residual::kNone, Int8Out::kInt32}, 10);
  check_shape({4, 64, 41, 39, 128, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kInt8}, 11);
  check_shape({1, 16, 64, 64, 32, 6, 2, 2, true, true, Int8Residual::kNone, Int8Out::kInt8}, 12);  // v5 stem
}

// Split-K (slices of the reduction, then a second launch): the same exact results, also with more
// slices asked for than the reduction has steps.
TEST(ConvInt8, SplitK) {
  YOLOCU_REQUIRE_GPU();
  check_shape({1, 256, 20, 20, 256, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kInt8, 0, 4}, 13);
  check_shape({1, 128, 20, 20, 64, 1, 1, 0, true, true, Int8Residual::kHalf, Int8Out::kHalf, 72, 3}, 14);
  check_shape({2, 64, 10, 10, 32, 3, 2, 1, false, false, Int8Residual::kNone, Int8Out::kInt32, 0, 5}, 15);
  check_shape({1, 16, 12, 12, 16, 1, 1, 0, true, false, Int8Residual::kNone, Int8Out::kInt8, 0, 8}, 16);
}

// Small problems with every feature at once (partial tiles, pitch, residual, split-K): what
// compute-sanitizer's racecheck and initcheck run (scripts/gpu/parts/int8.sh).
TEST(ConvInt8, SmallEveryFeature) {
  YOLOCU_REQUIRE_GPU();
  check_shape({1, 32, 9, 11, 40, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kInt8, 48}, 17);
  check_shape({1, 48, 7, 6, 24, 3, 2, 1, true, true, Int8Residual::kHalf, Int8Out::kHalf, 32, 2}, 18);
}

TEST(ConvInt8, RefusesWhatItCannotRun) {
  Int8ConvArgs a;
  a.n = 1, a.c = 24, a.h = a.w_ = 8, a.k = 16, a.p = a.q = 8;
  EXPECT_NE(int8_conv_unsupported(a).find("multiple of 16"), std::string::npos);
  a.c = 32, a.k = 12;
  EXPECT_NE(int8_conv_unsupported(a).find("multiple of 8"), std::string::npos);
  a.k = 16, a.p = 7;
  EXPECT_NE(int8_conv_unsupported(a).find("does not match"), std::string::npos);
  a.p = 8, a.y_pitch = 20;
  EXPECT_NE(int8_conv_unsupported(a).find("pitch"), std::string::npos);
  a.y_pitch = 0;
  EXPECT_NE(int8_conv_unsupported(a).find("required"), std::string::npos);
  alignas(16) static int8_t buf[64];
  static float scale[16];
  a.x = buf, a.w = buf, a.scale = scale, a.y = buf, a.y_scale = 0.f;
  EXPECT_NE(int8_conv_unsupported(a).find("y_scale"), std::string::npos);
  a.y_scale = 1.f, a.residual_type = Int8Residual::kInt8;
  EXPECT_NE(int8_conv_unsupported(a).find("residual"), std::string::npos);
  a.residual_type = Int8Residual::kNone;
  EXPECT_EQ(int8_conv_unsupported(a), "");
  a.split_k = 65;
  EXPECT_NE(int8_conv_unsupported(a).find("split_k"), std::string::npos);
  a.split_k = 2;
  EXPECT_EQ(int8_conv_workspace(a), size_t{2} * 64 * 16 * 4);
  EXPECT_NE(int8_conv_unsupported(a).find("workspace"), std::string::npos);
  a.split_k = 1;
  EXPECT_EQ(int8_conv_workspace(a), 0u);
  a.c = 24;
  EXPECT_THROW(int8_conv_run(a, 0, nullptr), Error);
  EXPECT_THROW(int8_conv_run(a, 99, nullptr), Error);
}

// A second output of the same values (Int8ConvArgs::y2, for a layer whose readers need two forms):
// both outputs exactly the host's epilogue in their own forms on every tile, split-K included (int8
// beside fp16, fp16 beside int8, int8 at two scales, pitched), channels beyond k untouched; refused
// beside int32 sums, misaligned or with a bad scale (Hopper's kernels: ConvInt8Sm90.SecondOutput).
TEST(ConvInt8, SecondOutput) {
  YOLOCU_REQUIRE_GPU();
  const SecondCase cases[] = {
      {{1, 32, 20, 20, 64, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8}, Int8Out::kHalf, 0, 0},
      {{2, 64, 13, 17, 40, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kHalf}, Int8Out::kInt8, 1, 48},
      {{1, 48, 20, 20, 32, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kInt8, 0, 4}, Int8Out::kInt8, 2.5f, 0},
  };
  for (const SecondCase& c : cases) check_second_output(c, mma_tiles());
}

// What a second output is refused for, named (host checks: no GPU needed).
TEST(ConvInt8, SecondOutputRefusals) {
  Int8ConvArgs a;
  a.n = 1, a.c = 16, a.h = a.w_ = 8, a.k = 16, a.p = a.q = 8;
  alignas(16) static int8_t buf[64], y[4096], y2[4096];
  alignas(16) static float fbuf[16];
  a.x = buf, a.w = buf, a.scale = fbuf, a.y = y, a.y2 = y2;
  a.out = Int8Out::kInt32;
  EXPECT_NE(int8_conv_unsupported(a).find("int32"), std::string::npos);
  a.out = Int8Out::kInt8, a.out2 = Int8Out::kInt8, a.y2_scale = 0.f;
  EXPECT_NE(int8_conv_unsupported(a).find("y2_scale"), std::string::npos);
  a.y2_scale = 1.f, a.y2 = y2 + 1;
  EXPECT_NE(int8_conv_unsupported(a).find("y2 misaligned"), std::string::npos);
  a.y2 = y2, a.y2_pitch = 12;
  EXPECT_NE(int8_conv_unsupported(a).find("y2_pitch 12"), std::string::npos);
  a.y2_pitch = 0;
  EXPECT_EQ(int8_conv_unsupported(a), "");
  for (int k = 0; k < static_cast<int>(int8_sm90_kernels().size()); ++k)
    EXPECT_NE(int8_sm90_unsupported(a, k).find("second output"), std::string::npos) << int8_sm90_kernels()[static_cast<size_t>(k)];
}

TEST(ConvInt8, PadsWeightChannelsWithZeros) {
  const std::vector<int8_t> w = {1, 2, 3, 4, 5, 6};  // k 2, 1x1, c 3
  const std::vector<int8_t> p = int8_pad_krsc(w.data(), 2, 1, 1, 3, 16);
  ASSERT_EQ(p.size(), 32u);
  EXPECT_EQ(std::vector<int8_t>(p.begin(), p.begin() + 3), std::vector<int8_t>({1, 2, 3}));
  EXPECT_EQ(std::vector<int8_t>(p.begin() + 16, p.begin() + 19), std::vector<int8_t>({4, 5, 6}));
  EXPECT_EQ(std::count(p.begin(), p.end(), 0), 26);
  EXPECT_EQ(int8_padded_channels(3), 16);
  EXPECT_EQ(int8_padded_channels(32), 32);
  EXPECT_THROW(int8_pad_krsc(w.data(), 2, 1, 1, 3, 2), Error);
}

// fp16 -> int8 of a packed tensor (the engine's Quantize steps): 16 values a thread, and a tail of
// values one by one (pixels * channels not a multiple of 16), each equal to the host's quantisation.
TEST(Int8Convert, QuantisePacked) {
  YOLOCU_REQUIRE_GPU();
  const int pixels = 1001, c = 12;  // 12012 values: 750 groups of 16 and 12 more
  const float scale = 0.37f;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-60.f, 60.f);
  std::vector<__half> x(static_cast<size_t>(pixels) * c);
  for (auto& v : x) v = __float2half_rn(u(rng));
  Dev dx(x), dq(x.size());
  int8_quantize_run(dx.p, c, c, static_cast<int8_t*>(dq.p), c, pixels, scale, nullptr);
  std::vector<int8_t> q(x.size());
  ASSERT_EQ(cudaMemcpy(q.data(), dq.p, q.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) bad += q[i] != int8::quantize(__half2float(x[i]), scale);
  EXPECT_EQ(bad, 0u);
}

// fp16 -> int8 from a pitched 20-channel slice into 32 channels (zeros past 20): random values and
// hand-computed edge cases (ties to even, saturation, infinities, NaN); int8 -> fp16 of every int8
// value into a pitched buffer (channels past c untouched), 4 channels per thread and 1.
TEST(Int8Convert, QuantiseAndDequantise) {
  YOLOCU_REQUIRE_GPU();
  const int pixels = 997, x_pitch = 24, c_src = 20, c_dst = 32;
  const float scale = 0.5f;
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-80.f, 80.f);
  std::vector<__half> x(static_cast<size_t>(pixels) * x_pitch);
  for (auto& v : x) v = __float2half_rn(u(rng));
  // (value, expected int8) with scale 0.5: v / 0.5 = 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<float, int>> edge = {{0.25f, 0}, {0.75f, 2}, {1.25f, 2}, {-0.25f, 0}, {-0.75f, -2},
                                                   {63.5f, 127}, {63.75f, 127}, {-64.f, -128}, {-64.25f, -128},
                                                   {1000.f, 127}, {-1000.f, -128}, {inf, 127}, {-inf, -128},
                                                   {std::nanf(""), 0}, {0.f, 0}, {10.25f, 20}};
  for (size_t i = 0; i < edge.size(); ++i) x[i] = __float2half_rn(edge[i].first);
  Dev dx(x), dq(static_cast<size_t>(pixels) * c_dst);
  int8_quantize_run(dx.p, x_pitch, c_src, static_cast<int8_t*>(dq.p), c_dst, pixels, scale, nullptr);
  std::vector<int8_t> q(static_cast<size_t>(pixels) * c_dst);
  ASSERT_EQ(cudaMemcpy(q.data(), dq.p, q.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  size_t bad = 0;
  for (int p = 0; p < pixels; ++p)
    for (int c = 0; c < c_dst; ++c) {
      const int8_t got = q[static_cast<size_t>(p) * c_dst + c];
      const float v = __half2float(x[static_cast<size_t>(p) * x_pitch + c]);
      const int8_t want = c < c_src ? int8::quantize(v, scale) : int8_t{0};
      bad += got != want;
      // (the independent rule; NaN, which it cannot order, is the edge list's case: 0)
      if (c < c_src && !std::isnan(v)) bad += std::fabs(got - std::min(127.0, std::max(-128.0, std::nearbyint(v / 0.5)))) > 0;
    }
  EXPECT_EQ(bad, 0u);
  for (size_t i = 0; i < edge.size(); ++i) EXPECT_EQ(q[i], edge[i].second) << "quantize(" << edge[i].first << ")";

  std::vector<int8_t> all(static_cast<size_t>(256) * 32);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int8_t>(static_cast<int>(i % 256) - 128);
  const float dscale = 0.0371f;
  std::vector<__half> y(static_cast<size_t>(256) * 40, __float2half_rn(-7.f));
  Dev dall(all), dy(y);
  int8_dequantize_run(static_cast<const int8_t*>(dall.p), 32, dy.p, 40, 256, dscale, nullptr);
  ASSERT_EQ(cudaMemcpy(y.data(), dy.p, y.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  bad = 0;
  for (size_t p = 0; p < 256; ++p)
    for (size_t c = 0; c < 40; ++c) {
      const float got = __half2float(y[p * 40 + c]);
      if (c >= 32) {
        bad += got != -7.f;
        continue;
      }
      const int8_t v = all[p * 32 + c];
      bad += got != __half2float(__float2half_rn(int8::dequantize(v, dscale)));
      bad += std::fabs(got - v * static_cast<double>(dscale)) > std::fabs(v * dscale) / 1024 + 1e-7;
    }
  EXPECT_EQ(bad, 0u);
  // 6 channels into a pitch of 7: one channel per thread
  std::vector<__half> y7(static_cast<size_t>(50) * 7, __float2half_rn(-7.f));
  Dev dy7(y7);
  int8_dequantize_run(static_cast<const int8_t*>(dall.p), 6, dy7.p, 7, 50, dscale, nullptr);
  ASSERT_EQ(cudaMemcpy(y7.data(), dy7.p, y7.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  bad = 0;
  for (size_t p = 0; p < 50; ++p) {
    for (size_t c = 0; c < 6; ++c)
      bad += __half2float(y7[p * 7 + c]) != __half2float(__float2half_rn(int8::dequantize(all[p * 6 + c], dscale)));
    bad += __half2float(y7[p * 7 + 6]) != -7.f;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_THROW(int8_quantize_run(dx.p, x_pitch, c_src, static_cast<int8_t*>(dq.p), 18, pixels, scale, nullptr), Error);
  EXPECT_THROW(int8_quantize_run(dx.p, x_pitch, c_src, static_cast<int8_t*>(dq.p), c_dst, pixels, 0.f, nullptr), Error);
  EXPECT_THROW(int8_dequantize_run(static_cast<const int8_t*>(dall.p), 32, dy.p, 16, 256, dscale, nullptr), Error);
}

// The 3-channel stem as the INT8 path runs it: the fp16 image quantised on the GPU into 16
// channels (zeros past 3), the weights padded by int8_pad_krsc; the accumulators and outputs equal
// the host's convolution over the 3 real channels.
TEST(ConvInt8, PaddedStemFromFp16) {
  YOLOCU_REQUIRE_GPU();
  Shape sh3{2, 3, 64, 48, 32, 6, 2, 2, true, true, Int8Residual::kNone, Int8Out::kInt8};
  Data d = make_data(sh3, 31);
  std::mt19937 rng(32);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<__half> img(d.x.size());
  for (auto& v : img) v = __float2half_rn(u(rng));
  const float x_scale = 1.f / 127;
  for (size_t i = 0; i < img.size(); ++i) d.x[i] = int8::quantize(__half2float(img[i]), x_scale);
  const std::vector<int32_t> acc = host_acc(sh3, d);

  Shape sh16 = sh3;
  sh16.c = int8_padded_channels(3);
  const int64_t pixels = int64_t{sh3.n} * sh3.h * sh3.w;
  Dev dimg(img), dx(static_cast<size_t>(pixels) * sh16.c);
  int8_quantize_run(dimg.p, 3, 3, static_cast<int8_t*>(dx.p), sh16.c, pixels, x_scale, nullptr);
  Data d16 = d;
  d16.x.resize(static_cast<size_t>(pixels) * sh16.c);
  ASSERT_EQ(cudaMemcpy(d16.x.data(), dx.p, d16.x.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(d16.x, int8_pad_krsc(d.x.data(), static_cast<int>(pixels), 1, 1, 3, sh16.c));
  d16.w = int8_pad_krsc(d.w.data(), sh3.k, sh3.r, sh3.r, 3, sh16.c);
  check_data(sh16, d16, acc, mma_tiles());
  sh16.out = Int8Out::kInt32;
  check_data(sh16, d16, acc, mma_tiles());
}

}  // namespace
}  // namespace yolocu::engine

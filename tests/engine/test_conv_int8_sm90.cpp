// Hopper's INT8 kernels (conv_int8_sm90.hpp: 1x1 layers on CUTLASS's persistent GEMM, any filter on
// its im2col mainloop in yolocu's persistent kernel, the epilogue fused) against the host reference,
// with test_conv_int8.cpp's checks (conv_int8_test_util.hpp) on the shapes they take: exactly the
// host's outputs, one or two forms, with and without an fp16 residual; what they refuse, named.
// Skipped visibly without CUTLASS's sm90 build or without a Hopper GPU.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "conv_int8_test_util.hpp"
#include "engine/cuda/int8/conv_int8_sm90.hpp"
#include "test_util.hpp"
#include "yolocu/error.hpp"

namespace yolocu::engine {
namespace {

using namespace int8_test;

// Why the sm90 tests cannot run here (no kernels in this build, not a Hopper GPU), or "".
std::string sm90_skip_reason() {
  if (int8_sm90_kernels().empty()) return "this build has no sm90 INT8 kernels (CUTLASS 3.5+ not found)";
  Int8ConvArgs probe;
  probe.n = probe.h = probe.w_ = probe.p = probe.q = 1, probe.c = probe.k = 16;
  alignas(16) static int8_t buf[16];
  alignas(16) static float scale[16];
  probe.x = probe.w = buf, probe.y = buf, probe.scale = scale;
  const std::string why = int8_sm90_unsupported(probe, 0);
  if (why.find("sm_90") != std::string::npos) return why;
  EXPECT_EQ(why, "") << "a 1x1 probe the sm90 kernels should take";
  return {};
}

// Hopper's 1x1 path: bias and SiLU on or off, int8 and fp16 outputs, pitched outputs, pixel counts
// that leave partial tiles (31 x 29), and a yolov5s-sized layer; exactly the host's results.
TEST(ConvInt8Sm90, PointwiseLayers) {
  YOLOCU_REQUIRE_GPU();
  const std::string why = sm90_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::vector<Runner> k = sm90_kernels();
  check_shape({1, 32, 40, 40, 64, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8}, 21, k);
  check_shape({2, 48, 31, 29, 32, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8, 48}, 22, k);
  check_shape({4, 256, 20, 20, 128, 1, 1, 0, false, false, Int8Residual::kNone, Int8Out::kHalf}, 23, k);
  check_shape({1, 128, 20, 20, 256, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kHalf, 264}, 24, k);
  check_shape({2, 64, 80, 80, 64, 1, 1, 0, true, false, Int8Residual::kNone, Int8Out::kInt8}, 25, k);
}

// Hopper's im2col path: 3x3 stride 1 and 2 with padding, partial tiles, an fp16 residual, pitched
// outputs, the 6x6 stride-2 stem; exactly the host's results. (PointwiseLayers runs it on 1x1.)
TEST(ConvInt8Sm90, Im2colLayers) {
  YOLOCU_REQUIRE_GPU();
  const std::string why = sm90_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::vector<Runner> k = im2col_kernels();
  ASSERT_FALSE(k.empty());
  check_shape({4, 64, 20, 20, 64, 3, 1, 1, true, true, Int8Residual::kHalf, Int8Out::kInt8}, 31, k);
  check_shape({1, 16, 23, 27, 32, 3, 1, 1, true, true, Int8Residual::kHalf, Int8Out::kHalf}, 32, k);
  check_shape({1, 32, 80, 80, 64, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kHalf}, 33, k);
  check_shape({4, 64, 41, 39, 128, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kInt8}, 34, k);
  check_shape({2, 128, 20, 20, 128, 3, 1, 1, true, true, Int8Residual::kNone, Int8Out::kInt8, 256}, 35, k);
  check_shape({1, 256, 20, 20, 256, 3, 1, 1, false, false, Int8Residual::kNone, Int8Out::kHalf}, 36, k);
  check_shape({1, 16, 64, 64, 32, 6, 2, 2, true, true, Int8Residual::kNone, Int8Out::kInt8}, 37, k);
}

// Both forms from one launch (int8 through the epilogue's output, fp16 through CUTLASS's auxiliary
// store), in either order, with and without the fp16 residual, pitched: exactly the host's results,
// as the mma.sync kernel's two outputs.
TEST(ConvInt8Sm90, SecondOutput) {
  YOLOCU_REQUIRE_GPU();
  const std::string why = sm90_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  std::vector<Runner> pointwise;  // every sm90 kernel but the resident-row and pingpong ones (one output)
  for (Runner& k : sm90_kernels())
    if (k.id.back() != 'r' && k.id.find(":pp-") == std::string::npos) pointwise.push_back(std::move(k));
  check_second_output({{1, 32, 20, 20, 64, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8}, Int8Out::kHalf, 0, 0},
                      pointwise);
  check_second_output({{2, 64, 13, 17, 48, 3, 1, 1, true, true, Int8Residual::kHalf, Int8Out::kHalf}, Int8Out::kInt8, 1, 64},
                      im2col_kernels());
  check_second_output({{1, 48, 20, 20, 32, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kInt8, 48}, Int8Out::kHalf, 1, 40},
                      im2col_kernels());
}

TEST(ConvInt8Sm90, RefusesWhatItCannotRun) {
  Int8ConvArgs a;
  alignas(16) static int8_t buf[64];
  alignas(16) static float scale[64];
  a.n = 1, a.c = 32, a.h = a.w_ = 8, a.k = 32, a.p = a.q = 8, a.x = a.w = buf, a.y = buf, a.scale = scale;
  if (int8_sm90_kernels().empty()) {
    EXPECT_NE(int8_sm90_unsupported(a, 0).find("CUTLASS"), std::string::npos);
    EXPECT_THROW(int8_sm90_run(a, 0, nullptr), Error);
    return;
  }
  const int kernels = static_cast<int>(int8_sm90_kernels().size());
  EXPECT_NE(int8_sm90_unsupported(a, kernels).find("no kernel"), std::string::npos);
  int im2col = 0;  // the first im2col kernel
  while (im2col < kernels && int8_sm90_kernels()[static_cast<size_t>(im2col)].find("im2col") == std::string::npos) ++im2col;
  ASSERT_LT(im2col, kernels) << "no im2col kernel listed";
  a.r = a.s = 3, a.pad_h = a.pad_w = 1, a.residual = buf, a.residual_type = Int8Residual::kInt8, a.silu = true;
  EXPECT_NE(int8_sm90_unsupported(a, im2col).find("int8 residual"), std::string::npos);
  a.residual_type = Int8Residual::kHalf, a.silu = false;
  EXPECT_NE(int8_sm90_unsupported(a, im2col).find("after SiLU"), std::string::npos);
  a.residual_type = Int8Residual::kNone, a.residual = nullptr;
  a.pad_h = a.pad_w = 300, a.p = a.q = 606;  // beyond TMA im2col's padding
  EXPECT_NE(int8_sm90_unsupported(a, im2col).find("cannot run this problem"), std::string::npos);
  a.p = a.q = 8, a.r = a.s = 1, a.pad_h = a.pad_w = 0;
  a.r = a.s = 3, a.pad_h = a.pad_w = 1;
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("1x1"), std::string::npos);
  a.r = a.s = 1, a.pad_h = a.pad_w = 0, a.residual_type = Int8Residual::kInt8, a.residual = buf;
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("residual"), std::string::npos);
  a.residual_type = Int8Residual::kNone, a.residual = nullptr;
  for (int kernel = 0; kernel < im2col; ++kernel) {  // the one-output 1x1 kernels refuse a second output
    const std::string& id = int8_sm90_kernels()[static_cast<size_t>(kernel)];
    if (id.back() != 'r' && id.find(":pp-") == std::string::npos) continue;
    a.y2 = buf, a.out2 = Int8Out::kHalf, a.silu = true;
    EXPECT_NE(int8_sm90_unsupported(a, kernel).find("a second output is not taken"), std::string::npos) << id;
    a.y2 = nullptr, a.silu = false;
  }
  a.out = Int8Out::kInt32;
  EXPECT_NE(int8_sm90_unsupported(a, 1).find("int8 or fp16"), std::string::npos);
  a.out = Int8Out::kInt8, a.k = 24;
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("multiples of 16"), std::string::npos);
  a.k = 32, a.y_pitch = 40;
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("multiples of 16"), std::string::npos);
  a.y_pitch = 0, a.c = 24;  // what the mma.sync kernel refuses, this path refuses too
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("multiple of 16"), std::string::npos);
  EXPECT_THROW(int8_sm90_run(a, 0, nullptr), Error);
}

}  // namespace
}  // namespace yolocu::engine

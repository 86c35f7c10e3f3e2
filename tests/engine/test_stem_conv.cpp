// The direct stem convolution (stem_conv_kernel.cu) against a direct convolution on the host, from
// NCHW fp16 input: YOLOv5's 6x6 pad-2 stem and YOLOv8's 3x3 pad-1 stem (an odd pad: the window's
// zero column), 16 and 32 outputs, images whose sizes leave partial blocks, one and three channels,
// a pitched output (the channels between slices stay untouched), without bias or SiLU, a 640x640
// image, several 640x640 images; infinities in the input reach exactly the outputs whose filter reads them; what the kernel
// refuses is named.
// Tolerance: both sides see the same fp16 inputs and weights; the kernel accumulates in fp32 in
// another order than the host's double and rounds once to fp16 (rel. 2^-11): rel L2 <= 2e-3 and
// |d| <= 1e-2 * max(1, |ref|), as for the other own kernels (test_conv_kernels.cpp).
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cuda/tactics/stem_conv_kernel.hpp"
#include "yolocu/error.hpp"
#include "test_util.hpp"

namespace yolocu::engine {
namespace {

struct StemShape {
  int n, c, h, w, k, r, pad;
  bool bias, silu;
  int y_pitch = 0;
};

StemConvArgs args_of(const StemShape& sh) {
  StemConvArgs a;
  a.n = sh.n, a.c = sh.c, a.h = sh.h, a.w_ = sh.w, a.k = sh.k, a.r = a.s = sh.r;
  a.pad_h = a.pad_w = sh.pad;
  a.p = (sh.h + 2 * sh.pad - sh.r) / 2 + 1;
  a.q = (sh.w + 2 * sh.pad - sh.r) / 2 + 1;
  a.y_pitch = sh.y_pitch;
  a.silu = sh.silu;
  return a;
}

struct Result {
  std::vector<float> y;    // [n, p, q, yp] as stored
  std::vector<double> ref; // [n, p, q, k]
};

// Runs the kernel on `x` (NCHW) and the host convolution; weights and bias from fixed seeds.
Result run_stem(const StemShape& sh, const std::vector<__half>& x) {
  StemConvArgs a = args_of(sh);
  EXPECT_EQ(stem_conv_unsupported(a), "");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  std::vector<float> w(static_cast<size_t>(sh.k) * sh.c * sh.r * sh.r);
  for (float& v : w) v = __half2float(__float2half_rn(u(rng)));  // what the kernel sees
  std::vector<float> bias(static_cast<size_t>(sh.k));
  for (int i = 0; i < sh.k; ++i) bias[static_cast<size_t>(i)] = 0.05f * static_cast<float>(i % 7) - 0.15f;
  const std::vector<uint16_t> packed = stem_conv_pack(a, w.data());
  const int yp = sh.y_pitch > 0 ? sh.y_pitch : sh.k;
  const size_t ny = static_cast<size_t>(sh.n) * a.p * a.q * yp;
  void *dx = nullptr, *dw = nullptr, *db = nullptr, *dy = nullptr;
  EXPECT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dw, packed.size() * 2), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&db, bias.size() * 4), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dy, ny * 2), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dw, packed.data(), packed.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(db, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const std::vector<__half> fill(ny, __float2half_rn(-7.f));
  EXPECT_EQ(cudaMemcpy(dy, fill.data(), ny * 2, cudaMemcpyHostToDevice), cudaSuccess);
  a.x = dx, a.w = dw, a.bias = sh.bias ? static_cast<const float*>(db) : nullptr, a.y = dy;
  stem_conv_run(a, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<__half> yh(ny);
  EXPECT_EQ(cudaMemcpy(yh.data(), dy, ny * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* d : {dx, dw, db, dy}) cudaFree(d);
  Result r;
  r.y.resize(ny);
  for (size_t i = 0; i < ny; ++i) r.y[i] = __half2float(yh[i]);
  r.ref.resize(static_cast<size_t>(sh.n) * a.p * a.q * sh.k);
  for (int n = 0; n < sh.n; ++n)
    for (int oy = 0; oy < a.p; ++oy)
      for (int ox = 0; ox < a.q; ++ox)
        for (int k = 0; k < sh.k; ++k) {
          double acc = 0;
          for (int c = 0; c < sh.c; ++c)
            for (int ky = 0; ky < sh.r; ++ky)
              for (int kx = 0; kx < sh.r; ++kx) {
                const int iy = 2 * oy - sh.pad + ky, ix = 2 * ox - sh.pad + kx;
                if (iy < 0 || iy >= sh.h || ix < 0 || ix >= sh.w) continue;
                acc += static_cast<double>(__half2float(x[((static_cast<size_t>(n) * sh.c + c) * sh.h + iy) * sh.w + ix])) *
                       w[((static_cast<size_t>(k) * sh.c + c) * sh.r + ky) * sh.r + kx];
              }
          if (sh.bias) acc += bias[static_cast<size_t>(k)];
          if (sh.silu) acc = acc / (1.0 + std::exp(-acc));
          r.ref[((static_cast<size_t>(n) * a.p + oy) * a.q + ox) * sh.k + k] = acc;
        }
  return r;
}

std::string describe(const StemShape& sh) {
  return "n" + std::to_string(sh.n) + " c" + std::to_string(sh.c) + " " + std::to_string(sh.h) + "x" +
         std::to_string(sh.w) + " k" + std::to_string(sh.k) + " " + std::to_string(sh.r) + "x" + std::to_string(sh.r) +
         " pad" + std::to_string(sh.pad) + (sh.bias ? " bias" : "") + (sh.silu ? " silu" : "") + " pitch" +
         std::to_string(sh.y_pitch);
}

void check_case(const StemShape& sh) {
  const size_t nx = static_cast<size_t>(sh.n) * sh.c * sh.h * sh.w;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.f, 1.f);  // image-like: the letterbox's 0..1
  std::vector<__half> x(nx);
  for (auto& v : x) v = __float2half_rn(u(rng));
  const Result r = run_stem(sh, x);
  const int yp = sh.y_pitch > 0 ? sh.y_pitch : sh.k;
  double sq = 0, sq_ref = 0, max_d = 0, max_ref = 0;
  size_t touched = 0;
  for (size_t pix = 0; pix < r.ref.size() / static_cast<size_t>(sh.k); ++pix) {
    for (int k = 0; k < yp; ++k) {
      const float got = r.y[pix * static_cast<size_t>(yp) + static_cast<size_t>(k)];
      if (k >= sh.k) {
        touched += got != -7.f;
        continue;
      }
      const double ref = r.ref[pix * static_cast<size_t>(sh.k) + static_cast<size_t>(k)];
      const double d = std::fabs(static_cast<double>(got) - ref);
      sq += d * d, sq_ref += ref * ref;
      max_d = std::max(max_d, std::isnan(d) ? 1e30 : d);
      max_ref = std::max(max_ref, std::fabs(ref));
    }
  }
  const double rel = std::sqrt(sq / std::max(sq_ref, 1e-30));
  EXPECT_LE(rel, 2e-3) << describe(sh);
  EXPECT_LE(max_d, 1e-2 * std::max(1.0, max_ref)) << describe(sh);
  EXPECT_EQ(touched, 0u) << describe(sh) << ": channels of other slices written";
  std::printf("      stem %s: rel L2 %.2e, max |d| %.2e\n", describe(sh).c_str(), rel, max_d);
}

TEST(StemConv, MatchesDirectConvolution) {
  YOLOCU_REQUIRE_GPU();
  const StemShape shapes[] = {
      {2, 3, 70, 136, 16, 6, 2, true, true},    // yolov5n's stem; 68 columns: a partial second block
      {2, 3, 70, 136, 32, 6, 2, true, true},    // yolov5s's
      {1, 3, 66, 136, 16, 3, 1, true, true},    // yolov8n's 3x3 pad 1 (the window's zero column)
      {1, 3, 66, 200, 32, 3, 1, true, true},
      {1, 3, 34, 64, 32, 5, 2, true, true},     // 5x5: 6 k-steps, the window's zero column behind
      {2, 1, 30, 40, 16, 6, 2, true, true},     // one channel (grey)
      {1, 3, 18, 24, 32, 6, 2, false, false},   // fewer pixels than a block; no bias, no SiLU
      {1, 3, 70, 136, 32, 6, 2, true, true, 48},  // a pitched output
      {1, 3, 640, 640, 32, 6, 2, true, true},   // the full size
      {3, 3, 640, 640, 16, 6, 2, true, true},   // several images: blocks step across image ends
  };
  for (const StemShape& s : shapes) check_case(s);
}

// +inf in the input: outputs whose filter does not read it stay finite and exact; those that read
// it are not finite. The window's zero column (3x3 pad 1) and the reduction's padding read image
// pixels too: their entries are masked, so an infinity there changes nothing.
TEST(StemConv, InfinitiesReachOnlyTheOutputsThatReadThem) {
  YOLOCU_REQUIRE_GPU();
  for (const StemShape sh : {StemShape{1, 3, 34, 72, 16, 3, 1, true, false}, StemShape{1, 3, 34, 72, 32, 6, 2, true, false}}) {
    std::vector<__half> x(static_cast<size_t>(sh.c) * sh.h * sh.w, __float2half_rn(0.5f));
    const __half inf = __float2half_rn(std::numeric_limits<float>::infinity());
    for (const auto& [c, y, xx] : {std::tuple<int, int, int>{0, 5, 9}, {2, 20, 40}, {1, 33, 69}, {0, 0, 0}})
      x[(static_cast<size_t>(c) * sh.h + y) * sh.w + xx] = inf;
    const Result r = run_stem(sh, x);
    size_t finite_ref = 0, wrong = 0;
    for (size_t i = 0; i < r.ref.size(); ++i) {
      const double ref = r.ref[i];
      const float got = r.y[i];
      if (std::isfinite(ref)) {
        ++finite_ref;
        wrong += !(std::fabs(static_cast<double>(got) - ref) <= 1e-2 * std::max(1.0, std::fabs(ref)));
      } else {
        wrong += std::isfinite(got);
      }
    }
    EXPECT_EQ(wrong, 0u) << describe(sh);
    EXPECT_GT(finite_ref, r.ref.size() / 2) << describe(sh);
  }
}

// The kernel copies the input 16 bytes at a time: an input that is not 16-byte aligned is refused
// by name (the engine copies such an input first).
TEST(StemConv, RefusesAnUnalignedInput) {
  YOLOCU_REQUIRE_GPU();
  StemConvArgs a = args_of({1, 3, 64, 64, 16, 6, 2, true, true});
  void *dx = nullptr, *dy = nullptr, *dw = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, 3 * 64 * 64 * 2 + 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, static_cast<size_t>(a.p) * a.q * 16 * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dw, 4096), cudaSuccess);
  a.x = static_cast<char*>(dx) + 4, a.y = dy, a.w = dw;
  try {
    stem_conv_run(a, nullptr);
    ADD_FAILURE() << "an input at +4 bytes was run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not 16-byte aligned"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (void* d : {dx, dy, dw}) cudaFree(d);
}

TEST(StemConv, RefusesWhatItCannotRun) {
  StemConvArgs a = args_of({1, 3, 64, 64, 32, 6, 2, true, true});
  EXPECT_EQ(stem_conv_unsupported(a), "");
  StemConvArgs b = a;
  b.k = 48;
  EXPECT_NE(stem_conv_unsupported(b).find("output channels 48"), std::string::npos);
  b = a;
  b.c = 4;  // 4 * 6 * 6 = 144 > 112
  EXPECT_NE(stem_conv_unsupported(b).find("reduction"), std::string::npos);
  b = a;
  b.w_ = 68;
  b.q = (68 + 4 - 6) / 2 + 1;
  EXPECT_NE(stem_conv_unsupported(b).find("input width 68 (a multiple of 8)"), std::string::npos);
  b = a;
  b.p += 1;
  EXPECT_NE(stem_conv_unsupported(b).find("output size"), std::string::npos);
  b = a;
  b.y_pitch = 33;
  EXPECT_NE(stem_conv_unsupported(b).find("pitch"), std::string::npos);
  b = a;
  b.r = b.s = 9;
  EXPECT_NE(stem_conv_unsupported(b).find("filter"), std::string::npos);
}

}  // namespace
}  // namespace yolocu::engine

// The GPU engine's own layer kernels that replace several graph steps, against the graph's own
// definition computed on the host:
// - SPPF (sppf_kernel.cu) against three literal ONNX MaxPools (stride 1, padding k / 2, padding taps
//   skipped, NaN propagating) chained, and their Concat with the input. Max is exact, so the
//   comparison is bitwise, in FP16 and FP32, with NaN and infinities among the inputs, on the
//   vector path and the one-channel path (channel counts or pitches that break 16-byte vectors),
//   with pitched input and output.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/gpu_steps.hpp"
#include "test_util.hpp"

namespace yolocu {
namespace {

struct SppfCase {
  int n, h, w, c, k, x_pitch, y_pitch;
};

// One k x k stride-1 max pool with padding k / 2 over [n, h, w, c] (pixel pitch c), as ONNX and
// the CPU engine define it.
std::vector<float> maxpool(const std::vector<float>& x, int n, int h, int w, int c, int k) {
  std::vector<float> y(x.size());
  const int r = k / 2;
  for (int b = 0; b < n; ++b)
    for (int py = 0; py < h; ++py)
      for (int px = 0; px < w; ++px)
        for (int ch = 0; ch < c; ++ch) {
          float m = -INFINITY;
          for (int yy = std::max(0, py - r); yy <= std::min(h - 1, py + r); ++yy)
            for (int xx = std::max(0, px - r); xx <= std::min(w - 1, px + r); ++xx) {
              const float f = x[((static_cast<size_t>(b) * h + yy) * w + xx) * c + ch];
              m = (f > m || std::isnan(f)) ? f : m;
            }
          y[((static_cast<size_t>(b) * h + py) * w + px) * c + ch] = m;
        }
  return y;
}

bool same_bits(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

void check_sppf(const SppfCase& t, bool half, uint32_t seed) {
  SCOPED_TRACE(std::string(half ? "fp16 " : "fp32 ") + std::to_string(t.n) + "x" + std::to_string(t.h) + "x" +
               std::to_string(t.w) + "x" + std::to_string(t.c) + " k" + std::to_string(t.k));
  // Values the storage type holds exactly, with NaN, +inf and -inf among them.
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-8.f, 8.f);
  const size_t pixels = static_cast<size_t>(t.n) * t.h * t.w;
  std::vector<float> x(pixels * t.c);
  for (size_t i = 0; i < x.size(); ++i) {
    float v = u(rng);
    if (i % 97 == 5) v = NAN;
    if (i % 89 == 7) v = INFINITY;
    if (i % 83 == 11) v = -INFINITY;
    x[i] = half ? __half2float(__float2half_rn(v)) : v;
  }
  const std::vector<float> p1 = maxpool(x, t.n, t.h, t.w, t.c, t.k), p2 = maxpool(p1, t.n, t.h, t.w, t.c, t.k),
                           p3 = maxpool(p2, t.n, t.h, t.w, t.c, t.k);
  const size_t es = half ? 2 : 4;
  // Device buffers: x with its pitch, y pre-filled with a sentinel that the channels past 4c keep.
  std::vector<uint8_t> hx(pixels * t.x_pitch * es, 0), hy(pixels * t.y_pitch * es, 0x7b);
  auto put = [&](std::vector<uint8_t>& buf, size_t idx, float v) {
    if (half) {
      const __half h = __float2half_rn(v);
      std::memcpy(&buf[idx * 2], &h, 2);
    } else {
      std::memcpy(&buf[idx * 4], &v, 4);
    }
  };
  auto get = [&](const std::vector<uint8_t>& buf, size_t idx) {
    if (half) {
      __half h;
      std::memcpy(&h, &buf[idx * 2], 2);
      return __half2float(h);
    }
    float v;
    std::memcpy(&v, &buf[idx * 4], 4);
    return v;
  };
  for (size_t p = 0; p < pixels; ++p)
    for (int ch = 0; ch < t.c; ++ch) put(hx, p * t.x_pitch + ch, x[p * t.c + ch]);
  void *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, hx.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, hy.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, hx.data(), hx.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dy, hy.data(), hy.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const std::vector<uint8_t> sentinel = hy;
  cuda_kernels::sppf_nhwc(dx, dy, half, t.n, t.h, t.w, t.c, t.x_pitch, t.y_pitch, t.k, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(hy.data(), dy, hy.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dx);
  cudaFree(dy);
  int64_t wrong = 0, touched = 0;
  const std::vector<float>* slices[4] = {&x, &p1, &p2, &p3};
  for (size_t p = 0; p < pixels; ++p) {
    for (int s = 0; s < 4; ++s)
      for (int ch = 0; ch < t.c; ++ch) {
        const float want = (*slices[s])[p * t.c + ch], got = get(hy, p * t.y_pitch + s * t.c + ch);
        if (!same_bits(want, got) && ++wrong <= 5)
          ADD_FAILURE() << "pixel " << p << " slice " << s << " channel " << ch << ": " << got << ", want " << want;
      }
    for (size_t b = (p * t.y_pitch + 4 * t.c) * es; b < (p + 1) * t.y_pitch * es; ++b) touched += hy[b] != sentinel[b];
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(touched, 0) << "bytes past the 4c channels of a pixel were written";
}

TEST(SppfKernel, MatchesThreeChainedMaxPools) {
  YOLOCU_REQUIRE_GPU();
  const SppfCase cases[] = {
      {2, 20, 20, 32, 5, 32, 128},   // yolov5's SPPF (fewer channels), packed
      {1, 7, 13, 5, 3, 8, 24},       // channels not a multiple of the group, pitched in and out
      {3, 1, 9, 19, 5, 19, 80},      // one row: every column window clipped
      {1, 12, 12, 40, 7, 40, 160},   // another kernel size
      {2, 20, 20, 24, 5, 32, 96},    // vectors with a pitched input
      {1, 26, 26, 16, 5, 16, 64},    // the largest square map that fits (676 pixels)
  };
  uint32_t seed = 1;
  for (bool half : {true, false})
    for (const SppfCase& t : cases) check_sppf(t, half, seed++);
}

// The kernel's shared memory (four planes of 16 bytes a pixel, 48 KB) holds maps of up to 768
// pixels; the plan keeps the pools for larger ones.
TEST(SppfKernel, MapsThatFit) {
  EXPECT_TRUE(engine::sppf_fits(20, 20));
  EXPECT_TRUE(engine::sppf_fits(26, 26));
  EXPECT_TRUE(engine::sppf_fits(1, 768));
  EXPECT_FALSE(engine::sppf_fits(28, 28));
  EXPECT_FALSE(engine::sppf_fits(40, 40));
  EXPECT_FALSE(engine::sppf_fits(0, 20));
}

}  // namespace
}  // namespace yolocu

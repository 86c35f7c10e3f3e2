// int8_math.hpp on the device against the same functions on the host, bit for bit: the reciprocal
// (the hardware's approximation and one Newton step) against CUDA's correctly rounded __frcp_rn for
// every float of the range it serves, [1, 2^126); exp2, exp, the convolution's value, the
// quantisation and the epilogue's requantisation over dense sweeps, random values and the special
// ones (0, -0, infinities, NaN, values past the clamps). SiLU (alone and in the convolution's
// value), which the device computes with the hardware's 2^t and reciprocal approximations: within
// kSiluDeviceTolerance of the host's, relative, the same special values (infinities, NaN) on both
// sides. Skips visibly without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_util.hpp"
#include "engine/cuda/int8/int8_math.hpp"
#include "test_util.hpp"

namespace yolocu::engine {
namespace {

using test::DeviceBuffer;

// Counts the d in [lo, hi) (as float bits) where rcp_rn(d) != __frcp_rn(d); the first in *first.
__global__ void rcp_mismatches(uint32_t lo, uint32_t hi, unsigned long long* count, uint32_t* first) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t u = lo + blockIdx.x * blockDim.x + threadIdx.x; u < hi; u += stride) {
    const float d = __uint_as_float(u);
    if (__float_as_uint(int8::rcp_rn(d)) != __float_as_uint(__frcp_rn(d))) {
      atomicAdd(count, 1ull);
      atomicMin(first, u);
    }
  }
}

TEST(Int8MathCuda, ReciprocalRoundsCorrectlyOnItsWholeRange) {
  YOLOCU_REQUIRE_GPU();
  DeviceBuffer count(sizeof(unsigned long long)), first(sizeof(uint32_t));
  ASSERT_EQ(cudaMemset(count.p, 0, sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaMemset(first.p, 0xff, sizeof(uint32_t)), cudaSuccess);
  const uint32_t lo = 0x3f800000u, hi = 0x7e800000u;  // 1 and 2^126
  rcp_mismatches<<<1024, 256>>>(lo, hi, static_cast<unsigned long long*>(count.p), static_cast<uint32_t*>(first.p));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  unsigned long long n = 0;
  uint32_t f = 0;
  ASSERT_EQ(cudaMemcpy(&n, count.p, sizeof n, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&f, first.p, sizeof f, cudaMemcpyDeviceToHost), cudaSuccess);
  float ff;
  std::memcpy(&ff, &f, sizeof ff);
  EXPECT_EQ(n, 0u) << "first mismatch at d = " << ff << " (" << hi - lo << " floats checked)";
}

enum Fn { kExp2, kExp, kSilu, kConv, kConvSilu, kQuantize, kRequantize };

struct Case {
  float x;         // exp / SiLU / quantisation input; conv: scale
  float y;         // conv: bias; quantisation: the scale
  int32_t acc;     // conv
};

// Function fn of int8_math.hpp on case c: the same code on both sides.
__host__ __device__ float apply(int fn, const Case& c) {
  switch (fn) {
    case kExp2: return int8::exp2_clamped(c.x);
    case kExp: return int8::exp_clamped(c.x);
    case kSilu: return int8::silu_f32(c.x);
    case kConv: return int8::conv_value(c.acc, c.x, c.y, false);
    case kConvSilu: return int8::conv_value(c.acc, c.x, c.y, true);
    case kQuantize: return int8::quantize_value(c.x, int8::make_scale(c.y));
    default: return int8::requantize_value(c.x, int8::make_scale(c.y));
  }
}

__global__ void eval(int fn, const Case* c, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = apply(fn, c[i]);
}

std::vector<Case> cases() {
  std::vector<Case> c;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (float v : {0.f, -0.f, inf, -inf, nan, 1e30f, -1e30f, 87.f, -87.f, 125.f, -125.f, 125.5f, -125.5f, 127.5f, -128.5f, 0.5f, -0.5f})
    c.push_back({v, 1.f, 0});
  for (float v = -200.f; v <= 200.f; v += 0.00731f) c.push_back({v, 0.37f, static_cast<int32_t>(v * 1000)});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> scale(1e-6f, 1e-2f), bias(-20.f, 20.f), qs(1e-3f, 2.f);
  std::uniform_int_distribution<int32_t> acc(-(1 << 24), 1 << 24);
  for (int i = 0; i < 200000; ++i) c.push_back({scale(rng), bias(rng), acc(rng)});
  for (int i = 0; i < 50000; ++i) c.push_back({bias(rng) * 8, qs(rng), 0});
  return c;
}

// Whether the device's result may stand for the host's: bit for bit, or for SiLU within
// kSiluDeviceTolerance relative (the same infinity, NaN where the host has NaN). *rel: the relative
// difference of finite nonzero results.
bool same_result(int fn, float want, float got, double* rel) {
  *rel = 0;
  if (std::memcmp(&want, &got, sizeof want) == 0 || (std::isnan(want) && std::isnan(got))) return true;
  if ((fn != kSilu && fn != kConvSilu) || !std::isfinite(want) || !std::isfinite(got)) return false;
  *rel = want == 0.f ? std::fabs(double(got)) / 1e-37 : std::fabs(double(got) - want) / std::fabs(double(want));
  return *rel <= int8::kSiluDeviceTolerance;
}

TEST(Int8MathCuda, DeviceEqualsHost) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<Case> c = cases();
  const int n = static_cast<int>(c.size());
  DeviceBuffer dc(c.size() * sizeof(Case)), dout(c.size() * sizeof(float));
  ASSERT_EQ(cudaMemcpy(dc.p, c.data(), c.size() * sizeof(Case), cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<float> out(c.size());
  const char* names[] = {"exp2_clamped", "exp_clamped", "silu_f32", "conv_value", "conv_value+silu", "quantize_value",
                         "requantize_value"};
  for (int fn = kExp2; fn <= kRequantize; ++fn) {
    eval<<<(n + 255) / 256, 256>>>(fn, static_cast<const Case*>(dc.p), static_cast<float*>(dout.p), n);
    ASSERT_EQ(cudaMemcpy(out.data(), dout.p, out.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      const float want = apply(fn, c[size_t(i)]);
      double rel = 0;
      const bool same = same_result(fn, want, out[size_t(i)], &rel);
      worst = std::max(worst, rel);
      if (!same && bad++ < 3)
        ADD_FAILURE() << names[fn] << "(x " << c[size_t(i)].x << ", y " << c[size_t(i)].y << ", acc "
                      << c[size_t(i)].acc << "): device " << out[size_t(i)] << ", host " << want;
    }
    EXPECT_EQ(bad, 0) << names[fn] << ": " << n << " cases";
    std::printf("      %s: %d cases, largest relative difference %.3g\n", names[fn], n, worst);
  }
}

}  // namespace
}  // namespace yolocu::engine

// Helpers of the tests that run one convolution tactic on device buffers (test_dwconv.cpp,
// test_thin_conv.cpp): random layer data, device buffers, downloads, the comparison with a double
// reference, a cuDNN handle and the tuner's own check of one candidate (cuDNN's implicit GEMM +
// epilogue as the reference).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/tuner.hpp"

namespace yolocu::engine::conv_test {

// Random values, rounded to fp16 when `half` (both sides then see the same numbers).
inline std::vector<float> random_values(size_t n, uint32_t seed, float lo, float hi, bool half) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = half ? __half2float(__float2half_rn(u(rng))) : u(rng);
  return v;
}

// A device buffer holding `v` in fp16 or float32, or `bytes` uninitialised (freed by the destructor).
struct DeviceBuf {
  void* p = nullptr;
  DeviceBuf(const std::vector<float>& v, bool half) {
    const size_t es = half ? 2 : 4;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(1, v.size()) * es), cudaSuccess);
    if (half) {
      std::vector<__half> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) h[i] = __float2half_rn(v[i]);
      EXPECT_EQ(cudaMemcpy(p, h.data(), v.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    } else {
      EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  explicit DeviceBuf(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(1, bytes)), cudaSuccess); }
  ~DeviceBuf() {
    if (p) cudaFree(p);
  }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
};

inline std::vector<float> download(const void* d, size_t n, bool half) {
  std::vector<float> out(n);
  if (half) {
    std::vector<__half> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i) out[i] = __half2float(h[i]);
  } else {
    EXPECT_EQ(cudaMemcpy(out.data(), d, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return out;
}

// Output y (pixels x y_pitch, the layer's k channels first; the others pre-filled with -7) against
// the double reference (pixels x k): channels past k untouched, rel L2 <= 2e-3 (fp16) / 1e-5
// (fp32), |d| <= 1e-2 (fp16) / 1e-4 (fp32) * max(1, max |ref|).
inline void expect_close(const std::vector<float>& y, int y_pitch, const std::vector<double>& ref, int k, size_t pixels,
                         bool half, const std::string& what) {
  size_t touched = 0;
  double sq = 0, sq_ref = 0, max_d = 0, max_ref = 0;
  for (size_t px = 0; px < pixels; ++px) {
    for (int c = k; c < y_pitch; ++c) touched += y[px * y_pitch + c] != -7.f;
    for (int c = 0; c < k; ++c) {
      const double r = ref[px * k + c], e = std::fabs(double(y[px * y_pitch + c]) - r);
      sq += e * e;
      sq_ref += r * r;
      max_d = std::max(max_d, std::isfinite(e) ? e : 1e30);
      max_ref = std::max(max_ref, std::fabs(r));
    }
  }
  EXPECT_EQ(touched, 0u) << what << ": channels past the layer's written";
  EXPECT_LE(std::sqrt(sq / std::max(sq_ref, 1e-30)), half ? 2e-3 : 1e-5) << what;
  EXPECT_LE(max_d, (half ? 1e-2 : 1e-4) * std::max(1.0, max_ref)) << what;
}

struct Cudnn {
  cudnnHandle_t h = nullptr;
  Cudnn() { EXPECT_EQ(cudnnCreate(&h), CUDNN_STATUS_SUCCESS); }
  ~Cudnn() {
    if (h) cudnnDestroy(h);
  }
  Cudnn(const Cudnn&) = delete;
  Cudnn& operator=(const Cudnn&) = delete;
};

// The tuner's check of `t` on buffers `b` (x, w, bias, residual set; packed x and residual): cuDNN's
// implicit GEMM + epilogue on pb.packed() as the reference, t's output pre-filled with NaN,
// compare_rows, check_verdict.
inline CheckVerdict tuner_check(cudnnHandle_t cudnn, const ConvProblem& pb, const ConvTactic& t, ConvBuffers b) {
  const size_t es = pb.half ? 2 : 4, pixels = size_t(pb.n) * pb.p * pb.q;
  DeviceBuf dy(pixels * pb.y_pitch() * es), dref(pixels * pb.k * es), dacc(sizeof(cuda_kernels::CompareAcc));
  ConvBuffers r = b;
  r.y = dref.p;
  cudnn_legacy_reference(cudnn, pb.packed())->run(cudnn, r, nullptr);
  b.y = dy.p;
  EXPECT_EQ(cudaMemset(dy.p, 0xff, pixels * pb.y_pitch() * es), cudaSuccess);
  t.run(cudnn, b, nullptr);
  EXPECT_EQ(cudaMemset(dacc.p, 0, sizeof(cuda_kernels::CompareAcc)), cudaSuccess);
  cuda_kernels::compare_rows(dy.p, pb.y_pitch(), dref.p, pb.k, pb.half, static_cast<int64_t>(pixels) * pb.k,
                             static_cast<cuda_kernels::CompareAcc*>(dacc.p), nullptr);
  cuda_kernels::CompareAcc acc{};
  EXPECT_EQ(cudaMemcpy(&acc, dacc.p, sizeof acc, cudaMemcpyDeviceToHost), cudaSuccess);
  return check_verdict(acc, pb.half);
}

}  // namespace yolocu::engine::conv_test

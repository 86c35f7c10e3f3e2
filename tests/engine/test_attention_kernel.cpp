// The fused attention's two fp16 kernels launched directly (steps/attention_kernel.cu's per-query
// kernel and steps/attention_mma.cu's tensor-core one), without an engine: random fp16 qkv against
// engine::attention_reference (the host form of the kernel's math) on the same fp16 values. x within
// relative L2 5e-3 (the FP16 bound of the engine tests: scores and sums in fp32, x stored in fp16);
// pe's input Reshape(v) exact (a copy). Small problems and no tuning, so that compute-sanitizer's
// racecheck and initcheck (scripts/gpu/parts/v8.sh) finish in seconds. Skips without a GPU.
#include <gtest/gtest.h>

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/attention.hpp"
#include "engine/attention_ref.hpp"
#include "engine/cuda/steps/attention_kernel.hpp"
#include "test_util.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu::engine {
namespace {

struct Problem {
  int heads, kd, hd, tokens, batch;
};

struct DeviceHalf {
  __half* p = nullptr;
  explicit DeviceHalf(size_t n) { EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(n, 8) * sizeof(__half)), cudaSuccess); }
  ~DeviceHalf() { cudaFree(p); }
  DeviceHalf(const DeviceHalf&) = delete;
  DeviceHalf& operator=(const DeviceHalf&) = delete;
};

std::vector<float> download(const DeviceHalf& d, size_t n) {
  std::vector<__half> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d.p, n * sizeof(__half), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = __half2float(h[i]);
  return f;
}

// One problem through one kernel; the output buffers start as NaN so that an unwritten element fails.
void run_kernel(const Problem& pr, bool tensor_cores) {
  attn::Geometry g;
  g.heads = pr.heads;
  g.key_dim = pr.kd;
  g.head_dim = pr.hd;
  g.tokens = pr.tokens;
  g.qkv_pitch = pr.heads * (2 * pr.kd + pr.hd);
  g.out_pitch = pr.heads * pr.hd;
  g.v_pitch = pr.heads * pr.hd;
  g.scale = 1.f / std::sqrt(static_cast<float>(pr.kd));
  const std::string tag = std::to_string(pr.heads) + " heads kd " + std::to_string(pr.kd) + " hd " +
                          std::to_string(pr.hd) + " tokens " + std::to_string(pr.tokens) + " batch " +
                          std::to_string(pr.batch) + (tensor_cores ? " tensor cores" : " per query");
  SCOPED_TRACE(tag);
  if (tensor_cores) {
    ASSERT_TRUE(cuda_kernels::attention_mma_supported(g));
  }
  ASSERT_EQ(cuda_kernels::attention_prepare(g, true, tensor_cores), tensor_cores);
  const size_t n_qkv = static_cast<size_t>(pr.batch) * pr.tokens * g.qkv_pitch;
  const size_t n_out = static_cast<size_t>(pr.batch) * pr.tokens * g.out_pitch;
  std::mt19937 rng(7u + static_cast<unsigned>(pr.tokens));
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<__half> qkv_h(n_qkv);
  std::vector<float> qkv_f(n_qkv);
  for (size_t i = 0; i < n_qkv; ++i) {
    qkv_h[i] = __float2half(u(rng));
    qkv_f[i] = __half2float(qkv_h[i]);
  }
  std::vector<float> ref_x(n_out), ref_v(n_out);
  ASSERT_EQ(attention_reference(g, qkv_f.data(), pr.batch, ref_x.data(), ref_v.data()),
            static_cast<int64_t>(pr.batch) * pr.tokens * pr.heads * pr.hd);

  DeviceHalf qkv(n_qkv), x(n_out), v(n_out);
  ASSERT_EQ(cudaMemcpy(qkv.p, qkv_h.data(), n_qkv * sizeof(__half), cudaMemcpyHostToDevice), cudaSuccess);
  const std::vector<__half> nan(n_out, __float2half(NAN));
  ASSERT_EQ(cudaMemcpy(x.p, nan.data(), n_out * sizeof(__half), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(v.p, nan.data(), n_out * sizeof(__half), cudaMemcpyHostToDevice), cudaSuccess);
  cuda_kernels::attention(g, true, tensor_cores, qkv.p, x.p, v.p, pr.batch, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const std::vector<float> got_x = download(x, n_out), got_v = download(v, n_out);
  for (size_t i = 0; i < n_out; ++i) {
    ASSERT_TRUE(std::isfinite(got_x[i])) << "x[" << i << "] not written";
    ASSERT_EQ(got_v[i], ref_v[i]) << "v[" << i << "]";
  }
  const int64_t count = static_cast<int64_t>(n_out);
  EXPECT_LE(test::compare(Tensor::view(DType::kFloat32, {count}, const_cast<float*>(got_x.data())),
                          Tensor::view(DType::kFloat32, {count}, ref_x.data()))
                .rel_l2,
            5e-3);
}

// 63 tokens (partial tiles of queries and keys) over two heads at batch 2; 169 tokens (a block whose
// last warp has no query, a last key tile of 41 keys); one token; yolo11n's C2PSA at 640x640 (2
// heads, key dim 32, head dim 64, 400 tokens: 7 key tiles); 128 tokens (whole tiles) with the
// widest dims the tensor-core kernel is built for.
const Problem kProblems[] = {{2, 16, 32, 63, 2}, {1, 32, 64, 169, 1}, {1, 16, 16, 1, 1}, {2, 32, 64, 400, 2},
                             {1, 64, 128, 128, 1}};

TEST(CudaAttentionKernel, TensorCoreKernelMatchesHostReference) {
  YOLOCU_REQUIRE_GPU();
  int dev = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  if (major < 7) GTEST_SKIP() << "the tensor-core kernel needs sm_70 or newer";
  for (const Problem& p : kProblems) run_kernel(p, true);
}

// Dims the tensor-core kernel is not built for go to the per-query kernel.
TEST(CudaAttentionKernel, TensorCoreKernelRefusesOtherDims) {
  YOLOCU_REQUIRE_GPU();
  attn::Geometry g;
  g.heads = 1;
  g.tokens = 64;
  g.scale = 0.25f;
  for (const auto& [kd, hd] : {std::pair{48, 64}, std::pair{32, 256}, std::pair{8, 16}}) {
    g.key_dim = kd;
    g.head_dim = hd;
    g.qkv_pitch = 2 * kd + hd;
    g.out_pitch = hd;
    EXPECT_FALSE(cuda_kernels::attention_mma_supported(g)) << "key dim " << kd << ", head dim " << hd;
    EXPECT_FALSE(cuda_kernels::attention_prepare(g, true)) << "key dim " << kd << ", head dim " << hd;
  }
}

TEST(CudaAttentionKernel, PerQueryKernelMatchesHostReference) {
  YOLOCU_REQUIRE_GPU();
  for (const Problem& p : kProblems) run_kernel(p, false);
}

}  // namespace
}  // namespace yolocu::engine

// Plain-layout kernels of the YOLOv8 / YOLO11 heads and attention blocks: Softmax (the DFL box
// decoding, C2PSA's attention weights) and batched MatMul (C2PSA). float32, arithmetic like the CPU
// engine's loops (ops.cpp) so that FP32 outputs stay within 1e-5 of it.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"

namespace yolocu::cuda_kernels {
namespace {

constexpr int kThreads = 256;

// One thread per lane (o, i): its len values x[(o * len + j) * inner + i] (adjacent threads read
// adjacent i: coalesced when inner > 1). Max first, then exp and a double sum, then the scale.
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t lanes, int64_t len,
                               int64_t inner) {
  for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < lanes; l += int64_t{gridDim.x} * blockDim.x) {
    const int64_t o = l / inner, i = l - o * inner;
    const float* px = x + o * len * inner + i;
    float* py = y + o * len * inner + i;
    float m = -INFINITY;
    for (int64_t j = 0; j < len; ++j) m = fmaxf(m, px[j * inner]);
    double sum = 0;
    for (int64_t j = 0; j < len; ++j) {
      const float e = expf(px[j * inner] - m);
      py[j * inner] = e;
      sum += static_cast<double>(e);
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < len; ++j) py[j * inner] *= inv;
  }
}

// 16 x 16 output tile per block (blockIdx.z: the batch matrix), 16 x 16 threads; a and b tiles of
// 16 along k through shared memory; each thread sums its element over k in order.
constexpr int kTile = 16;
__global__ void matmul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y,
                              MatMulParams p) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  int64_t oa = 0, ob = 0, rem = blockIdx.z;
  for (int d = p.batch_rank; d-- > 0;) {
    const int64_t c = rem % p.batch_dims[d];
    rem /= p.batch_dims[d];
    oa += c * p.a_batch_stride[d];
    ob += c * p.b_batch_stride[d];
  }
  const float* pa = a + oa * p.m * p.k;
  const float* pb = b + ob * p.k * p.n;
  float* py = y + static_cast<int64_t>(blockIdx.z) * p.m * p.n;
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < p.k; k0 += kTile) {
    const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = row < p.m && ka < p.k ? pa[static_cast<int64_t>(row) * p.k + ka] : 0.f;
    bs[threadIdx.y][threadIdx.x] = kb < p.k && col < p.n ? pb[static_cast<int64_t>(kb) * p.n + col] : 0.f;
    __syncthreads();
    const int kend = min(kTile, p.k - k0);
    for (int kk = 0; kk < kend; ++kk) acc = fmaf(as[threadIdx.y][kk], bs[kk][threadIdx.x], acc);
    __syncthreads();
  }
  if (row < p.m && col < p.n) py[static_cast<int64_t>(row) * p.n + col] = acc;
}

}  // namespace

void softmax_plain(const float* x, float* y, int64_t outer, int64_t len, int64_t inner, cudaStream_t stream) {
  YOLOCU_CHECK(outer >= 0 && len >= 1 && inner >= 1, kInvalidArgument, "softmax: ", outer, " x ", len, " x ", inner);
  const int64_t lanes = outer * inner;
  if (lanes == 0) return;
  const int64_t blocks = std::min<int64_t>((lanes + kThreads - 1) / kThreads, int64_t{1} << 20);
  softmax_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, y, lanes, len, inner);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

void matmul_plain(const float* a, const float* b, float* y, const MatMulParams& p, cudaStream_t stream) {
  int64_t batches = 1;
  for (int d = 0; d < p.batch_rank; ++d) batches *= p.batch_dims[d];
  YOLOCU_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0 && batches >= 0 && batches < 65536, kUnsupported, "matmul: ", batches,
               " matrices of ", p.m, " x ", p.k, " x ", p.n, " (at most 65535 matrices)");
  if (batches == 0 || p.m == 0 || p.n == 0) return;
  const dim3 grid(static_cast<unsigned>((p.n + kTile - 1) / kTile), static_cast<unsigned>((p.m + kTile - 1) / kTile),
                  static_cast<unsigned>(batches));
  YOLOCU_CHECK(grid.y < 65536, kUnsupported, "matmul: ", p.m, " rows (at most ", 65535 * kTile, ")");
  matmul_kernel<<<grid, dim3(kTile, kTile), 0, stream>>>(a, b, y, p);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

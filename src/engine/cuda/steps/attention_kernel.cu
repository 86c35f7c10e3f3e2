// The kernel of the Attention step (steps/attention.cpp): one C2PSA attention block, every image
// and head in one launch (engine/attention.hpp holds its math and shared-memory layout).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.hpp"
#include "engine/cuda/kernel_util.cuh"
#include "engine/cuda/steps/attention_kernel.hpp"
#include "engine/cuda/tactics/smem_limit.hpp"

namespace yolocu::cuda_kernels {

namespace {

namespace at = engine::attn;
using kutil::warp_max;
using kutil::warp_sum;
using kutil::check_count;
using kutil::from_f;

// Block (query block of kQueries tokens, head, image), 8 warps. Staging: a warp per token, its
// lanes over the token's k and v channels (coalesced; the block's own tokens of Reshape(v) are
// written out on the way). Then a warp per query (every 8th of the block's): lanes over the keys
// j = lane + 32 i for the scores and the softmax, over the dims d = lane + 32 k for the output.
template <typename T>
__global__ void __launch_bounds__(at::kWarps * at::kLanes)
    attention_kernel(const T* __restrict__ qkv, T* __restrict__ x, T* __restrict__ v_image, at::Geometry g) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int kd = g.key_dim, hd = g.head_dim, n = g.tokens, h = blockIdx.y, b = blockIdx.z;
  const int es = static_cast<int>(sizeof(T)), kp = at::key_pitch(kd, es);
  T* keys = reinterpret_cast<T*>(smem);
  T* values = reinterpret_cast<T*>(smem + at::values_offset(kd, n, es));
  const int q0 = blockIdx.x * at::kQueries;
  const int q1 = min(q0 + at::kQueries, n);
  const int warp = threadIdx.x / at::kLanes, lane = threadIdx.x % at::kLanes;
  for (int j = warp; j < n; j += at::kWarps)  // a warp per token: its k and v channels, coalesced
    for (int c = lane; c < kd + hd; c += at::kLanes) {
      const T e = qkv[at::qkv_index(g, b, h, j, kd + c)];
      if (c < kd) {
        keys[j * kp + c] = e;
      } else {
        values[j * hd + c - kd] = e;
        if (v_image != nullptr && j >= q0 && j < q1) v_image[at::image_index(g, g.v_pitch, b, h, j, c - kd)] = e;
      }
    }
  __syncthreads();
  float* row = reinterpret_cast<float*>(smem + at::rows_offset(kd, hd, n, es)) + warp * n;
  float* q = reinterpret_cast<float*>(smem + at::query_offset(kd, hd, n, es)) + warp * kd;
  for (int i = q0 + warp; i < q1; i += at::kWarps) {
    for (int d = lane; d < kd; d += at::kLanes) q[d] = at::to_f(qkv[at::qkv_index(g, b, h, i, d)]) * g.scale;
    __syncwarp();
    const float m = warp_max(at::lane_scores(q, keys, kp, kd, n, lane, row));
    const float sum = warp_sum(at::lane_exps(row, n, lane, m));
    at::lane_normalize(row, n, lane, sum);
    __syncwarp();
    for (int d0 = 0; d0 < hd; d0 += at::kLanes * at::kDimsPerPass) {
      float acc[at::kDimsPerPass];
      at::lane_outputs(row, values, hd, n, d0, lane, acc);
#pragma unroll
      for (int k = 0; k < at::kDimsPerPass; ++k) {
        const int d = d0 + lane + k * at::kLanes;
        if (d < hd) x[at::image_index(g, g.out_pitch, b, h, i, d)] = from_f<T>(acc[k]);
      }
    }
    __syncwarp();  // q and row are rewritten by the next query
  }
}

size_t smem_for(const at::Geometry& g, bool half) { return at::smem_bytes(g.key_dim, g.head_dim, g.tokens, half ? 2 : 4); }

}  // namespace

bool attention_prepare(const at::Geometry& g, bool half, bool allow_tensor_cores) {
  if (half && allow_tensor_cores && attention_mma_supported(g)) {
    attention_mma_prepare(g);
    return true;
  }
  const size_t bytes = smem_for(g, half);
  if (half)
    engine::raise_smem_limit(reinterpret_cast<const void*>(&attention_kernel<__half>), bytes);
  else
    engine::raise_smem_limit(reinterpret_cast<const void*>(&attention_kernel<float>), bytes);
  return false;
}

void attention(const at::Geometry& g, bool half, bool tensor_cores, const void* qkv, void* x, void* v_image, int batch,
               cudaStream_t stream) {
  YOLOCU_CHECK(g.heads > 0 && g.key_dim > 0 && g.head_dim > 0 && g.tokens > 0 &&
                   g.qkv_pitch >= g.heads * (2 * g.key_dim + g.head_dim) && g.out_pitch >= g.heads * g.head_dim &&
                   (v_image == nullptr || g.v_pitch >= g.heads * g.head_dim),
               kInternal, "attention: inconsistent geometry");
  check_count(int64_t{batch} * g.tokens * g.qkv_pitch, "attention qkv");
  check_count(int64_t{batch} * g.tokens * g.out_pitch, "attention output");
  if (tensor_cores) return attention_mma(g, qkv, x, v_image, batch, stream);
  const dim3 grid(static_cast<unsigned>(at::query_blocks(g.tokens)), static_cast<unsigned>(g.heads),
                  static_cast<unsigned>(batch));
  const unsigned threads = at::kWarps * at::kLanes;
  const size_t smem = smem_for(g, half);
  if (half)
    attention_kernel<__half><<<grid, threads, smem, stream>>>(static_cast<const __half*>(qkv), static_cast<__half*>(x),
                                                              static_cast<__half*>(v_image), g);
  else
    attention_kernel<float><<<grid, threads, smem, stream>>>(static_cast<const float*>(qkv), static_cast<float*>(x),
                                                             static_cast<float*>(v_image), g);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

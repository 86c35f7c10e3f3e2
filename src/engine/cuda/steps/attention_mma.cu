// The Attention step's tensor-core kernel for fp16 activations (the path of every fp16 engine
// whose key and head dims are multiples of 16, yolo11n's C2PSA among them); steps/attention_kernel.cu
// keeps the per-query kernel for fp32 and other dims. One block per (kRows-query tile, head,
// image), kWarps warps of 16 queries each:
//   1. the head's keys and values (all N tokens, zero rows up to a multiple of 16) and each warp's
//      queries are staged in shared memory (fp16; the block's own tokens of Reshape(v) written out
//      on the way);
//   2. S = Q K^T on the tensor cores (wmma 16x16x16, fp32 accumulation), times the scale in fp32;
//   3. softmax over each row in fp32 (padding keys excluded), P = e / sum rounded to fp16 into the
//      bytes of S's row;
//   4. O = P V on the tensor cores (fp32 accumulation), through shared memory to x (fp16).
// Against the per-query kernel the products q.k and p.v are the same fp16 x fp16 products summed in
// fp32; the probabilities are rounded to fp16 before p.v (the per-query kernel keeps them in fp32).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

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
namespace wmma = nvcuda::wmma;

constexpr int kTile = 16;                 // wmma m = n = k
constexpr int kWarps = 4;                 // warps per block
constexpr int kRows = kWarps * kTile;     // queries per block
constexpr int kPad = 8;                   // fp16 elements added to each staged row (bank spread)

struct Layout {
  int n16 = 0, kp = 0, vp = 0, sp = 0;  // padded tokens; key, value (fp16) and score (fp32) row pitches
  size_t keys = 0, values = 0, warps = 0;  // byte offsets: keys, values, the warps' areas
  size_t warp = 0, total = 0;              // one warp's area (scores, queries / O), the whole
};

__host__ __device__ inline size_t align128(size_t b) { return (b + 127) / 128 * 128; }

__host__ __device__ inline Layout layout(const at::Geometry& g) {
  Layout l;
  l.n16 = (g.tokens + kTile - 1) / kTile * kTile;
  l.kp = g.key_dim + kPad;
  l.vp = g.head_dim + kPad;
  l.sp = l.n16 + 4;  // floats; P (fp16) reuses each row with pitch 2 * sp
  l.keys = 0;
  l.values = align128(static_cast<size_t>(l.n16) * l.kp * 2);
  const size_t scores = static_cast<size_t>(kTile) * l.sp * 4;
  const size_t queries = static_cast<size_t>(kTile) * (l.kp * 2 > kTile * 4 ? l.kp * 2 : kTile * 4);  // O's staging too
  l.warp = align128(scores + queries);
  l.warps = align128(l.values + static_cast<size_t>(l.n16) * l.vp * 2);
  l.total = l.warps + kWarps * l.warp;
  return l;
}

// Softmax of score row `r` (n valid entries of sp floats) into fp16 probabilities over the same
// bytes (pitch 2 * sp halves): every lane reads its entries before any lane writes.
__device__ void softmax_row(float* s, __half* p, int n, int n16, int lane) {
  constexpr int kMax = 32;  // entries per lane: n16 <= 1024 (checked by attention_mma_supported)
  float v[kMax];
  float m = -INFINITY;
#pragma unroll
  for (int t = 0; t < kMax; ++t) {
    const int j = lane + t * 32;
    v[t] = j < n ? s[j] : -INFINITY;
    m = fmaxf(m, v[t]);
  }
  m = warp_max(m);
  float sum = 0.f;
#pragma unroll
  for (int t = 0; t < kMax; ++t) {
    const int j = lane + t * 32;
    v[t] = j < n ? at::expo(v[t] - m) : 0.f;
    sum += v[t];
  }
  sum = warp_sum(sum);
  __syncwarp();
#pragma unroll
  for (int t = 0; t < kMax; ++t) {
    const int j = lane + t * 32;
    if (j < n16) p[j] = __float2half_rn(v[t] / sum);
  }
}

__global__ void __launch_bounds__(kWarps * 32)
    attention_mma_kernel(const __half* __restrict__ qkv, __half* __restrict__ x, __half* __restrict__ v_image,
                         at::Geometry g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
  __trap();  // no wmma before Volta: attention_mma_supported() refuses such devices
#else
  extern __shared__ __align__(128) unsigned char smem[];
  const Layout l = layout(g);
  const int kd = g.key_dim, hd = g.head_dim, n = g.tokens, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q0 = blockIdx.x * kRows, q1 = min(q0 + kRows, n);
  __half* keys = reinterpret_cast<__half*>(smem + l.keys);
  __half* values = reinterpret_cast<__half*>(smem + l.values);
  unsigned char* mine = smem + l.warps + warp * l.warp;
  float* s = reinterpret_cast<float*>(mine);
  __half* q = reinterpret_cast<__half*>(mine + static_cast<size_t>(kTile) * l.sp * 4);
  // 1. keys and values of every token and the block's queries, 8 channels (16 bytes) per load,
  // zero rows past the last token
  const int vk = kd / 8, per_token = (kd + hd) / 8;
#pragma unroll 4
  for (int e = threadIdx.x; e < l.n16 * per_token; e += kWarps * 32) {
    const int j = e / per_token, c = (e % per_token) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (j < n) v = *reinterpret_cast<const uint4*>(qkv + at::qkv_index(g, b, h, j, kd + c));
    if (c < kd) {
      *reinterpret_cast<uint4*>(keys + j * l.kp + c) = v;
    } else {
      *reinterpret_cast<uint4*>(values + j * l.vp + c - kd) = v;
      if (v_image != nullptr && j >= q0 && j < q1) {
        const __half* hv = reinterpret_cast<const __half*>(&v);
        for (int i = 0; i < 8; ++i) v_image[at::image_index(g, g.v_pitch, b, h, j, c - kd + i)] = hv[i];
      }
    }
  }
  const int r0 = q0 + warp * kTile;  // this warp's first query
  for (int e = lane; e < kTile * vk; e += 32) {
    const int r = e / vk, c = (e % vk) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r0 + r < n) v = *reinterpret_cast<const uint4*>(qkv + at::qkv_index(g, b, h, r0 + r, c));
    *reinterpret_cast<uint4*>(q + r * l.kp + c) = v;
  }
  __syncthreads();
  if (r0 >= n) return;  // no query of this warp (after the block's last barrier)
  // 2. S = Q K^T * scale
  for (int j0 = 0; j0 < l.n16; j0 += kTile) {
    wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float> acc;
    wmma::fill_fragment(acc, 0.f);
    for (int k0 = 0; k0 < kd; k0 += kTile) {
      wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, __half, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, __half, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, q + k0, l.kp);
      wmma::load_matrix_sync(fb, keys + j0 * l.kp + k0, l.kp);  // element (k, j) = keys[j0 + j][k0 + k]
      wmma::mma_sync(acc, fa, fb, acc);
    }
#pragma unroll
    for (int e = 0; e < acc.num_elements; ++e) acc.x[e] *= g.scale;
    wmma::store_matrix_sync(s + j0, acc, l.sp, wmma::mem_row_major);
  }
  __syncwarp();
  // 3. softmax per row, P over S's bytes
  __half* p = reinterpret_cast<__half*>(s);
  for (int r = 0; r < kTile; ++r) softmax_row(s + r * l.sp, p + r * 2 * l.sp, n, l.n16, lane);
  __syncwarp();
  // 4. O = P V, a 16-dim tile at a time, staged as fp32 over the queries' bytes (q is no longer read)
  float* o = reinterpret_cast<float*>(q);  // 16 x 16 floats (the layout's queries area holds them)
  for (int d0 = 0; d0 < hd; d0 += kTile) {
    wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float> acc;
    wmma::fill_fragment(acc, 0.f);
    for (int j0 = 0; j0 < l.n16; j0 += kTile) {
      wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, __half, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, __half, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, p + j0, 2 * l.sp);
      wmma::load_matrix_sync(fb, values + j0 * l.vp + d0, l.vp);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(o, acc, kTile, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < kTile * kTile; e += 32) {
      const int r = e / kTile, d = e % kTile;
      if (r0 + r < n) x[at::image_index(g, g.out_pitch, b, h, r0 + r, d0 + d)] = __float2half_rn(o[e]);
    }
    __syncwarp();
  }
#endif
}

}  // namespace

bool attention_mma_supported(const at::Geometry& g) {
  // 16-byte loads of q, k and v: every channel offset a multiple of 8
  if (g.key_dim % kTile != 0 || g.head_dim % kTile != 0 || g.tokens < 1 || g.qkv_pitch % 8 != 0) return false;
  int device = 0, major = 0, optin = 0;  // wmma: compute capability 7.0 and later
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (major < 7) return false;
  const Layout l = layout(g);
  return l.n16 <= 1024 && l.total <= static_cast<size_t>(optin);  // the device's opt-in shared memory per block
}

void attention_mma_prepare(const at::Geometry& g) {
  engine::raise_smem_limit(reinterpret_cast<const void*>(&attention_mma_kernel), layout(g).total);
}

void attention_mma(const at::Geometry& g, const void* qkv, void* x, void* v_image, int batch, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((g.tokens + kRows - 1) / kRows), static_cast<unsigned>(g.heads),
                  static_cast<unsigned>(batch));
  attention_mma_kernel<<<grid, kWarps * 32, layout(g).total, stream>>>(
      static_cast<const __half*>(qkv), static_cast<__half*>(x), static_cast<__half*>(v_image), g);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

// The Attention step's tensor-core kernel for fp16 activations (the path of every fp16 engine
// whose key and head dims are multiples of 16 up to 64 and 128, yolo11's C2PSA among them);
// steps/attention_kernel.cu keeps the per-query kernel for fp32, other dims and pre-sm_80 devices.
// Flash-attention style: one block per (kRows-query tile, head, image), kWarps warps of 16 queries;
// the keys and values pass through shared memory kKeys tokens at a time (cp.async, two buffers, zero
// rows past the last token), everything else stays in registers:
//   1. each warp's queries as mma.m16n8k16 A fragments, straight from global memory;
//   2. per key tile: S = Q K^T (fp16 x fp16, fp32 accumulation) times the scale in fp32, keys past
//      the last token at -inf; the running row maximum m and the factor exp(m_old - m) that rescales
//      the row sum l and the output accumulator O;
//   3. P = exp(S - m) rounded to fp16 straight from S's accumulator registers into A fragments (the
//      m16n8 C layout of two key tiles is the A layout of one k16 step), O += P V with V's B
//      fragments from ldmatrix.trans;
//   4. x = O / l (fp32) stored as fp16; the block's own tokens of Reshape(v) copied out at the start.
// Against the per-query kernel the products q.k and p.v are the same fp16 x fp16 products summed in
// fp32; the probabilities are rounded to fp16 before p.v and normalised after it (the per-query
// kernel keeps them in fp32 and normalises first).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "engine/cuda/mma_ptx.cuh"
#include "engine/cuda/steps/attention_kernel.hpp"
#include "engine/cuda/tactics/smem_limit.hpp"

namespace yolocu::cuda_kernels {

namespace {

namespace at = engine::attn;

constexpr int kWarps = 4;              // warps per block
constexpr int kRows = kWarps * 16;     // queries per block
constexpr int kKeys = 64;              // keys per shared-memory tile
constexpr int kPad = 8;                // fp16 elements added to each staged row (conflict-free 8-row reads)
constexpr int kThreads = kWarps * 32;

// Shared memory of a block: two buffers of [kKeys][KD + kPad] keys then [kKeys][HD + kPad] values.
template <int KD, int HD>
struct Tile {
  static constexpr int kKp = KD + kPad, kVp = HD + kPad;
  static constexpr int kHalves = kKeys * (kKp + kVp);  // one buffer
  static constexpr size_t kBytes = 2 * static_cast<size_t>(kHalves) * sizeof(__half);
};

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Starts the copy of key tile `t` (keys and values of tokens t * kKeys ..) into buffer `buf`.
template <int KD, int HD>
__device__ __forceinline__ void load_tile(const __half* qkv, const at::Geometry& g, int b, int h, int t, __half* buf) {
  using L = Tile<KD, HD>;
  constexpr int kChunks = (KD + HD) / 8;  // 16-byte pieces per token
  for (int e = threadIdx.x; e < kKeys * kChunks; e += kThreads) {
    const int r = e / kChunks, c = (e % kChunks) * 8, j = t * kKeys + r;
    const bool valid = j < g.tokens;
    const __half* src = qkv + at::qkv_index(g, b, h, valid ? j : 0, KD + c);
    __half* dst = c < KD ? buf + r * L::kKp + c : buf + kKeys * L::kKp + r * L::kVp + (c - KD);
    ptx::cp_async16(ptx::smem_u32(dst), src, valid);
  }
  ptx::cp_async_commit();
}

template <int KD, int HD>
__global__ void __launch_bounds__(kThreads)
    attention_flash_kernel(const __half* __restrict__ qkv, __half* __restrict__ x, __half* __restrict__ v_image,
                           at::Geometry g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // mma.m16n8k16 and cp.async: sm_80; attention_mma_supported() refuses older devices
#else
  using L = Tile<KD, HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  __half* bufs = reinterpret_cast<__half*>(smem);
  const int n = g.tokens, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, tq = lane % 4;
  const int q0 = blockIdx.x * kRows, tiles = (n + kKeys - 1) / kKeys;
  load_tile<KD, HD>(qkv, g, b, h, 0, bufs);
  if (v_image != nullptr) {  // the block's own tokens of Reshape(v)
    for (int e = threadIdx.x; e < kRows * HD; e += kThreads) {
      const int j = q0 + e / HD, d = e % HD;
      if (j < n) v_image[at::image_index(g, g.v_pitch, b, h, j, d)] = qkv[at::qkv_index(g, b, h, j, 2 * KD + d)];
    }
  }
  // 1. the warp's 16 queries (rows r0 + gr and r0 + gr + 8) as A fragments, zero past the last token
  const int r0 = q0 + warp * 16, ra = r0 + gr, rb = ra + 8;
  uint32_t qa[KD / 16][4];
#pragma unroll
  for (int kc = 0; kc < KD / 16; ++kc) {
    const int c = kc * 16 + 2 * tq;
    qa[kc][0] = ra < n ? *reinterpret_cast<const uint32_t*>(qkv + at::qkv_index(g, b, h, ra, c)) : 0u;
    qa[kc][1] = rb < n ? *reinterpret_cast<const uint32_t*>(qkv + at::qkv_index(g, b, h, rb, c)) : 0u;
    qa[kc][2] = ra < n ? *reinterpret_cast<const uint32_t*>(qkv + at::qkv_index(g, b, h, ra, c + 8)) : 0u;
    qa[kc][3] = rb < n ? *reinterpret_cast<const uint32_t*>(qkv + at::qkv_index(g, b, h, rb, c + 8)) : 0u;
  }
  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float ma = -INFINITY, mb = -INFINITY, la = 0.f, lb = 0.f;  // rows ra, rb: running max, this lane's sum

  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) {
      load_tile<KD, HD>(qkv, g, b, h, t + 1, bufs + ((t + 1) & 1) * L::kHalves);
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();
    const __half* keys = bufs + (t & 1) * L::kHalves;
    const __half* values = keys + kKeys * L::kKp;
    // 2. S = Q K^T * scale: 8 key columns a fragment, this lane's columns 2 tq, 2 tq + 1
    float s[kKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
      const __half* krow = keys + (nt * 8 + gr) * L::kKp + 2 * tq;
#pragma unroll
      for (int kc = 0; kc < KD / 16; ++kc)
        ptx::mma_f16(s[nt], qa[kc], *reinterpret_cast<const uint32_t*>(krow + kc * 16),
                     *reinterpret_cast<const uint32_t*>(krow + kc * 16 + 8));
    }
    float mxa = ma, mxb = mb;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
      const int j = t * kKeys + nt * 8 + 2 * tq;
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = j + (e & 1) < n ? s[nt][e] * g.scale : -INFINITY;
      mxa = fmaxf(mxa, fmaxf(s[nt][0], s[nt][1]));
      mxb = fmaxf(mxb, fmaxf(s[nt][2], s[nt][3]));
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {  // the 4 lanes of a quad hold one row
      mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, off));
      mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, off));
    }
    const float fa = expf(ma - mxa), fb = expf(mb - mxb);  // 0 on the first tile (ma = -inf)
    ma = mxa;
    mb = mxb;
    la *= fa;
    lb *= fb;
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      o[i][0] *= fa;
      o[i][1] *= fa;
      o[i][2] *= fb;
      o[i][3] *= fb;
    }
    // 3. P = exp(S - m) as A fragments, O += P V over 16 keys a step
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      float p[2][4];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        p[u][0] = expf(s[2 * kc + u][0] - ma);
        p[u][1] = expf(s[2 * kc + u][1] - ma);
        p[u][2] = expf(s[2 * kc + u][2] - mb);
        p[u][3] = expf(s[2 * kc + u][3] - mb);
        la += p[u][0] + p[u][1];
        lb += p[u][2] + p[u][3];
      }
      const uint32_t pa[4] = {pack_half2(p[0][0], p[0][1]), pack_half2(p[0][2], p[0][3]), pack_half2(p[1][0], p[1][1]),
                              pack_half2(p[1][2], p[1][3])};
      // lane -> row of matrix lane / 8: keys kc * 16 + (lane % 8) + 8 * ((lane / 8) % 2), dims + 8 * (lane / 16)
      const __half* vrow = values + (kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * L::kVp + (lane >> 4) * 8;
#pragma unroll
      for (int dn = 0; dn < HD / 16; ++dn) {
        uint32_t vb[4];
        ptx::ldmatrix_x4_trans(vb, ptx::smem_u32(vrow + dn * 16));
        ptx::mma_f16(o[2 * dn], pa, vb[0], vb[1]);
        ptx::mma_f16(o[2 * dn + 1], pa, vb[2], vb[3]);
      }
    }
    __syncthreads();  // the next iteration's copy overwrites this buffer
  }
  // 4. x = O / l
#pragma unroll
  for (int off = 1; off < 4; off <<= 1) {
    la += __shfl_xor_sync(0xffffffffu, la, off);
    lb += __shfl_xor_sync(0xffffffffu, lb, off);
  }
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) {
    const int d = i * 8 + 2 * tq;
    if (ra < n)
      *reinterpret_cast<__half2*>(x + at::image_index(g, g.out_pitch, b, h, ra, d)) =
          __floats2half2_rn(o[i][0] / la, o[i][1] / la);
    if (rb < n)
      *reinterpret_cast<__half2*>(x + at::image_index(g, g.out_pitch, b, h, rb, d)) =
          __floats2half2_rn(o[i][2] / lb, o[i][3] / lb);
  }
#endif
}

using Kernel = void (*)(const __half*, __half*, __half*, at::Geometry);

// The instantiation for (key_dim, head_dim) and its shared memory; null where none is built.
Kernel kernel_for(const at::Geometry& g, size_t* bytes) {
#define YOLOCU_FLASH_CASE(KD, HD)                               \
  if (g.key_dim == KD && g.head_dim == HD) {                   \
    *bytes = Tile<KD, HD>::kBytes;                             \
    return &attention_flash_kernel<KD, HD>;                    \
  }
  YOLOCU_FLASH_CASE(16, 16)
  YOLOCU_FLASH_CASE(16, 32)
  YOLOCU_FLASH_CASE(16, 64)
  YOLOCU_FLASH_CASE(32, 32)
  YOLOCU_FLASH_CASE(32, 64)
  YOLOCU_FLASH_CASE(32, 128)
  YOLOCU_FLASH_CASE(64, 64)
  YOLOCU_FLASH_CASE(64, 128)
#undef YOLOCU_FLASH_CASE
  return nullptr;
}

}  // namespace

bool attention_mma_supported(const at::Geometry& g) {
  size_t bytes = 0;
  if (kernel_for(g, &bytes) == nullptr || g.tokens < 1) return false;
  // 16-byte copies of k and v, 4-byte loads of q, 4-byte stores of x
  if (g.qkv_pitch % 8 != 0 || g.out_pitch % 2 != 0) return false;
  int device = 0, major = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major >= 8 && bytes <= static_cast<size_t>(optin);
}

void attention_mma_prepare(const at::Geometry& g) {
  size_t bytes = 0;
  const Kernel k = kernel_for(g, &bytes);
  YOLOCU_CHECK(k != nullptr, kInternal, "attention: no tensor-core kernel for key dim ", g.key_dim, ", head dim ", g.head_dim);
  engine::raise_smem_limit(reinterpret_cast<const void*>(k), bytes);
}

void attention_mma(const at::Geometry& g, const void* qkv, void* x, void* v_image, int batch, cudaStream_t stream) {
  size_t bytes = 0;
  const Kernel k = kernel_for(g, &bytes);
  YOLOCU_CHECK(k != nullptr, kInternal, "attention: no tensor-core kernel for key dim ", g.key_dim, ", head dim ", g.head_dim);
  const dim3 grid(static_cast<unsigned>((g.tokens + kRows - 1) / kRows), static_cast<unsigned>(g.heads),
                  static_cast<unsigned>(batch));
  k<<<grid, kThreads, bytes, stream>>>(static_cast<const __half*>(qkv), static_cast<__half*>(x),
                                       static_cast<__half*>(v_image), g);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

// yolocu's own small-reduction convolution (own_conv_kernel.hpp): implicit GEMM on tensor cores.
//
// GEMM view: C[M x K] = A[M x Kd] * B[Kd x K] with M = n * p * q output pixels (NHWC rows), Kd =
// r * s * c (tap-major, channel-minor: the order of the KRSC weights), K output channels.
// Block = BM output pixels (BM / 16 warps, 32 threads each) x all K (<= 64) channels:
//   1. each of its BM rows gets its image and top-left input corner (shared `rows`);
//   2. A (BM x Kd, zero-padded to a multiple of 16) is gathered from x into shared memory in
//      16-byte chunks of 8 channels (one tap of one row per chunk: coalesced along c, and adjacent
//      rows read adjacent pixels); taps outside the image are zeros;
//   3. B (the weights, K x Kd, column-major for WMMA) likewise;
//   4. warp w multiplies its 16 rows by all of B: Kd / 16 steps of K / 16 WMMA 16x16x16 products,
//      fp32 accumulators;
//   5. epilogue per 16x16 accumulator tile through a per-warp float scratch: lane = (row, 8
//      channels); + bias, SiLU, + residual in float32, one 16-byte fp16 store.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "core/cuda_check.hpp"
#include "engine/cuda/tactics/own_conv_kernel.hpp"
#include "engine/cuda/tactics/smem_limit.hpp"

namespace yolocu::engine {
namespace {

using namespace nvcuda;

struct Geometry {
  int kd, kp;          // reduction length, padded to 16
  int lda, ldb;        // shared-memory leading dimensions (halves)
  size_t a_off, b_off, c_off, rows_off, bytes;
};

size_t align128(size_t v) { return (v + 127) / 128 * 128; }

Geometry geometry(const OwnConvArgs& a, int bm) {
  Geometry g;
  g.kd = a.r * a.s * a.c;
  g.kp = (g.kd + 15) / 16 * 16;
  g.lda = g.kp + 8;  // +8 halves: rows start 16 bytes apart modulo 128, fewer bank conflicts
  g.ldb = g.kp + 8;
  g.a_off = 0;
  g.b_off = align128(g.a_off + size_t(bm) * g.lda * 2);
  g.c_off = align128(g.b_off + size_t(a.k) * g.ldb * 2);
  g.rows_off = align128(g.c_off + size_t(bm / 16) * 256 * 4);
  g.bytes = align128(g.rows_off + size_t(bm) * sizeof(int4));
  return g;
}

struct Params {
  const __half* x;
  const __half* w;
  const float* bias;
  const __half* res;
  __half* y;
  int c, h, w_, k, yp, s, p, q, pad_h, pad_w, str_h, str_w, dil_h, dil_w;
  int kd, kp, lda, ldb, m;
  unsigned a_off, b_off, c_off, rows_off;
  bool silu;
};

template <int BM, int NF>
__global__ void __launch_bounds__(BM * 2) own_conv_kernel(Params P) {
  extern __shared__ __align__(128) unsigned char smem[];
  __half* As = reinterpret_cast<__half*>(smem + P.a_off);
  __half* Bs = reinterpret_cast<__half*>(smem + P.b_off);
  float* Cs = reinterpret_cast<float*>(smem + P.c_off);
  int4* rows = reinterpret_cast<int4*>(smem + P.rows_off);
  constexpr int kThreadsPerBlock = BM * 2;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m0 = blockIdx.x * BM;

  // 1. rows: (image offset in pixels, iy0, ix0, valid)
  for (int i = tid; i < BM; i += kThreadsPerBlock) {
    const int m = m0 + i;
    int4 r = make_int4(0, 0, 0, 0);
    if (m < P.m) {
      const int pq = P.p * P.q;
      const int n = m / pq, rem = m - n * pq;
      const int oy = rem / P.q, ox = rem - oy * P.q;
      r = make_int4(n * P.h, oy * P.str_h - P.pad_h, ox * P.str_w - P.pad_w, 1);
    }
    rows[i] = r;
  }
  // 3. B: K rows of Kd weights (column-major B), zero-padded to kp.
  const int cpr = P.kp / 8;  // 16-byte chunks per row
  for (int i = tid; i < NF * 16 * cpr; i += kThreadsPerBlock) {
    const int co = i / cpr, k0 = (i - co * cpr) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (k0 < P.kd) v = *reinterpret_cast<const uint4*>(P.w + static_cast<int64_t>(co) * P.kd + k0);
    *reinterpret_cast<uint4*>(Bs + co * P.ldb + k0) = v;
  }
  __syncthreads();
  // 2. A: BM rows of Kd input values, kBatch chunks per thread loaded before any is stored
  //    (independent loads in flight; the stores into shared memory would serialise them).
  constexpr int kBatch = 8;
  const int cchunks = P.c / 8, a_chunks = BM * cpr;
  for (int base = tid; base < a_chunks; base += kBatch * kThreadsPerBlock) {
    uint4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kThreadsPerBlock;
      v[u] = make_uint4(0, 0, 0, 0);
      if (i >= a_chunks) continue;
      const int row = i / cpr, j = i - row * cpr, k0 = j * 8;
      const int4 r = rows[row];
      if (r.w && k0 < P.kd) {
        const int tap = j / cchunks, c0 = (j - tap * cchunks) * 8;
        const int rr = tap / P.s, ss = tap - rr * P.s;
        const int iy = r.y + rr * P.dil_h, ix = r.z + ss * P.dil_w;
        if (iy >= 0 && iy < P.h && ix >= 0 && ix < P.w_)
          v[u] = __ldg(reinterpret_cast<const uint4*>(P.x + ((static_cast<int64_t>(r.x) + iy) * P.w_ + ix) * P.c + c0));
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kThreadsPerBlock;
      if (i >= a_chunks) continue;
      const int row = i / cpr;
      *reinterpret_cast<uint4*>(As + row * P.lda + (i - row * cpr) * 8) = v[u];
    }
  }
  __syncthreads();

  // 4. products
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) wmma::fill_fragment(acc[f], 0.f);
  const __half* a_rows = As + warp * 16 * P.lda;
  for (int kk = 0; kk < P.kp; kk += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a_rows + kk, P.lda);
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
      wmma::load_matrix_sync(fb, Bs + f * 16 * P.ldb + kk, P.ldb);
      wmma::mma_sync(acc[f], fa, fb, acc[f]);
    }
  }

  // 5. epilogue
  float* scratch = Cs + warp * 256;
  const int row = lane / 2, col0 = (lane % 2) * 8;
  const int m = m0 + warp * 16 + row;
#pragma unroll
  for (int f = 0; f < NF; ++f) {
    wmma::store_matrix_sync(scratch, acc[f], 16, wmma::mem_row_major);
    __syncwarp();
    if (m < P.m) {
      const int co = f * 16 + col0;
      const int64_t o = static_cast<int64_t>(m) * P.k + co;
      alignas(16) __half out[8];
      alignas(16) __half rv[8];
      if (P.res) *reinterpret_cast<uint4*>(rv) = *reinterpret_cast<const uint4*>(P.res + o);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float v = scratch[row * 16 + col0 + e];
        if (P.bias) v += P.bias[co + e];
        if (P.silu) v = v / (1.f + expf(-v));
        if (P.res) v += __half2float(rv[e]);
        out[e] = __float2half_rn(v);
      }
      *reinterpret_cast<uint4*>(P.y + static_cast<int64_t>(m) * P.yp + co) = *reinterpret_cast<const uint4*>(out);
    }
    __syncwarp();
  }
}

template <int BM>
using KernelFn = void (*)(Params);

template <int BM>
KernelFn<BM> kernel_for(int nf) {
  switch (nf) {
    case 1: return own_conv_kernel<BM, 1>;
    case 2: return own_conv_kernel<BM, 2>;
    case 3: return own_conv_kernel<BM, 3>;
    default: return own_conv_kernel<BM, 4>;
  }
}

void check_bm(int bm) { YOLOCU_CHECK(bm == 64 || bm == 128, kInternal, "own_conv: block of ", bm, " rows"); }

}  // namespace

bool own_conv_supports(const OwnConvArgs& a) {
  const int64_t m = int64_t{a.n} * a.p * a.q;
  return a.c > 0 && a.c % 8 == 0 && a.k > 0 && a.k % 16 == 0 && a.k <= kOwnMaxChannelsOut && a.r > 0 && a.s > 0 &&
         a.r * a.s * a.c <= kOwnMaxReduction && m > 0 && m < (int64_t{1} << 31) &&
         (a.y_pitch == 0 || (a.y_pitch >= a.k && a.y_pitch % 8 == 0)) &&
         int64_t{a.n} * a.h * a.w_ * a.c < (int64_t{1} << 40);
}

size_t own_conv_smem(const OwnConvArgs& a, int bm) { return geometry(a, bm).bytes; }

void own_conv_prepare(const OwnConvArgs& a, int bm) {
  check_bm(bm);
  const int nf = a.k / 16;
  const void* fn = bm == 64 ? reinterpret_cast<const void*>(kernel_for<64>(nf))
                            : reinterpret_cast<const void*>(kernel_for<128>(nf));
  raise_smem_limit(fn, geometry(a, bm).bytes);
}

void own_conv_run(const OwnConvArgs& a, int bm, cudaStream_t stream) {
  check_bm(bm);
  const Geometry g = geometry(a, bm);
  Params P;
  P.x = static_cast<const __half*>(a.x);
  P.w = static_cast<const __half*>(a.w);
  P.bias = a.bias;
  P.res = static_cast<const __half*>(a.residual);
  P.y = static_cast<__half*>(a.y);
  P.c = a.c;
  P.h = a.h;
  P.w_ = a.w_;
  P.k = a.k;
  P.yp = a.y_pitch > 0 ? a.y_pitch : a.k;
  P.s = a.s;
  P.p = a.p;
  P.q = a.q;
  P.pad_h = a.pad_h;
  P.pad_w = a.pad_w;
  P.str_h = a.str_h;
  P.str_w = a.str_w;
  P.dil_h = a.dil_h;
  P.dil_w = a.dil_w;
  P.kd = g.kd;
  P.kp = g.kp;
  P.lda = g.lda;
  P.ldb = g.ldb;
  P.m = a.n * a.p * a.q;
  P.a_off = static_cast<unsigned>(g.a_off);
  P.b_off = static_cast<unsigned>(g.b_off);
  P.c_off = static_cast<unsigned>(g.c_off);
  P.rows_off = static_cast<unsigned>(g.rows_off);
  P.silu = a.silu;
  const unsigned blocks = static_cast<unsigned>((P.m + bm - 1) / bm);
  const int nf = a.k / 16;
  if (bm == 64)
    kernel_for<64>(nf)<<<blocks, 128, g.bytes, stream>>>(P);
  else
    kernel_for<128>(nf)<<<blocks, 256, g.bytes, stream>>>(P);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::engine

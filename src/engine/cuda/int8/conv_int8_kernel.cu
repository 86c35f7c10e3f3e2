// yolocu's INT8 implicit-GEMM convolution (conv_int8_kernel.hpp).
//
// GEMM view: C[M x K] = A[M x Kd] * B[Kd x K], M = n * p * q output pixels (NHWC rows), Kd = r * s * c
// (tap-major, channel-minor: the KRSC weights' order), K output channels. c % 16 == 0, so a 16-byte
// chunk of a row of A is 16 channels of one tap of one input pixel (or zeros outside the image).
// Block = BM pixels x BN channels, WARPS_M x WARPS_N warps, each owning a (BM / WARPS_M) x
// (BN / WARPS_N) piece of C as m16n8 int32 accumulators.
//   1. each thread loads a fixed 16-byte column (tid % 4) of the 64-byte reduction steps for its
//      BM * 4 / threads rows of A and BN * 4 / threads rows of B (the weights, [k][Kd]) with
//      cp.async (zero-fill outside the image, past Kd, past K); STAGES steps in flight;
//   2. shared rows are 80 bytes apart, so the 8 rows one ldmatrix reads fall into 8 different
//      16-byte bank groups (no conflicts, no swizzle);
//   3. per 32-byte half step: ldmatrix.x4 gives the A fragment of a 16-row tile and the B fragments
//      of two 8-column tiles; mma.sync m16n8k32 s8 x s8 -> s32;
//   4. epilogue through shared memory (epilogue() below): the int32 accumulators are staged, then
//      each thread takes 4 adjacent channels of a row: int8_math.hpp's float math, one 4-, 8- or
//      16-byte store (int8, fp16, int32), coalesced along the channels.
// Split-K (Int8ConvArgs::split_k > 1, for grids too small to fill the GPU): blockIdx.z takes a slice
// of the reduction steps and writes its raw int32 sums to its own workspace slice; a second kernel
// adds the slices in order and runs the epilogue (integer sums: bit-identical to one slice).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "engine/cuda/int8/conv_int8_kernel.hpp"
#include "engine/cuda/int8/int8_math.hpp"
#include "engine/cuda/mma_ptx.cuh"
#include "engine/cuda/tactics/smem_limit.hpp"

namespace yolocu::engine {
namespace {

constexpr int kBK = 64;         // reduction bytes per stage
constexpr int kLds = kBK + 16;  // shared row pitch (bytes)
constexpr int kOutside = -(1 << 29);  // an input row no tap offset brings inside the image

struct Params {
  const int8_t* x;
  const int8_t* w;
  const float* scale;
  const float* bias;
  const void* res;
  void* y;
  int res_type, out;
  float res_scale;
  int8::Scale y_scale;  // int8 output
  void* y2;             // the second output (null: none): out2, y2_scale, y2p
  int out2, y2p;
  int8::Scale y2_scale;
  int c, h, w_, k, s, p, q, yp, pad_h, pad_w, str_h, str_w, dil_h, dil_w;
  int kd, m;
  bool silu;
  int32_t* partial;  // split-K: int32 slices [splits][m][k]; null: the epilogue runs in the GEMM kernel
  int kt_per;        // reduction steps per slice (blockIdx.z)
};

using cuda_kernels::ptx::cp_async16;
using cuda_kernels::ptx::cp_async_commit;
using cuda_kernels::ptx::cp_async_wait;
using cuda_kernels::ptx::ldmatrix_x4;
using cuda_kernels::ptx::mma_s8;
using cuda_kernels::ptx::smem_u32;

// Where the epilogue writes: the output (P.y, P.yp, P.out), or a split-K slice of raw int32 sums.
struct Dst {
  void* y;
  int yp, out;
};

// Four values at element offset o of an int8 (quantised with sc) or fp16 output: one store.
__device__ __forceinline__ void store_values(void* y, int out, const int8::Scale& sc, int64_t o, const float (&v)[4]) {
  if (out == static_cast<int>(Int8Out::kInt8)) {
    *reinterpret_cast<char4*>(static_cast<int8_t*>(y) + o) =
        make_char4(int8::requantize(v[0], sc), int8::requantize(v[1], sc), int8::requantize(v[2], sc), int8::requantize(v[3], sc));
  } else {
    uint2 h;
    *reinterpret_cast<__half2*>(&h.x) = __halves2half2(__float2half_rn(v[0]), __float2half_rn(v[1]));
    *reinterpret_cast<__half2*>(&h.y) = __halves2half2(__float2half_rn(v[2]), __float2half_rn(v[3]));
    *reinterpret_cast<uint2*>(static_cast<__half*>(y) + o) = h;
  }
}

// Four adjacent output channels (co .. co + 3) of output pixel m: the epilogue and one store
// (16 bytes of int32, 8 of fp16 or 4 of int8; the residual likewise read in one load).
__device__ __forceinline__ void store_quad(const Params& P, const Dst& d, int m, int co, int4 acc) {
  const int64_t yo = static_cast<int64_t>(m) * d.yp + co;
  if (d.out == static_cast<int>(Int8Out::kInt32)) {
    *reinterpret_cast<int4*>(static_cast<int32_t*>(d.y) + yo) = acc;
    return;
  }
  const int a[4] = {acc.x, acc.y, acc.z, acc.w};
  float v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) v[e] = int8::conv_value(a[e], __ldg(P.scale + co + e), P.bias ? __ldg(P.bias + co + e) : 0.f, P.silu);
  const int64_t ro = static_cast<int64_t>(m) * P.k + co;
  if (P.res_type == static_cast<int>(Int8Residual::kInt8)) {
    const char4 r = *reinterpret_cast<const char4*>(static_cast<const int8_t*>(P.res) + ro);
    v[0] = int8::add_residual_i8(v[0], r.x, P.res_scale);
    v[1] = int8::add_residual_i8(v[1], r.y, P.res_scale);
    v[2] = int8::add_residual_i8(v[2], r.z, P.res_scale);
    v[3] = int8::add_residual_i8(v[3], r.w, P.res_scale);
  } else if (P.res_type == static_cast<int>(Int8Residual::kHalf)) {
    const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const __half*>(P.res) + ro);
    const __half2 r01 = *reinterpret_cast<const __half2*>(&raw.x), r23 = *reinterpret_cast<const __half2*>(&raw.y);
    v[0] = int8::add_residual_f32(v[0], __low2float(r01));
    v[1] = int8::add_residual_f32(v[1], __high2float(r01));
    v[2] = int8::add_residual_f32(v[2], __low2float(r23));
    v[3] = int8::add_residual_f32(v[3], __high2float(r23));
  }
  store_values(d.y, d.out, P.y_scale, yo, v);
  if (P.y2) store_values(P.y2, P.out2, P.y2_scale, static_cast<int64_t>(m) * P.y2p + co, v);
}

// The block's accumulators leave through shared memory (the pipeline's, free again): in passes of
// kPassRows rows, the warps holding those rows store their int32 fragments there, then every thread
// takes 4 adjacent channels of a row at a time (consecutive threads: consecutive channels, then
// rows), so residual loads and output stores are whole 32-byte sectors.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, int MI, int NI>
__device__ __forceinline__ void epilogue(const Params& P, const Dst& d, const int (&acc)[MI][NI][4],
                                         unsigned char* smem, int m0, int n0) {
  constexpr int kThreads = WARPS_M * WARPS_N * 32, WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int kCPitch = BN + 8;  // int32s; +8: a warp's 8-byte stores of 8 rows x 4 lanes hit distinct banks
  constexpr int kFit = STAGES * (BM + BN) * kLds / (kCPitch * 4);
  constexpr int kPassRows = (kFit < BM ? kFit : BM) / WM * WM;
  static_assert(kPassRows >= WM && BM % kPassRows == 0, "a pass holds whole warp rows");
  int* Cs = reinterpret_cast<int*>(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N, gid = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int r0 = 0; r0 < BM; r0 += kPassRows) {
    __syncthreads();  // the pipeline's last reads, or the previous pass's
    if (wm * WM >= r0 && wm * WM < r0 + kPassRows) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int row = wm * WM + mi * 16 + gid + hh * 8 - r0, col = wn * WN + ni * 8 + tig * 2;
            *reinterpret_cast<int2*>(Cs + row * kCPitch + col) = make_int2(acc[mi][ni][hh * 2], acc[mi][ni][hh * 2 + 1]);
          }
    }
    __syncthreads();
    for (int g = tid; g < kPassRows * BN / 4; g += kThreads) {
      const int row = g / (BN / 4), col = (g - row * (BN / 4)) * 4;
      const int m = m0 + r0 + row, co = n0 + col;
      if (m < P.m && co < P.k)  // k % 8 == 0: co + 3 < k too
        store_quad(P, d, m, co, *reinterpret_cast<const int4*>(Cs + row * kCPitch + col));
    }
  }
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32) conv_int8_kernel(Params P) {
  constexpr int kThreads = WARPS_M * WARPS_N * 32;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N, MI = WM / 16, NI = WN / 8;
  constexpr int kAIters = BM * 4 / kThreads, kBIters = BN * 4 / kThreads, kRowStep = kThreads / 4;
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: m16 rows, pairs of n8 columns");
  static_assert(BM * 4 % kThreads == 0 && BN * 4 % kThreads == 0, "whole chunks per thread");
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int col = tid & 3, row0 = tid >> 2;

  // 1. this thread's rows of A (image row offset, top-left input corner) and of B.
  int a_img[kAIters], a_iy[kAIters], a_ix[kAIters];
#pragma unroll
  for (int i = 0; i < kAIters; ++i) {
    const int m = m0 + row0 + i * kRowStep;
    a_img[i] = 0, a_iy[i] = kOutside, a_ix[i] = 0;
    if (m < P.m) {
      const int pq = P.p * P.q, n = m / pq, rem = m - n * pq, oy = rem / P.q, ox = rem - oy * P.q;
      a_img[i] = n * P.h, a_iy[i] = oy * P.str_h - P.pad_h, a_ix[i] = ox * P.str_w - P.pad_w;
    }
  }
  const int8_t* b_row[kBIters];
#pragma unroll
  for (int j = 0; j < kBIters; ++j) {
    const int co = n0 + row0 + j * kRowStep;
    b_row[j] = co < P.k ? P.w + static_cast<int64_t>(co) * P.kd : nullptr;
  }
  // this block's reduction steps: all, or slice blockIdx.z of P.kt_per steps (split-K)
  const int kt_all = (P.kd + kBK - 1) / kBK, kt0 = blockIdx.z * P.kt_per;
  const int kt_count = max(0, min(kt_all, kt0 + P.kt_per) - kt0);
  // Where this thread's column of the next step to load starts: reduction index k0 = tap * c + c0,
  // tap = rr * s + ss. load() takes the steps in order and advances it without dividing.
  int k0 = kt0 * kBK + col * 16, tap = k0 / P.c, c0 = k0 - tap * P.c, rr = tap / P.s, ss = tap - rr * P.s;
  auto load = [&](int stage) {
    unsigned char* As = smem + stage * (BM + BN) * kLds;
    unsigned char* Bs = As + BM * kLds;
    const bool k_in = k0 < P.kd;
    const int dy = rr * P.dil_h, dx = ss * P.dil_w;
#pragma unroll
    for (int i = 0; i < kAIters; ++i) {
      const int iy = a_iy[i] + dy, ix = a_ix[i] + dx;
      const bool ok = k_in && static_cast<unsigned>(iy) < static_cast<unsigned>(P.h) &&
                      static_cast<unsigned>(ix) < static_cast<unsigned>(P.w_);
      const int8_t* src = ok ? P.x + ((static_cast<int64_t>(a_img[i]) + iy) * P.w_ + ix) * P.c + c0 : P.x;
      cp_async16(smem_u32(As + (row0 + i * kRowStep) * kLds + col * 16), src, ok);
    }
#pragma unroll
    for (int j = 0; j < kBIters; ++j) {
      const bool ok = k_in && b_row[j] != nullptr;
      cp_async16(smem_u32(Bs + (row0 + j * kRowStep) * kLds + col * 16), ok ? b_row[j] + k0 : P.w, ok);
    }
    k0 += kBK, c0 += kBK;
    while (c0 >= P.c) {
      c0 -= P.c;
      if (++ss == P.s) ss = 0, ++rr;
    }
  };

  int acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0;

#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < kt_count) load(st);
    cp_async_commit();
  }
  for (int kt = 0; kt < kt_count; ++kt) {
    cp_async_wait<STAGES - 2>();  // step kt has landed (this thread's copies) ...
    __syncthreads();              // ... everyone's, and step kt - 1's stage is free again
    const int next = kt + STAGES - 1;
    if (next < kt_count) load(next % STAGES);
    cp_async_commit();
    const unsigned char* As = smem + (kt % STAGES) * (BM + BN) * kLds;
    const unsigned char* Bs = As + BM * kLds;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 32) {
      uint32_t a[MI][4], b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        ldmatrix_x4(a[mi], smem_u32(As + (wm * WM + mi * 16 + (lane & 15)) * kLds + kk + (lane >> 4) * 16));
#pragma unroll
      for (int ni = 0; ni < NI; ni += 2) {
        uint32_t t[4];
        const int nrow = wn * WN + ni * 8 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(t, smem_u32(Bs + nrow * kLds + kk + ((lane >> 3) & 1) * 16));
        b[ni][0] = t[0], b[ni][1] = t[1], b[ni + 1][0] = t[2], b[ni + 1][1] = t[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_s8(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
  }
  cp_async_wait<0>();  // (only empty groups are left)
  Dst d{P.y, P.yp, P.out};
  if (P.partial) d = Dst{P.partial + static_cast<int64_t>(blockIdx.z) * P.m * P.k, P.k, static_cast<int>(Int8Out::kInt32)};
  epilogue<BM, BN, WARPS_M, WARPS_N, STAGES, MI, NI>(P, d, acc, smem, m0, n0);
}

// Split-K's second launch: one thread = 4 adjacent channels of one pixel; the slices' int32 sums
// added in slice order (exact in any order), then the epilogue and the store.
__global__ void split_reduce_kernel(Params P, int splits) {
  const int quads_per_row = P.k / 4;
  const int64_t quads = static_cast<int64_t>(P.m) * quads_per_row;
  const int4* part = reinterpret_cast<const int4*>(P.partial);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < quads; i += int64_t{gridDim.x} * blockDim.x) {
    int4 sum = __ldcs(part + i);
    for (int z = 1; z < splits; ++z) {
      const int4 v = __ldcs(part + z * quads + i);
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    const int m = static_cast<int>(i / quads_per_row);
    store_quad(P, Dst{P.y, P.yp, P.out}, m, static_cast<int>(i - int64_t{m} * quads_per_row) * 4, sum);
  }
}

using KernelFn = void (*)(Params);
struct Instance {
  Int8Tile tile;
  KernelFn fn;
};
const Instance kInstances[] = {
    {{128, 128, 2, 4, 3}, conv_int8_kernel<128, 128, 2, 4, 3>},
    {{128, 64, 2, 2, 4}, conv_int8_kernel<128, 64, 2, 2, 4>},
    {{64, 64, 2, 2, 4}, conv_int8_kernel<64, 64, 2, 2, 4>},
    {{64, 32, 2, 2, 4}, conv_int8_kernel<64, 32, 2, 2, 4>},
    {{256, 128, 4, 2, 3}, conv_int8_kernel<256, 128, 4, 2, 3>},
    // few output channels, many pixels (the bottlenecks of the n models at high resolution)
    {{128, 32, 2, 2, 3}, conv_int8_kernel<128, 32, 2, 2, 3>},
    {{256, 32, 4, 1, 3}, conv_int8_kernel<256, 32, 4, 1, 3>},
};
constexpr int kInstanceCount = static_cast<int>(sizeof(kInstances) / sizeof(kInstances[0]));

const Instance& instance(int tile) {
  YOLOCU_CHECK(tile >= 0 && tile < kInstanceCount, kInvalidArgument, "int8 conv: no tile ", tile);
  return kInstances[tile];
}

}  // namespace

const std::vector<Int8Tile>& int8_conv_tiles() {
  static const std::vector<Int8Tile> tiles = [] {
    std::vector<Int8Tile> t;
    for (const Instance& i : kInstances) t.push_back(i.tile);
    return t;
  }();
  return tiles;
}

size_t int8_conv_smem(int tile) {
  const Int8Tile& t = instance(tile).tile;
  return static_cast<size_t>(t.stages) * (t.bm + t.bn) * kLds;
}

void int8_conv_prepare(int tile) { raise_smem_limit(reinterpret_cast<const void*>(instance(tile).fn), int8_conv_smem(tile)); }

void int8_conv_run(const Int8ConvArgs& a, int tile, cudaStream_t stream) {
  const std::string why = int8_conv_unsupported(a);
  YOLOCU_CHECK(why.empty(), kInvalidArgument, "int8 conv: ", why);
  const Instance& in = instance(tile);
  int8_conv_prepare(tile);
  Params P;
  P.x = a.x, P.w = a.w, P.scale = a.scale, P.bias = a.bias, P.res = a.residual, P.y = a.y;
  P.res_type = static_cast<int>(a.residual_type), P.out = static_cast<int>(a.out);
  P.res_scale = a.residual_scale, P.y_scale = int8::make_scale(a.y_scale);
  P.c = a.c, P.h = a.h, P.w_ = a.w_, P.k = a.k, P.s = a.s, P.p = a.p, P.q = a.q;
  P.yp = a.y_pitch > 0 ? a.y_pitch : a.k;
  P.y2 = a.y2, P.out2 = static_cast<int>(a.out2), P.y2p = a.y2_pitch > 0 ? a.y2_pitch : a.k;
  P.y2_scale = int8::make_scale(a.out2 == Int8Out::kInt8 ? a.y2_scale : 1.f);
  P.pad_h = a.pad_h, P.pad_w = a.pad_w, P.str_h = a.str_h, P.str_w = a.str_w, P.dil_h = a.dil_h, P.dil_w = a.dil_w;
  P.kd = a.r * a.s * a.c, P.m = a.n * a.p * a.q, P.silu = a.silu;
  // split-K: slices of kt_per steps (the last ones may be fewer: no empty slice is launched)
  const int kt_all = (P.kd + kBK - 1) / kBK;
  P.kt_per = (kt_all + a.split_k - 1) / a.split_k;
  const int splits = (kt_all + P.kt_per - 1) / P.kt_per;
  P.partial = splits > 1 ? static_cast<int32_t*>(a.workspace) : nullptr;
  const dim3 grid(static_cast<unsigned>((P.m + in.tile.bm - 1) / in.tile.bm),
                  static_cast<unsigned>((a.k + in.tile.bn - 1) / in.tile.bn), static_cast<unsigned>(splits));
  const unsigned threads = static_cast<unsigned>(in.tile.warps_m * in.tile.warps_n * 32);
  in.fn<<<grid, threads, int8_conv_smem(tile), stream>>>(P);
  YOLOCU_CUDA_CHECK_LAUNCH();
  if (splits > 1) {
    const int64_t quads = int64_t{P.m} * (P.k / 4);
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((quads + 255) / 256, int64_t{65535} * 8));
    split_reduce_kernel<<<blocks, 256, 0, stream>>>(P, splits);
    YOLOCU_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace yolocu::engine

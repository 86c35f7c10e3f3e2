// The depthwise convolution (own_dwconv_kernel.hpp): a direct stencil over NHWC, memory-bound.
//
// Block = a tile of output pixels (th rows x tws * TQ columns of one image) x `lanes` channel
// vectors of V channels (grid.y: the channel blocks). Thread = one channel vector (threadIdx
// fastest: a warp's lanes read a pixel's channels contiguously, then the next pixel's) x TQ output
// pixels of one row, tws columns apart (neighbouring threads read neighbouring pixels).
//   1. The block's weights [channel][tap] go to shared memory as float32 [tap][channel], so that a
//      thread's V weights of one tap are one or two vector loads (the same address for every
//      pixel: broadcast).
//   2. Per tap: the TQ input vectors (16 bytes at most: 8 fp16 or 4 fp32 channels) through the
//      read-only path (L1 keeps the rows that the block's neighbouring output rows share; zeros
//      outside the image), converted to float32 and accumulated in float32 (fma).
//   3. Epilogue in float32: + bias, SiLU, + residual, one rounding to the activation dtype, one
//      vector store per pixel.
// KS > 0: a KS x KS filter known at compile time (loops unrolled: every load of a row in flight at
// once); KS == 0: r x s from the arguments. WIN (KS > 0, stride and dilation 1): a thread's TQ
// pixels are adjacent instead, and each filter row's TQ + KS - 1 input vectors are loaded and
// converted once into a register window that all its taps read.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "engine/cuda/tactics/own_dwconv_kernel.hpp"

namespace yolocu::engine {
namespace {

constexpr int kThreads = 256;  // threads a block aims at
constexpr int kMaxLanes = 16;  // channel vectors per block (shared weights <= 9 * 9 * 128 floats)

struct Params {
  const void* x;
  const void* w;
  const float* bias;
  const void* res;
  void* y;
  int c, h, w_, r, s, p, q, yp;
  int pad_h, pad_w, str_h, str_w, dil_h, dil_w;
  int lanes, tws, th;      // channel vectors, thread columns and output rows of a block
  int tiles_x, tiles_y;    // tiles per image row / column
  bool silu;
};

template <int B>
struct Raw;
template <>
struct Raw<16> {
  using type = uint4;
};
template <>
struct Raw<8> {
  using type = uint2;
};
template <>
struct Raw<4> {
  using type = unsigned;
};
template <>
struct Raw<2> {
  using type = unsigned short;
};

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}

// V elements at p (aligned to V * sizeof(T)) as floats; zeros without reading when !ok.
template <typename T, int V>
__device__ __forceinline__ void load_vec(const T* p, bool ok, float (&out)[V]) {
  using R = typename Raw<sizeof(T) * V>::type;
  alignas(sizeof(T) * V) T e[V];
  R raw{};
  if (ok) raw = __ldg(reinterpret_cast<const R*>(p));
  *reinterpret_cast<R*>(e) = raw;
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = to_float(e[i]);
}

template <typename T, int V>
__device__ __forceinline__ void store_vec(T* p, const float (&v)[V]) {
  using R = typename Raw<sizeof(T) * V>::type;
  alignas(sizeof(T) * V) T e[V];
#pragma unroll
  for (int i = 0; i < V; ++i) e[i] = from_float<T>(v[i]);
  *reinterpret_cast<R*>(p) = *reinterpret_cast<const R*>(e);
}

// V weights from shared memory (p aligned to V floats, up to 16 bytes).
template <int V>
__device__ __forceinline__ void load_w(const float* p, float (&w)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int i = 0; i < V / 4; ++i) {
      const float4 t = reinterpret_cast<const float4*>(p)[i];
      w[4 * i] = t.x;
      w[4 * i + 1] = t.y;
      w[4 * i + 2] = t.z;
      w[4 * i + 3] = t.w;
    }
  } else if constexpr (V == 2) {
    const float2 t = *reinterpret_cast<const float2*>(p);
    w[0] = t.x;
    w[1] = t.y;
  } else {
    w[0] = *p;
  }
}

// Accumulates filter row `i` (input row pointer xr, valid when row_ok) into acc.
template <typename T, int V, int TQ, int KS, bool WIN>
__device__ __forceinline__ void accumulate_row(const Params& P, const T* xr, bool row_ok, const int (&ix0)[TQ],
                                               const float* wrow, int cbn, int s, float (&acc)[TQ][V]) {
  if constexpr (WIN) {
    constexpr int kWin = TQ + KS - 1;  // ix0[j] == ix0[0] + j
    float xv[kWin][V];
#pragma unroll
    for (int m = 0; m < kWin; ++m) {
      const int ix = ix0[0] + m;
      const bool ok = row_ok && static_cast<unsigned>(ix) < static_cast<unsigned>(P.w_);
      load_vec<T, V>(xr + (ok ? ix : 0) * P.c, ok, xv[m]);
    }
#pragma unroll
    for (int k = 0; k < KS; ++k) {
      float wv[V];
      load_w<V>(wrow + k * cbn, wv);
#pragma unroll
      for (int j = 0; j < TQ; ++j)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[j][e] = fmaf(xv[j + k][e], wv[e], acc[j][e]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < s; ++k) {
      float wv[V];
      load_w<V>(wrow + k * cbn, wv);
      float xv[TQ][V];
#pragma unroll
      for (int j = 0; j < TQ; ++j) {
        const int ix = ix0[j] + k * P.dil_w;
        const bool ok = row_ok && static_cast<unsigned>(ix) < static_cast<unsigned>(P.w_);
        load_vec<T, V>(xr + (ok ? ix : 0) * P.c, ok, xv[j]);
      }
#pragma unroll
      for (int j = 0; j < TQ; ++j)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[j][e] = fmaf(xv[j][e], wv[e], acc[j][e]);
    }
  }
}

template <typename T, int V, int TQ, int KS, bool WIN>
__global__ void __launch_bounds__(kThreads) dwconv_kernel(Params P) {
  extern __shared__ float4 smem_f4[];
  float* wsm = reinterpret_cast<float*>(smem_f4);
  const int r = KS > 0 ? KS : P.r, s = KS > 0 ? KS : P.s, rs = r * s;
  const int cbn = P.lanes * V, cb0 = static_cast<int>(blockIdx.y) * cbn;
  // 1. weights -> shared [tap][channel of the block], zeros past c
  const T* w = static_cast<const T*>(P.w);
  for (int i = static_cast<int>(threadIdx.x); i < cbn * rs; i += static_cast<int>(blockDim.x)) {
    const int cl = i / rs, tap = i - cl * rs, ch = cb0 + cl;
    wsm[tap * cbn + cl] = ch < P.c ? to_float(w[static_cast<int64_t>(ch) * rs + tap]) : 0.f;
  }
  __syncthreads();

  // 2. this thread's channel vector, output row and columns
  const int lane = static_cast<int>(threadIdx.x) % P.lanes, pix = static_cast<int>(threadIdx.x) / P.lanes;
  const int sx = pix % P.tws, sy = pix / P.tws;
  int t = static_cast<int>(blockIdx.x);
  const int tx = t % P.tiles_x;
  t /= P.tiles_x;
  const int ty = t % P.tiles_y, img = t / P.tiles_y;
  const int oy = ty * P.th + sy, ch0 = cb0 + lane * V;
  if (oy >= P.p || ch0 >= P.c) return;  // (V divides c: the whole vector is in range)
  // this thread's output columns: ox0 + j * step
  const int ox0 = WIN ? (tx * P.tws + sx) * TQ : tx * P.tws * TQ + sx, step = WIN ? 1 : P.tws;
  const T* xi = static_cast<const T*>(P.x) + static_cast<int64_t>(img) * P.h * P.w_ * P.c + ch0;
  int ix0[TQ];
#pragma unroll
  for (int j = 0; j < TQ; ++j) ix0[j] = (ox0 + j * step) * P.str_w - P.pad_w;

  float acc[TQ][V];
#pragma unroll
  for (int j = 0; j < TQ; ++j)
#pragma unroll
    for (int e = 0; e < V; ++e) acc[j][e] = 0.f;
  const float* wl = wsm + lane * V;
#pragma unroll
  for (int i = 0; i < r; ++i) {
    const int iy = oy * P.str_h - P.pad_h + i * P.dil_h;
    const bool row_ok = static_cast<unsigned>(iy) < static_cast<unsigned>(P.h);
    const T* xr = xi + (row_ok ? iy : 0) * P.w_ * P.c;  // (h * w * c < 2^31: dwconv_unsupported)
    accumulate_row<T, V, TQ, KS, WIN>(P, xr, row_ok, ix0, wl + i * s * cbn, cbn, s, acc);
  }

  // 3. epilogue
  float b[V];
#pragma unroll
  for (int e = 0; e < V; ++e) b[e] = P.bias ? __ldg(P.bias + ch0 + e) : 0.f;
  T* y = static_cast<T*>(P.y);
  const T* res = static_cast<const T*>(P.res);
  const int64_t row = (static_cast<int64_t>(img) * P.p + oy) * P.q;
#pragma unroll
  for (int j = 0; j < TQ; ++j) {
    const int ox = ox0 + j * step;
    if (ox >= P.q) break;
    float v[V];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      v[e] = acc[j][e] + b[e];
      if (P.silu) v[e] = v[e] / (1.f + expf(-v[e]));
    }
    if (res) {
      float rv[V];
      load_vec<T, V>(res + (row + ox) * P.c + ch0, true, rv);
#pragma unroll
      for (int e = 0; e < V; ++e) v[e] += rv[e];
    }
    store_vec<T, V>(y + (row + ox) * P.yp + ch0, v);
  }
}

using Kernel = void (*)(Params);

template <typename T, int V, int TQ>
Kernel pick_filter(bool k3) {
  return k3 ? dwconv_kernel<T, V, TQ, 3, false> : dwconv_kernel<T, V, TQ, 0, false>;
}
template <typename T, int V>
Kernel pick_cols(int cols, bool k3, bool window) {
  if (window) return dwconv_kernel<T, V, 4, 3, true>;
  switch (cols) {
    case 1: return pick_filter<T, V, 1>(k3);
    case 2: return pick_filter<T, V, 2>(k3);
    default: return pick_filter<T, V, 4>(k3);
  }
}
Kernel pick(bool half, int v, int cols, bool k3, bool window) {
  if (half) {
    switch (v) {
      case 8: return pick_cols<__half, 8>(cols, k3, window);
      case 2: return pick_cols<__half, 2>(cols, k3, window);
      default: return pick_cols<__half, 1>(cols, k3, window);
    }
  }
  switch (v) {
    case 4: return pick_cols<float, 4>(cols, k3, window);
    case 2: return pick_cols<float, 2>(cols, k3, window);
    default: return pick_cols<float, 1>(cols, k3, window);
  }
}

bool aligned(const void* p, int bytes) { return !p || reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0; }

}  // namespace

std::string dwconv_unsupported(const DwConvArgs& a) {
  if (a.n < 1 || a.c < 1 || a.h < 1 || a.w_ < 1 || a.p < 1 || a.q < 1) return "an empty tensor";
  if (a.r < 1 || a.s < 1 || a.r > kDwMaxFilter || a.s > kDwMaxFilter)
    return detail::cat("a ", a.r, "x", a.s, " filter (1 to ", kDwMaxFilter, " a side)");
  if (a.str_h < 1 || a.str_w < 1 || a.dil_h < 1 || a.dil_w < 1 || a.pad_h < 0 || a.pad_w < 0)
    return "a stride or dilation below 1 or a negative padding";
  if (a.y_pitch != 0 && a.y_pitch < a.c) return detail::cat("an output pitch of ", a.y_pitch, " below ", a.c, " channels");
  const int64_t yp = a.y_pitch > 0 ? a.y_pitch : a.c;
  if (int64_t{a.h} * a.w_ * a.c >= (int64_t{1} << 31) || int64_t{a.p} * a.q * yp >= (int64_t{1} << 31))
    return "an image of 2^31 elements or more";
  if (int64_t{a.n} * a.p * a.q >= (int64_t{1} << 31)) return "2^31 output pixels or more";
  return "";
}

bool dwconv_window_ok(const DwConvArgs& a) {
  return a.r == 3 && a.s == 3 && a.str_h == 1 && a.str_w == 1 && a.dil_h == 1 && a.dil_w == 1;
}

int dwconv_vector(const DwConvArgs& a) {
  const int es = a.half ? 2 : 4;
  const int yp = a.y_pitch > 0 ? a.y_pitch : a.c;
  const int widest = a.half ? 8 : 4;
  for (int v = widest; v > 1; v /= 2) {
    if (a.half && v == 4) continue;  // (fp16 vectors of 8, 2 or 1 channels are instantiated)
    if (a.c % v == 0 && yp % v == 0 && aligned(a.x, v * es) && aligned(a.y, v * es) && aligned(a.residual, v * es))
      return v;
  }
  return 1;
}

void dwconv_run(const DwConvArgs& a, const DwTile& tile, cudaStream_t stream) {
  const std::string why = dwconv_unsupported(a);
  YOLOCU_CHECK(why.empty(), kUnsupported, "depthwise convolution: ", why);
  YOLOCU_CHECK((tile.cols == 1 || tile.cols == 2 || tile.cols == 4) && tile.rows >= 1 &&
                   (!tile.window || (tile.cols == 4 && dwconv_window_ok(a))),
               kInternal, "depthwise convolution: a tile of ", tile.cols, " columns, ", tile.rows, " rows",
               tile.window ? " (window)" : "");
  const int v = dwconv_vector(a);
  Params P{};
  P.x = a.x;
  P.w = a.w;
  P.bias = a.bias;
  P.res = a.residual;
  P.y = a.y;
  P.c = a.c;
  P.h = a.h;
  P.w_ = a.w_;
  P.r = a.r;
  P.s = a.s;
  P.p = a.p;
  P.q = a.q;
  P.yp = a.y_pitch > 0 ? a.y_pitch : a.c;
  P.pad_h = a.pad_h;
  P.pad_w = a.pad_w;
  P.str_h = a.str_h;
  P.str_w = a.str_w;
  P.dil_h = a.dil_h;
  P.dil_w = a.dil_w;
  P.silu = a.silu;
  // channel blocks of at most kMaxLanes vectors, balanced; then as many pixels as fill kThreads
  const int cvec = a.c / v, cblocks = (cvec + kMaxLanes - 1) / kMaxLanes;
  P.lanes = (cvec + cblocks - 1) / cblocks;
  const int per_block = std::max(1, kThreads / P.lanes);
  const int strips = (a.q + tile.cols - 1) / tile.cols;
  P.tws = std::clamp(per_block / tile.rows, 1, strips);
  P.th = std::clamp(per_block / P.tws, 1, a.p);
  P.tiles_x = (strips + P.tws - 1) / P.tws;
  P.tiles_y = (a.p + P.th - 1) / P.th;
  const int64_t blocks = int64_t{a.n} * P.tiles_x * P.tiles_y;
  YOLOCU_CHECK(blocks < (int64_t{1} << 31) && cblocks <= 65535, kUnsupported,
               "depthwise convolution: a grid of ", blocks, " x ", cblocks, " blocks");
  const size_t smem = static_cast<size_t>(a.r) * a.s * P.lanes * v * sizeof(float);
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(cblocks));
  const unsigned threads = static_cast<unsigned>(P.lanes * P.tws * P.th);
  pick(a.half, v, tile.cols, a.r == 3 && a.s == 3, tile.window)<<<grid, threads, smem, stream>>>(P);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::engine

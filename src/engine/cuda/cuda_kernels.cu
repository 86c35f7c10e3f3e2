// Kernels of the GPU engine: layout conversion, conv epilogue, NHWC pooling / resize / concat, and
// generic strided kernels for the plain-layout Detect tail. Arithmetic is float32 inside every
// kernel; fp16 is only a storage format.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/kernel_util.cuh"
#include "engine/detect_tail.hpp"

namespace yolocu::cuda_kernels {

namespace {


using kutil::check_count;
using kutil::from_f;
using kutil::grid_for;
using kutil::kThreads;
using kutil::to_f;
using kutil::Vec;

__device__ __forceinline__ float apply(EltOp op, float a, float b) {
  switch (op) {
    case EltOp::kSigmoid: return 1.f / (1.f + expf(-a));
    case EltOp::kRelu: return a > 0.f ? a : 0.f;
    case EltOp::kExp: return expf(a);
    case EltOp::kSqrt: return sqrtf(a);
    case EltOp::kFloor: return floorf(a);
    case EltOp::kCeil: return ceilf(a);
    case EltOp::kNeg: return -a;
    case EltOp::kAbs: return fabsf(a);
    case EltOp::kAdd: return a + b;
    case EltOp::kSub: return a - b;
    case EltOp::kMul: return a * b;
    case EltOp::kDiv: return a / b;
    case EltOp::kPow: return powf(a, b);
    case EltOp::kMax: return fmaxf(a, b);
    case EltOp::kMin: return fminf(a, b);
  }
  return a;
}

// NCHW -> NHWC. One thread per destination element, destination order (channel fastest) so the
// writes coalesce; the reads stride by H*W, which is cheap for the 3-channel network input.
template <typename Tin, typename Tout>
__global__ void nchw_to_nhwc_kernel(const Tin* __restrict__ src, Tout* __restrict__ dst, int c, int hw,
                                    int total) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int ch = i % c;
    const int pix = i / c;
    const int n = pix / hw, p = pix - n * hw;
    dst[i] = from_f<Tout>(to_f(src[(static_cast<int64_t>(n) * c + ch) * hw + p]));
  }
}

// NCHW -> space-to-depth NHWC: one thread per output pixel (n, u, v) of [N, H/2, W/2, cpad] reads
// the 2x2 block x[n, ch, 2u + dy, 2v + dx] of every input channel (adjacent threads read adjacent
// pairs of a row) and writes its cpad channels, channel (ch * 4 + dy * 2 + dx), zeros above 4 * C.
template <typename Tin, typename Tout, int kMaxC>
__global__ void nchw_to_s2d_kernel(const Tin* __restrict__ src, Tout* __restrict__ dst, int c, int h, int w,
                                   int cpad, int total) {
  const int oh = h / 2, ow = w / 2;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int v = i % ow, u = (i / ow) % oh, n = i / (ow * oh);
    Tout* o = dst + static_cast<int64_t>(i) * cpad;
    float vals[kMaxC * 4];
    for (int ch = 0; ch < c; ++ch) {
      const Tin* p = src + ((static_cast<int64_t>(n) * c + ch) * h + 2 * u) * w + 2 * v;
      vals[ch * 4 + 0] = to_f(p[0]);
      vals[ch * 4 + 1] = to_f(p[1]);
      vals[ch * 4 + 2] = to_f(p[w]);
      vals[ch * 4 + 3] = to_f(p[w + 1]);
    }
    for (int k = 0; k < cpad; ++k) o[k] = from_f<Tout>(k < 4 * c ? vals[k] : 0.f);
  }
}

// The common case of the kernel above, vectorised: fp16 in and out, 3 channels padded to 16. A
// thread reads one half2 (the 2x2 block's row pair) per channel and row, and writes its pixel's
// 16 channels (32 bytes) as two 16-byte stores; adjacent threads touch adjacent memory.
__global__ void nchw_to_s2d_half3x16_kernel(const __half* __restrict__ src, uint4* __restrict__ dst, int h, int w,
                                            int total) {
  const int oh = h / 2, ow = w / 2;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int v = i % ow, u = (i / ow) % oh, n = i / (ow * oh);
    alignas(16) __half2 q[8];
    for (int ch = 0; ch < 3; ++ch) {
      const __half* p = src + ((static_cast<int64_t>(n) * 3 + ch) * h + 2 * u) * w + 2 * v;
      const __half2 r0 = *reinterpret_cast<const __half2*>(p);
      const __half2 r1 = *reinterpret_cast<const __half2*>(p + w);
      q[ch * 2] = r0;      // channels ch*4 + 0, 1: (dy 0, dx 0), (dy 0, dx 1)
      q[ch * 2 + 1] = r1;  // channels ch*4 + 2, 3: (dy 1, dx 0), (dy 1, dx 1)
    }
    q[6] = q[7] = __half2(__float2half_rn(0.f), __float2half_rn(0.f));
    const uint4* qv = reinterpret_cast<const uint4*>(q);
    dst[static_cast<int64_t>(i) * 2] = qv[0];
    dst[static_cast<int64_t>(i) * 2 + 1] = qv[1];
  }
}

// NHWC -> NCHW float32 as a tiled transpose of each image's [HW x C] matrix: a 32x32 tile per
// block (blockIdx.x: channel tile, blockIdx.y: pixel tile, blockIdx.z: image), 32x8 threads;
// loads are coalesced along C, stores along HW, through padded shared memory.
template <typename Tin>
__global__ void nhwc_to_nchw_kernel(const Tin* __restrict__ src, float* __restrict__ dst, int c, int hw) {
  __shared__ float tile[32][33];
  const int64_t base = static_cast<int64_t>(blockIdx.z) * hw * c;
  const int c0 = blockIdx.x * 32, p0 = blockIdx.y * 32;
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int p = p0 + j, ch = c0 + threadIdx.x;
    if (p < hw && ch < c) tile[j][threadIdx.x] = to_f(src[base + static_cast<int64_t>(p) * c + ch]);
  }
  __syncthreads();
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int ch = c0 + j, p = p0 + threadIdx.x;
    if (ch < c && p < hw) dst[base + static_cast<int64_t>(ch) * hw + p] = tile[threadIdx.x][j];
  }
}

// Conv epilogue, in place on the NHWC output: each thread owns V consecutive channels of one
// pixel (C % V == 0), one vector load of y (and of the residual), bias from the (cached) bias
// array, SiLU in float, one vector store.
// src == y in place; else y has a pixel pitch of pvec vectors (a channel slice); the residual one of
// rvec vectors.
template <typename T, int V>
__global__ void bias_act_kernel(const T* src, T* y, const float* __restrict__ bias, const T* __restrict__ res,
                                int nvec, int cvec, int64_t pvec, int64_t rvec, bool silu) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += gridDim.x * blockDim.x) {
    const int cv = i % cvec, c0 = cv * V;
    Vec<T, V> a = reinterpret_cast<const Vec<T, V>*>(src)[i];
    Vec<T, V> r;
    if (res) r = reinterpret_cast<const Vec<T, V>*>(res)[(i / cvec) * rvec + cv];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float v = to_f(a.v[k]);
      if (bias) v += bias[c0 + k];
      if (silu) v = v / (1.f + expf(-v));
      if (res) v += to_f(r.v[k]);
      a.v[k] = from_f<T>(v);
    }
    reinterpret_cast<Vec<T, V>*>(y)[(i / cvec) * pvec + cv] = a;
  }
}

// Same-shape elementwise op: one thread per element (grid-stride), any layout.
template <typename T>
__global__ void eltwise_kernel(EltOp op, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                               int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = from_f<T>(apply(op, to_f(a[i]), b ? to_f(b[i]) : 0.f));
}

// Row copy with pitches (channel concat in NHWC, any-axis concat in plain layout): one thread
// per U-sized unit; row = unit / units_per_row. U is the widest power of two dividing all sizes.
template <typename U>
__global__ void copy_rows_kernel(const U* __restrict__ src, int src_pitch, U* __restrict__ dst, int dst_pitch,
                                 int units_per_row, int total) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int row = i / units_per_row, col = i - row * units_per_row;
    dst[static_cast<int64_t>(row) * dst_pitch + col] = src[static_cast<int64_t>(row) * src_pitch + col];
  }
}

// Generic strided kernels (plain float32): one thread per output element in row-major order; the
// coordinate is decomposed from the last axis and dotted with each input's strides (0 for a
// broadcast axis).
__global__ void binary_strided_kernel(EltOp op, const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ y, StridedParams p, int total) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int rem = i;
    int64_t oa = 0, ob = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int dim = static_cast<int>(p.out_dims[d]);
      const int q = rem / dim, coord = rem - q * dim;
      rem = q;
      oa += coord * p.a_strides[d];
      ob += coord * p.b_strides[d];
    }
    y[i] = apply(op, a[oa], b[ob]);
  }
}

}  // namespace

EltOp elt_op(const char* op_type) {
  static const struct {
    const char* name;
    EltOp op;
  } kTable[] = {{"Sigmoid", EltOp::kSigmoid}, {"Relu", EltOp::kRelu}, {"Exp", EltOp::kExp},   {"Sqrt", EltOp::kSqrt},
                {"Floor", EltOp::kFloor},     {"Ceil", EltOp::kCeil}, {"Neg", EltOp::kNeg},   {"Abs", EltOp::kAbs},
                {"Add", EltOp::kAdd},         {"Sub", EltOp::kSub},   {"Mul", EltOp::kMul},   {"Div", EltOp::kDiv},
                {"Pow", EltOp::kPow},         {"Max", EltOp::kMax},   {"Min", EltOp::kMin}};
  for (const auto& e : kTable)
    if (std::strcmp(e.name, op_type) == 0) return e.op;
  detail::fail(ErrorCode::kUnsupported, "GPU engine: no elementwise kernel for op '", op_type, "'");
}

bool elt_is_unary(EltOp op) { return static_cast<int>(op) < static_cast<int>(EltOp::kAdd); }

void nchw_to_nhwc(const void* src, bool in_half, void* dst, bool out_half, int n, int c, int h, int w,
                  cudaStream_t stream) {
  const int64_t total = int64_t{n} * c * h * w;
  check_count(total, "nchw_to_nhwc");
  const int t = static_cast<int>(total);
  const unsigned g = grid_for(total);
  if (in_half && out_half)
    nchw_to_nhwc_kernel<<<g, kThreads, 0, stream>>>(static_cast<const __half*>(src), static_cast<__half*>(dst), c, h * w, t);
  else if (in_half)
    nchw_to_nhwc_kernel<<<g, kThreads, 0, stream>>>(static_cast<const __half*>(src), static_cast<float*>(dst), c, h * w, t);
  else if (out_half)
    nchw_to_nhwc_kernel<<<g, kThreads, 0, stream>>>(static_cast<const float*>(src), static_cast<__half*>(dst), c, h * w, t);
  else
    nchw_to_nhwc_kernel<<<g, kThreads, 0, stream>>>(static_cast<const float*>(src), static_cast<float*>(dst), c, h * w, t);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

void nchw_to_s2d_nhwc(const void* src, bool in_half, void* dst, bool out_half, int n, int c, int h, int w, int cpad,
                      cudaStream_t stream) {
  YOLOCU_CHECK(c >= 1 && c <= kS2dMaxChannels && cpad >= 4 * c && h % 2 == 0 && w % 2 == 0, kInternal,
               "nchw_to_s2d_nhwc: ", c, " channels padded to ", cpad, ", ", h, "x", w);
  const int64_t total = int64_t{n} * (h / 2) * (w / 2);
  check_count(total * cpad, "nchw_to_s2d_nhwc");
  const int t = static_cast<int>(total);
  const unsigned g = grid_for(total);
  constexpr int M = kS2dMaxChannels;
  const bool aligned = (reinterpret_cast<uintptr_t>(src) % 4 == 0) && (reinterpret_cast<uintptr_t>(dst) % 16 == 0);
  if (in_half && out_half && c == 3 && cpad == 16 && aligned)
    nchw_to_s2d_half3x16_kernel<<<g, kThreads, 0, stream>>>(static_cast<const __half*>(src), static_cast<uint4*>(dst), h, w, t);
  else if (in_half && out_half)
    nchw_to_s2d_kernel<__half, __half, M><<<g, kThreads, 0, stream>>>(static_cast<const __half*>(src), static_cast<__half*>(dst), c, h, w, cpad, t);
  else if (in_half)
    nchw_to_s2d_kernel<__half, float, M><<<g, kThreads, 0, stream>>>(static_cast<const __half*>(src), static_cast<float*>(dst), c, h, w, cpad, t);
  else if (out_half)
    nchw_to_s2d_kernel<float, __half, M><<<g, kThreads, 0, stream>>>(static_cast<const float*>(src), static_cast<__half*>(dst), c, h, w, cpad, t);
  else
    nchw_to_s2d_kernel<float, float, M><<<g, kThreads, 0, stream>>>(static_cast<const float*>(src), static_cast<float*>(dst), c, h, w, cpad, t);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

void nhwc_to_nchw(const void* src, bool in_half, float* dst, int n, int c, int h, int w, cudaStream_t stream) {
  check_count(int64_t{n} * c * h * w, "nhwc_to_nchw");
  YOLOCU_CHECK(n <= 65535 && (h * w + 31) / 32 <= 65535, kUnsupported, "nhwc_to_nchw: grid too large");
  const dim3 grid((c + 31) / 32, (h * w + 31) / 32, n), block(32, 8);
  if (in_half)
    nhwc_to_nchw_kernel<<<grid, block, 0, stream>>>(static_cast<const __half*>(src), dst, c, h * w);
  else
    nhwc_to_nchw_kernel<<<grid, block, 0, stream>>>(static_cast<const float*>(src), dst, c, h * w);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

namespace {
template <typename T, int V>
void launch_bias_act(const void* src, void* y, int64_t pitch, const float* bias, const void* res, int64_t res_pitch,
                     int64_t pixels, int channels, bool silu, cudaStream_t stream) {
  const int64_t nvec = pixels * channels / V;
  bias_act_kernel<T, V><<<grid_for(nvec), kThreads, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(y), bias,
                                                                 static_cast<const T*>(res), static_cast<int>(nvec),
                                                                 channels / V, pitch / V, res_pitch / V, silu);
}
}  // namespace

void bias_act_nhwc_to(const void* src, void* y, int64_t pitch, const float* bias, const void* residual,
                      int64_t res_pitch, bool half, int64_t pixels, int channels, bool silu, cudaStream_t stream) {
  check_count(pixels * channels, "bias_act_nhwc");
  check_count(pixels * pitch, "bias_act_nhwc output");
  check_count(pixels * res_pitch, "bias_act_nhwc residual");
  YOLOCU_CHECK(pitch >= channels && res_pitch >= channels, kInternal, "bias_act_nhwc: pitches ", pitch, " / ",
               res_pitch, " < channels ", channels);
  // Vector width: 16-byte accesses when the channel count, the pitch and the pointers allow.
  const auto fits = [&](int v) {
    const uintptr_t bytes = static_cast<uintptr_t>(v) * (half ? 2 : 4);
    return channels % v == 0 && pitch % v == 0 && res_pitch % v == 0 && reinterpret_cast<uintptr_t>(src) % bytes == 0 &&
           reinterpret_cast<uintptr_t>(y) % bytes == 0 && reinterpret_cast<uintptr_t>(residual) % bytes == 0;
  };
  if (half) {
    if (fits(8)) launch_bias_act<__half, 8>(src, y, pitch, bias, residual, res_pitch, pixels, channels, silu, stream);
    else if (fits(2)) launch_bias_act<__half, 2>(src, y, pitch, bias, residual, res_pitch, pixels, channels, silu, stream);
    else launch_bias_act<__half, 1>(src, y, pitch, bias, residual, res_pitch, pixels, channels, silu, stream);
  } else {
    if (fits(4)) launch_bias_act<float, 4>(src, y, pitch, bias, residual, res_pitch, pixels, channels, silu, stream);
    else launch_bias_act<float, 1>(src, y, pitch, bias, residual, res_pitch, pixels, channels, silu, stream);
  }
  YOLOCU_CUDA_CHECK_LAUNCH();
}

void eltwise_flat(EltOp op, const void* a, const void* b, void* y, bool half, int64_t n, cudaStream_t stream) {
  check_count(n, "eltwise");
  if (half)
    eltwise_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, static_cast<const __half*>(a),
                                                         static_cast<const __half*>(b), static_cast<__half*>(y),
                                                         static_cast<int>(n));
  else
    eltwise_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, static_cast<const float*>(a),
                                                         static_cast<const float*>(b), static_cast<float*>(y),
                                                         static_cast<int>(n));
  YOLOCU_CUDA_CHECK_LAUNCH();
}

namespace {
template <typename U>
void launch_copy_rows(const void* src, int64_t src_pitch, void* dst, int64_t dst_pitch, int64_t rows,
                      int64_t row_bytes, cudaStream_t stream) {
  const int64_t upr = row_bytes / static_cast<int64_t>(sizeof(U));
  const int64_t total = upr * rows;
  check_count(total, "copy_rows");
  check_count(rows * (std::max(src_pitch, dst_pitch) / static_cast<int64_t>(sizeof(U))), "copy_rows extent");
  copy_rows_kernel<U><<<grid_for(total), kThreads, 0, stream>>>(
      static_cast<const U*>(src), static_cast<int>(src_pitch / static_cast<int64_t>(sizeof(U))), static_cast<U*>(dst),
      static_cast<int>(dst_pitch / static_cast<int64_t>(sizeof(U))), static_cast<int>(upr), static_cast<int>(total));
}
}  // namespace

void copy_rows(const void* src, int64_t src_pitch, void* dst, int64_t dst_pitch, int64_t rows, int64_t row_bytes,
               cudaStream_t stream) {
  if (rows <= 0 || row_bytes <= 0) return;
  const uint64_t all = static_cast<uint64_t>(src_pitch) | static_cast<uint64_t>(dst_pitch) |
                       static_cast<uint64_t>(row_bytes) | reinterpret_cast<uintptr_t>(src) |
                       reinterpret_cast<uintptr_t>(dst);
  if (all % 16 == 0) launch_copy_rows<uint4>(src, src_pitch, dst, dst_pitch, rows, row_bytes, stream);
  else if (all % 8 == 0) launch_copy_rows<uint2>(src, src_pitch, dst, dst_pitch, rows, row_bytes, stream);
  else if (all % 4 == 0) launch_copy_rows<uint32_t>(src, src_pitch, dst, dst_pitch, rows, row_bytes, stream);
  else if (all % 2 == 0) launch_copy_rows<uint16_t>(src, src_pitch, dst, dst_pitch, rows, row_bytes, stream);
  else launch_copy_rows<uint8_t>(src, src_pitch, dst, dst_pitch, rows, row_bytes, stream);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

void unary_plain(EltOp op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  eltwise_flat(op, x, nullptr, y, false, n, stream);
}

void binary_plain(EltOp op, const float* a, const float* b, float* y, const StridedParams& p, cudaStream_t stream) {
  const int64_t n = numel_of(p);
  check_count(n, "binary");
  binary_strided_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, a, b, y, p, static_cast<int>(n));
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

// ---- tuning helpers ------------------------------------------------------------------------------
namespace yolocu::cuda_kernels {
namespace {

__device__ __forceinline__ uint32_t hash32(uint32_t x) {  // lowbias32
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

template <typename T>
__global__ void fill_uniform_kernel(T* __restrict__ x, int64_t n, uint32_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t r = hash32(static_cast<uint32_t>(i) ^ hash32(seed + static_cast<uint32_t>(i >> 32)));
    x[i] = from_f<T>(lo + (hi - lo) * (static_cast<float>(r >> 8) * (1.f / 16777216.f)));
  }
}

// One thread per element (grid-stride); a block reduces in shared memory and adds once.
// a[(i / width) * a_pitch + i % width] against b[i].
template <typename T>
__global__ void compare_kernel(const T* __restrict__ a, int64_t a_pitch, const T* __restrict__ b, int64_t width,
                               int64_t n, CompareAcc* acc) {
  __shared__ double s_d[kThreads], s_r[kThreads];
  __shared__ float s_md[kThreads], s_mr[kThreads];
  __shared__ unsigned long long s_nf[kThreads];
  double d = 0, r = 0;
  float md = 0, mr = 0;
  unsigned long long nf = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float va = to_f(a[a_pitch == width ? i : (i / width) * a_pitch + i % width]), vb = to_f(b[i]);
    if (!isfinite(va) || !isfinite(vb)) {
      ++nf;
      continue;
    }
    const float e = fabsf(va - vb);
    d += static_cast<double>(e) * e;
    r += static_cast<double>(vb) * vb;
    md = fmaxf(md, e);
    mr = fmaxf(mr, fabsf(vb));
  }
  const int t = threadIdx.x;
  s_d[t] = d;
  s_r[t] = r;
  s_md[t] = md;
  s_mr[t] = mr;
  s_nf[t] = nf;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (t < step) {
      s_d[t] += s_d[t + step];
      s_r[t] += s_r[t + step];
      s_md[t] = fmaxf(s_md[t], s_md[t + step]);
      s_mr[t] = fmaxf(s_mr[t], s_mr[t + step]);
      s_nf[t] += s_nf[t + step];
    }
    __syncthreads();
  }
  if (t == 0) {
    atomicAdd(&acc->sq_diff, s_d[0]);
    atomicAdd(&acc->sq_ref, s_r[0]);
    atomicMax(&acc->max_diff_bits, __float_as_uint(s_md[0]));
    atomicMax(&acc->max_ref_bits, __float_as_uint(s_mr[0]));
    atomicAdd(&acc->non_finite, s_nf[0]);
  }
}

}  // namespace

void fill_uniform(void* x, bool half, int64_t n, uint32_t seed, float lo, float hi, cudaStream_t stream) {
  if (n <= 0) return;
  const unsigned g = grid_for(n);
  if (half) fill_uniform_kernel<<<g, kThreads, 0, stream>>>(static_cast<__half*>(x), n, seed, lo, hi);
  else fill_uniform_kernel<<<g, kThreads, 0, stream>>>(static_cast<float*>(x), n, seed, lo, hi);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

void compare_rows(const void* a, int64_t a_pitch, const void* b, int64_t width, bool half, int64_t n,
                  CompareAcc* d_acc, cudaStream_t stream) {
  if (n <= 0) return;
  YOLOCU_CHECK(width > 0 && a_pitch >= width && n % width == 0, kInternal, "compare: rows of ", width, " pitch ",
               a_pitch, " n ", n);
  const unsigned g = std::min<unsigned>(grid_for(n), 1024);
  if (half)
    compare_kernel<<<g, kThreads, 0, stream>>>(static_cast<const __half*>(a), a_pitch, static_cast<const __half*>(b),
                                               width, n, d_acc);
  else
    compare_kernel<<<g, kThreads, 0, stream>>>(static_cast<const float*>(a), a_pitch, static_cast<const float*>(b),
                                               width, n, d_acc);
  YOLOCU_CUDA_CHECK_LAUNCH();
}


}  // namespace yolocu::cuda_kernels

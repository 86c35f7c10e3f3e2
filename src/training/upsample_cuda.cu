// CUDA nearest 2x upsample, forward and backward, NCHW and NHWC.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "training/cuda_check.hpp"
#include "yolocu/training/upsample.hpp"

namespace yolocu::training {
namespace {

constexpr int kBlock = 256;
constexpr int64_t kInt32Limit = (int64_t{1} << 31) - (int64_t{1} << 20);

template <typename T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};
__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T from_acc(typename AccOf<T>::type v);
template <>
__device__ __forceinline__ float from_acc<float>(float v) { return v; }
template <>
__device__ __forceinline__ double from_acc<double>(double v) { return v; }
template <>
__device__ __forceinline__ __half from_acc<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// kBytes (16, 8 or 4) bytes of T, moved with one 128/64/32-bit load or store.
template <int kBytes>
struct RawOf;
template <>
struct RawOf<16> {
  using type = uint4;
};
template <>
struct RawOf<8> {
  using type = uint2;
};
template <>
struct RawOf<4> {
  using type = unsigned int;
};

template <typename T, int kBytes>
union Vec {
  static constexpr int kN = kBytes / static_cast<int>(sizeof(T));
  typename RawOf<kBytes>::type raw;
  T v[kN];
};

template <typename T, int kBytes>
__device__ __forceinline__ Vec<T, kBytes> load_vec(const T* p) {
  Vec<T, kBytes> r;
  r.raw = *reinterpret_cast<const typename RawOf<kBytes>::type*>(p);
  return r;
}
template <typename T, int kBytes>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, kBytes>& r) {
  *reinterpret_cast<typename RawOf<kBytes>::type*>(p) = r.raw;
}

// Scalar fallback, both layouts, any alignment. The tensor is viewed as rows x width x inner
// (NCHW: N*C*H x W x 1, NHWC: N*H x W x C). One thread per input element i: it splits i into
// (row, w, c) with two divisions and writes the 4 output copies (forward), or gathers the 4
// dy values and writes dx[i] once (backward).
template <typename T, typename I>
__global__ void upsample2x_fwd_scalar(const T* __restrict__ x, T* __restrict__ y, I total, I width,
                                      I inner) {
  const I i = static_cast<I>(blockIdx.x) * kBlock + static_cast<I>(threadIdx.x);
  if (i >= total) return;
  const I q = i / inner, c = i - q * inner;
  const I row = q / width, w = q - row * width;
  const I out_row = 2 * width * inner;
  const T v = x[i];
  T* o = y + 2 * row * out_row + 2 * w * inner + c;
  o[0] = v;
  o[inner] = v;
  o[out_row] = v;
  o[out_row + inner] = v;
}

template <typename T, typename I>
__global__ void upsample2x_bwd_scalar(const T* __restrict__ dy, T* __restrict__ dx, I total, I width,
                                      I inner) {
  const I i = static_cast<I>(blockIdx.x) * kBlock + static_cast<I>(threadIdx.x);
  if (i >= total) return;
  const I q = i / inner, c = i - q * inner;
  const I row = q / width, w = q - row * width;
  const I out_row = 2 * width * inner;
  const T* g = dy + 2 * row * out_row + 2 * w * inner + c;
  typename AccOf<T>::type s = to_acc(g[0]);
  s += to_acc(g[inner]);
  s += to_acc(g[out_row]);
  s += to_acc(g[out_row + inner]);
  dx[i] = from_acc<T>(s);
}

// NCHW, W % N == 0 (N = kBytes/sizeof(T) >= 2; kBytes = 16 where W allows, else 8 or 4). One
// thread per OUTPUT vector of an even output row: thread j reads input vector i = j / 2 of
// x[row, ...] (the two threads of a pair read the same 16 bytes, one L1 transaction), duplicates
// the half j % 2 of it into N outputs and stores them on output rows 2*row and 2*row+1, so that
// each store instruction of a warp writes one contiguous 512-byte span.
template <typename T, int kBytes, typename I>
__global__ void upsample2x_fwd_nchw_vec(const T* __restrict__ x, T* __restrict__ y, I total_vec,
                                        I width_vec) {
  constexpr int kN = Vec<T, kBytes>::kN;
  const I j = static_cast<I>(blockIdx.x) * kBlock + static_cast<I>(threadIdx.x);
  if (j >= 2 * total_vec) return;
  const I i = j >> 1;
  const int half = static_cast<int>(j & 1);
  const I row = i / width_vec, k = i - row * width_vec;
  const Vec<T, kBytes> in = load_vec<T, kBytes>(x + static_cast<I>(i) * kN);
  Vec<T, kBytes> out;
#pragma unroll
  for (int q = 0; q < kN / 2; ++q) {
    out.v[2 * q] = in.v[half * (kN / 2) + q];
    out.v[2 * q + 1] = in.v[half * (kN / 2) + q];
  }
  const I out_w = 2 * width_vec * kN;
  T* o = y + 2 * row * out_w + (2 * k + half) * kN;
  store_vec<T, kBytes>(o, out);
  store_vec<T, kBytes>(o + out_w, out);
}

// NCHW backward, W % N == 0. One thread per kBytes dx vector (row, k): it loads the 2N dy values
// of output row 2*row and of row 2*row+1 (four vector loads), sums each 2x2 window in the
// accumulation type in PyTorch's order, and stores N dx values with one vector store.
template <typename T, int kBytes, typename I>
__global__ void upsample2x_bwd_nchw_vec(const T* __restrict__ dy, T* __restrict__ dx, I total_vec,
                                        I width_vec) {
  constexpr int kN = Vec<T, kBytes>::kN;
  const I i = static_cast<I>(blockIdx.x) * kBlock + static_cast<I>(threadIdx.x);
  if (i >= total_vec) return;
  const I row = i / width_vec, k = i - row * width_vec;
  const I out_w = 2 * width_vec * kN;
  const T* g = dy + 2 * row * out_w + 2 * k * kN;
  const Vec<T, kBytes> a0 = load_vec<T, kBytes>(g), a1 = load_vec<T, kBytes>(g + kN);
  const Vec<T, kBytes> b0 = load_vec<T, kBytes>(g + out_w), b1 = load_vec<T, kBytes>(g + out_w + kN);
  Vec<T, kBytes> out;
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    const Vec<T, kBytes>& a = j < kN / 2 ? a0 : a1;
    const Vec<T, kBytes>& b = j < kN / 2 ? b0 : b1;
    const int jj = 2 * (j % (kN / 2));
    typename AccOf<T>::type s = to_acc(a.v[jj]);
    s += to_acc(a.v[jj + 1]);
    s += to_acc(b.v[jj]);
    s += to_acc(b.v[jj + 1]);
    out.v[j] = from_acc<T>(s);
  }
  store_vec<T, kBytes>(dx + static_cast<I>(i) * kN, out);
}

// NHWC (channels_last), C % N == 0. One thread per kBytes input vector: vector i holds channels
// [N*k, N*k+N) of pixel p = i / (C/N), p = row*W + w. Forward copies it to the 4 output pixels
// (2row+{0,1}, 2w+{0,1}); backward sums the 4 pixels' vectors and stores one dx vector.
template <typename T, int kBytes, typename I>
__global__ void upsample2x_fwd_nhwc_vec(const T* __restrict__ x, T* __restrict__ y, I total_vec,
                                        I width, I channels_vec) {
  constexpr int kN = Vec<T, kBytes>::kN;
  const I i = static_cast<I>(blockIdx.x) * kBlock + static_cast<I>(threadIdx.x);
  if (i >= total_vec) return;
  const I p = i / channels_vec, k = i - p * channels_vec;
  const I row = p / width, w = p - row * width;
  const I c = channels_vec * kN;
  const Vec<T, kBytes> v = load_vec<T, kBytes>(x + static_cast<I>(i) * kN);
  T* o = y + (2 * row * (2 * width) + 2 * w) * c + k * kN;
  store_vec<T, kBytes>(o, v);
  store_vec<T, kBytes>(o + c, v);
  store_vec<T, kBytes>(o + 2 * width * c, v);
  store_vec<T, kBytes>(o + 2 * width * c + c, v);
}

template <typename T, int kBytes, typename I>
__global__ void upsample2x_bwd_nhwc_vec(const T* __restrict__ dy, T* __restrict__ dx, I total_vec,
                                        I width, I channels_vec) {
  constexpr int kN = Vec<T, kBytes>::kN;
  const I i = static_cast<I>(blockIdx.x) * kBlock + static_cast<I>(threadIdx.x);
  if (i >= total_vec) return;
  const I p = i / channels_vec, k = i - p * channels_vec;
  const I row = p / width, w = p - row * width;
  const I c = channels_vec * kN;
  const T* g = dy + (2 * row * (2 * width) + 2 * w) * c + k * kN;
  const Vec<T, kBytes> a = load_vec<T, kBytes>(g), b = load_vec<T, kBytes>(g + c), e = load_vec<T, kBytes>(g + 2 * width * c),
                 f = load_vec<T, kBytes>(g + 2 * width * c + c);
  Vec<T, kBytes> out;
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    typename AccOf<T>::type s = to_acc(a.v[j]);
    s += to_acc(b.v[j]);
    s += to_acc(e.v[j]);
    s += to_acc(f.v[j]);
    out.v[j] = from_acc<T>(s);
  }
  store_vec<T, kBytes>(dx + static_cast<I>(i) * kN, out);
}

unsigned grid_for(int64_t threads) { return static_cast<unsigned>((threads + kBlock - 1) / kBlock); }

bool aligned(const void* p, int bytes) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; }

// Launches the vector kernel with kBytes-wide accesses if the innermost dense dim and both
// pointers allow it; returns false otherwise.
template <typename T, int kBytes, typename I>
bool try_vec(bool forward, const T* in, T* out, bool nchw, I rows, I width, I inner, cudaStream_t stream) {
  constexpr int kN = kBytes / static_cast<int>(sizeof(T));
  if constexpr (kN < 1) {
    return false;
  } else {
    if (!aligned(in, kBytes) || !aligned(out, kBytes) || (nchw ? width % kN : inner % kN) != 0) return false;
    const I total_vec = rows * width * inner / kN;
    const unsigned grid = grid_for(total_vec);
    if (nchw) {
      if constexpr (kN < 2) {
        return false;  // NCHW vectors must hold at least the two halves of an output pair
      } else {
        if (forward)
          upsample2x_fwd_nchw_vec<T, kBytes, I>
              <<<grid_for(2 * static_cast<int64_t>(total_vec)), kBlock, 0, stream>>>(in, out, total_vec, width / kN);
        else
          upsample2x_bwd_nchw_vec<T, kBytes, I><<<grid, kBlock, 0, stream>>>(in, out, total_vec, width / kN);
      }
    } else if (forward) {
      upsample2x_fwd_nhwc_vec<T, kBytes, I><<<grid, kBlock, 0, stream>>>(in, out, total_vec, width, inner / kN);
    } else {
      upsample2x_bwd_nhwc_vec<T, kBytes, I><<<grid, kBlock, 0, stream>>>(in, out, total_vec, width, inner / kN);
    }
    return true;
  }
}

template <typename T, typename I>
void launch(bool forward, const T* in, T* out, const Upsample2xShape& s, cudaStream_t stream) {
  const bool nchw = s.layout == Layout::kNCHW;
  const I rows = static_cast<I>(nchw ? s.n * s.c * s.h : s.n * s.h);
  const I width = static_cast<I>(s.w);
  const I inner = static_cast<I>(nchw ? 1 : s.c);
  if (!try_vec<T, 16, I>(forward, in, out, nchw, rows, width, inner, stream) &&
      !try_vec<T, 8, I>(forward, in, out, nchw, rows, width, inner, stream) &&
      !try_vec<T, 4, I>(forward, in, out, nchw, rows, width, inner, stream)) {
    const I total = rows * width * inner;
    if (forward)
      upsample2x_fwd_scalar<T, I><<<grid_for(total), kBlock, 0, stream>>>(in, out, total, width, inner);
    else
      upsample2x_bwd_scalar<T, I><<<grid_for(total), kBlock, 0, stream>>>(in, out, total, width, inner);
  }
  YOLOCU_TRAIN_CHECK_LAUNCH();
}

template <typename T>
void run(bool forward, const void* in, void* out, const Upsample2xShape& s, cudaStream_t stream) {
  YOLOCU_CHECK(s.n >= 0 && s.c >= 0 && s.h >= 0 && s.w >= 0, kInvalidArgument,
               "upsample2x: negative dimension in (", s.n, ", ", s.c, ", ", s.h, ", ", s.w, ")");
  const int64_t numel = s.input_numel();
  if (numel == 0) return;
  YOLOCU_CHECK(in != nullptr && out != nullptr, kInvalidArgument, "upsample2x: null pointer");
  if (4 * numel < kInt32Limit)
    launch<T, int32_t>(forward, static_cast<const T*>(in), static_cast<T*>(out), s, stream);
  else
    launch<T, int64_t>(forward, static_cast<const T*>(in), static_cast<T*>(out), s, stream);
}

void dispatch(bool forward, FloatType type, const void* in, void* out, const Upsample2xShape& s,
              cudaStream_t stream) {
  switch (type) {
    case FloatType::kFloat32: return run<float>(forward, in, out, s, stream);
    case FloatType::kFloat64: return run<double>(forward, in, out, s, stream);
    case FloatType::kFloat16: return run<__half>(forward, in, out, s, stream);
    case FloatType::kBFloat16: return run<__nv_bfloat16>(forward, in, out, s, stream);
  }
  ::yolocu::detail::fail(ErrorCode::kUnsupported, "upsample2x: unknown float type");
}

}  // namespace

void upsample2x_forward_cuda(FloatType type, const void* d_x, void* d_y, const Upsample2xShape& shape,
                             cudaStream_t stream) {
  dispatch(true, type, d_x, d_y, shape, stream);
}

void upsample2x_backward_cuda(FloatType type, const void* d_dy, void* d_dx, const Upsample2xShape& shape,
                              cudaStream_t stream) {
  dispatch(false, type, d_dy, d_dx, shape, stream);
}

}  // namespace yolocu::training

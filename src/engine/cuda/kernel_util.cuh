// Small helpers shared by the GPU engine's kernel files: the element-type conversions (arithmetic is
// float32 inside every kernel; fp16 is only a storage format: core/cuda_half.cuh), V elements as one
// aligned vector access, the max that max pooling takes, the 32-bit index limit check, the block
// size and grid of the grid-stride kernels, and the vector width NHWC kernels take.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/check.hpp"
#include "core/cuda_half.cuh"

namespace yolocu::cuda_kernels::kutil {

using cuda_half::from_f;
using cuda_half::to_f;

// V consecutive elements, loaded and stored as one access of V * sizeof(T) bytes.
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// max(m, f) as ONNX MaxPool takes it (the CPU reference's): a NaN tap makes the result NaN.
__device__ __forceinline__ float max_nan(float m, float f) { return (f > m || isnan(f)) ? f : m; }

// Butterfly reductions over a full warp: every lane gets the result.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Kernels index with 32-bit ints: a launcher checks its counts with this first.
inline void check_count(int64_t n, const char* what) {
  YOLOCU_CHECK(n >= 0 && n < (int64_t{1} << 31), kUnsupported, what, ": ", n, " elements (limit 2^31)");
}

// Threads per block of the grid-stride kernels, and their grid for n elements (at most 2^20 blocks).
constexpr int kThreads = 256;
inline unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > (int64_t{1} << 20) ? (int64_t{1} << 20) : b));
}

// The widest vector (elements of `elem` bytes, at most 16 bytes) that divides c and keeps both
// pointers aligned.
inline int vector_width(int c, size_t elem, const void* a, const void* b) {
  for (int v = static_cast<int>(16 / elem); v > 1; v /= 2) {
    const uintptr_t bytes = static_cast<uintptr_t>(v) * elem;
    if (c % v == 0 && reinterpret_cast<uintptr_t>(a) % bytes == 0 && reinterpret_cast<uintptr_t>(b) % bytes == 0)
      return v;
  }
  return 1;
}

}  // namespace yolocu::cuda_kernels::kutil

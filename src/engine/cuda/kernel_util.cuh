// Small helpers shared by the GPU engine's kernel files: the element-type conversions (arithmetic is
// float32 inside every kernel; fp16 is only a storage format: core/cuda_half.cuh), V elements as one
// aligned vector access, the max that max pooling takes, and the 32-bit index limit check.
#pragma once

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

// Kernels index with 32-bit ints: a launcher checks its counts with this first.
inline void check_count(int64_t n, const char* what) {
  YOLOCU_CHECK(n >= 0 && n < (int64_t{1} << 31), kUnsupported, what, ": ", n, " elements (limit 2^31)");
}

}  // namespace yolocu::cuda_kernels::kutil

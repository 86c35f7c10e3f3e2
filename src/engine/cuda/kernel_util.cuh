// Small helpers shared by the GPU engine's kernel files: the element-type conversions (arithmetic is
// float32 inside every kernel; fp16 is only a storage format) and the 32-bit index limit check.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "core/check.hpp"

namespace yolocu::cuda_kernels::kutil {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

// Kernels index with 32-bit ints: a launcher checks its counts with this first.
inline void check_count(int64_t n, const char* what) {
  YOLOCU_CHECK(n >= 0 && n < (int64_t{1} << 31), kUnsupported, what, ": ", n, " elements (limit 2^31)");
}

}  // namespace yolocu::cuda_kernels::kutil

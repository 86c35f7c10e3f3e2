// fp16 / fp32 element conversions for device code: kernels compute in float32 and store in the
// buffer's type (fp16 only as a storage format), rounding to nearest even. Shared by the engine's
// and the letterbox's kernels.
#pragma once

#include <cuda_fp16.h>

namespace yolocu::cuda_half {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

}  // namespace yolocu::cuda_half

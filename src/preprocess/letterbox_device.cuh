// Device helpers shared by the letterbox kernels (letterbox_cuda.cu: host-staged BGR;
// letterbox_image_cuda.cu: BGR / RGB / NV12 device images): the output conversion.
#pragma once

#include <cuda_fp16.h>

namespace yolocu::letterbox_device {

template <typename T>
__device__ __forceinline__ T to_out(float v);
template <>
__device__ __forceinline__ float to_out<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half to_out<__half>(float v) { return __float2half_rn(v); }

// value / 255 in float32, correctly rounded like the CPU (and PyTorch's `im /= 255`).
__device__ __forceinline__ float unit(int v) { return __fdiv_rn(static_cast<float>(v), 255.f); }

}  // namespace yolocu::letterbox_device

// Device helpers shared by the letterbox kernels (letterbox_cuda.cu: host-staged BGR;
// letterbox_image_cuda.cu: BGR / RGB / NV12 device images); the output conversion is
// core/cuda_half.cuh's from_f.
#pragma once

#include <cuda_fp16.h>

#include "core/cuda_half.cuh"

namespace yolocu::letterbox_device {

// value / 255 in float32, correctly rounded like the CPU (and PyTorch's `im /= 255`).
__device__ __forceinline__ float unit(int v) { return __fdiv_rn(static_cast<float>(v), 255.f); }

}  // namespace yolocu::letterbox_device

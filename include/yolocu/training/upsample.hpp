// yolocu/training/upsample.hpp - nearest-neighbour 2x upsampling (nn.Upsample(scale_factor=2,
// mode="nearest")), forward and backward, for NCHW and channels_last (NHWC) dense tensors.
//
// Forward:  y[n, c, 2h+i, 2w+j] = x[n, c, h, w] for i, j in {0, 1}; y has shape (N, C, 2H, 2W).
// Backward: dx[n, c, h, w] = ((dy[2h,2w] + dy[2h,2w+1]) + dy[2h+1,2w]) + dy[2h+1,2w+1], summed in
//           float (double for kFloat64) in this order and rounded once, as PyTorch does.
// Every output element is written exactly once: no atomics, no memset, deterministic.
// Layout kNCHW means x is dense in (N, C, H, W) order; kNHWC means dense in (N, H, W, C) order
// (PyTorch's channels_last); y / dy use the same layout as x / dx.
#pragma once

#include <cstdint>

#include "yolocu/training/common.hpp"

namespace yolocu::training {

enum class Layout : int32_t { kNCHW, kNHWC };

// Shape of the *input-resolution* tensor (x or dx). All dims must be >= 0.
struct Upsample2xShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  Layout layout = Layout::kNCHW;
  int64_t input_numel() const { return n * c * h * w; }
};

// CPU references (host pointers). Throw yolocu::Error(kInvalidArgument) on a bad shape.
void upsample2x_forward_cpu(FloatType type, const void* x, void* y, const Upsample2xShape& shape);
void upsample2x_backward_cpu(FloatType type, const void* dy, void* dx, const Upsample2xShape& shape);

// CUDA kernels (device pointers), enqueued on `stream`, no synchronisation. 16-byte vector
// accesses when the innermost dense dim (W for NCHW, C for NHWC) is a multiple of 16/sizeof(T) and
// both pointers are 16-byte aligned; a scalar kernel otherwise. int32 index math when the output
// has fewer than 2^31 - 2^20 elements, int64 otherwise.
void upsample2x_forward_cuda(FloatType type, const void* d_x, void* d_y, const Upsample2xShape& shape,
                             cudaStream_t stream);
void upsample2x_backward_cuda(FloatType type, const void* d_dy, void* d_dx, const Upsample2xShape& shape,
                              cudaStream_t stream);

}  // namespace yolocu::training

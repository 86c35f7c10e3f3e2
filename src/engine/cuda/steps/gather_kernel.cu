// The kernel of the Gather step (steps/gather.cpp): Transpose / Slice / Split of plain float32 values
// as one strided gather: one thread per output element in row-major order; the coordinate is
// decomposed from the last axis and dotted with the input's strides.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/kernel_util.cuh"

namespace yolocu::cuda_kernels {

namespace {

using kutil::check_count;
using kutil::grid_for;
using kutil::kThreads;

__global__ void gather_strided_kernel(const float* __restrict__ x, float* __restrict__ y, StridedParams p,
                                      int total) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int rem = i;
    int64_t o = p.a_base;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int dim = static_cast<int>(p.out_dims[d]);
      const int q = rem / dim, coord = rem - q * dim;
      rem = q;
      o += coord * p.a_strides[d];
    }
    y[i] = x[o];
  }
}

}  // namespace

void gather_plain(const float* x, float* y, const StridedParams& p, cudaStream_t stream) {
  const int64_t n = numel_of(p);
  check_count(n, "gather");
  gather_strided_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, p, static_cast<int>(n));
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

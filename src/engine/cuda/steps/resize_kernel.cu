// The kernel of the Resize step (steps/resize.cpp): nearest resizing of NHWC values.
#include <cuda_fp16.h>
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
using kutil::vector_width;
using kutil::Vec;

// Nearest resize on NHWC: one thread per V consecutive channels of one output pixel (a 16-byte
// copy when the channels allow); source row/column from the precomputed tables (exactly the CPU
// reference's indices).
template <typename T, int V>
__global__ void resize_kernel(const T* __restrict__ x, int x_pitch, T* __restrict__ y, int h, int w, int c, int oh,
                              int ow, int y_pitch, const int* __restrict__ sy, const int* __restrict__ sx, int total) {
  using Vt = Vec<T, V>;
  const int cv = c / V, pv = y_pitch / V, pxv = x_pitch / V;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int cvi = i % cv;
    int t = i / cv;
    const int pix = t;
    const int ox = t % ow;
    t /= ow;
    const int oy = t % oh;
    const int n = t / oh;
    reinterpret_cast<Vt*>(y)[int64_t{pix} * pv + cvi] =
        reinterpret_cast<const Vt*>(x)[int64_t{(n * h + sy[oy]) * w + sx[ox]} * pxv + cvi];
  }
}

template <typename T, int V>
void launch_resize(const void* x, int x_pitch, void* y, int n, int h, int w, int c, int oh, int ow, int y_pitch,
                   const int* sy, const int* sx, cudaStream_t stream) {
  const int total = n * oh * ow * (c / V);
  resize_kernel<T, V><<<grid_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), x_pitch, static_cast<T*>(y), h,
                                                                w, c, oh, ow, y_pitch, sy, sx, total);
}

}  // namespace

void resize_nearest_nhwc(const void* x, int x_pitch, void* y, bool half, int n, int h, int w, int c, int oh, int ow,
                         int y_pitch, const int* src_y, const int* src_x, cudaStream_t stream) {
  YOLOCU_CHECK(y_pitch >= c && x_pitch >= c, kInternal, "resize: pitches ", x_pitch, " / ", y_pitch, " < channels ", c);
  check_count(int64_t{n} * oh * ow * y_pitch, "resize");
  check_count(int64_t{n} * h * w * x_pitch, "resize input");
  int v = vector_width(c, half ? 2 : 4, x, y);
  while (y_pitch % v != 0 || x_pitch % v != 0) v /= 2;
  if (half) {
    if (v == 8) launch_resize<__half, 8>(x, x_pitch, y, n, h, w, c, oh, ow, y_pitch, src_y, src_x, stream);
    else if (v == 4) launch_resize<__half, 4>(x, x_pitch, y, n, h, w, c, oh, ow, y_pitch, src_y, src_x, stream);
    else if (v == 2) launch_resize<__half, 2>(x, x_pitch, y, n, h, w, c, oh, ow, y_pitch, src_y, src_x, stream);
    else launch_resize<__half, 1>(x, x_pitch, y, n, h, w, c, oh, ow, y_pitch, src_y, src_x, stream);
  } else {
    if (v == 4) launch_resize<float, 4>(x, x_pitch, y, n, h, w, c, oh, ow, y_pitch, src_y, src_x, stream);
    else if (v == 2) launch_resize<float, 2>(x, x_pitch, y, n, h, w, c, oh, ow, y_pitch, src_y, src_x, stream);
    else launch_resize<float, 1>(x, x_pitch, y, n, h, w, c, oh, ow, y_pitch, src_y, src_x, stream);
  }
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

// The kernel of the MaxPool step (steps/maxpool.cpp): 2-D max pooling on NHWC values.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/kernel_util.cuh"

namespace yolocu::cuda_kernels {

namespace {

using kutil::check_count;
using kutil::from_f;
using kutil::grid_for;
using kutil::kThreads;
using kutil::max_nan;
using kutil::to_f;
using kutil::vector_width;
using kutil::Vec;

// Max pooling on NHWC: one thread per V consecutive channels of one output pixel (V = 8 fp16 or
// 4 fp32 when the channels allow: one 16-byte load per window tap, coalesced across threads);
// NaN propagates like the CPU reference; padding taps are skipped. 32-bit indices (checked).
template <typename T, int V>
__global__ void maxpool_kernel(const T* __restrict__ x, T* __restrict__ y, PoolParams p, int total) {
  using Vt = Vec<T, V>;
  const int cv = p.c / V;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int cvi = i % cv;
    int t = i / cv;
    const int ox = t % p.ow;
    t /= p.ow;
    const int oy = t % p.oh;
    const int n = t / p.oh;
    const int y0 = max(0, oy * p.sh - p.ph), y1 = min(p.h, oy * p.sh - p.ph + p.kh);
    const int x0 = max(0, ox * p.sw - p.pw), x1 = min(p.w, ox * p.sw - p.pw + p.kw);
    float m[V];
#pragma unroll
    for (int k = 0; k < V; ++k) m[k] = -INFINITY;
    for (int yy = y0; yy < y1; ++yy)
      for (int xx = x0; xx < x1; ++xx) {
        const Vt v = reinterpret_cast<const Vt*>(x)[((n * p.h + yy) * p.w + xx) * cv + cvi];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float f = to_f(v.v[k]);
          m[k] = max_nan(m[k], f);
        }
      }
    Vt o;
#pragma unroll
    for (int k = 0; k < V; ++k) o.v[k] = from_f<T>(m[k]);
    reinterpret_cast<Vt*>(y)[i] = o;
  }
}

template <typename T, int V>
void launch_maxpool(const void* x, void* y, const PoolParams& p, cudaStream_t stream) {
  const int total = p.n * p.oh * p.ow * (p.c / V);
  maxpool_kernel<T, V><<<grid_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), p, total);
}

}  // namespace

void maxpool_nhwc(const void* x, void* y, bool half, const PoolParams& p, cudaStream_t stream) {
  check_count(int64_t{p.n} * p.oh * p.ow * p.c, "maxpool");
  check_count(int64_t{p.n} * p.h * p.w * p.c, "maxpool input");
  const int v = vector_width(p.c, half ? 2 : 4, x, y);
  if (half) {
    if (v == 8) launch_maxpool<__half, 8>(x, y, p, stream);
    else if (v == 4) launch_maxpool<__half, 4>(x, y, p, stream);
    else if (v == 2) launch_maxpool<__half, 2>(x, y, p, stream);
    else launch_maxpool<__half, 1>(x, y, p, stream);
  } else {
    if (v == 4) launch_maxpool<float, 4>(x, y, p, stream);
    else if (v == 2) launch_maxpool<float, 2>(x, y, p, stream);
    else launch_maxpool<float, 1>(x, y, p, stream);
  }
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

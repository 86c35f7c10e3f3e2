// SPPF (YOLOv5's and YOLOv8's "spatial pyramid pooling, fast") as one kernel: y = Concat(x, p1, p2,
// p3) on channels, p1 = MaxPool_k(x), p2 = MaxPool_k(p1), p3 = MaxPool_k(p2), stride 1, padding
// k / 2, NHWC. Chained max pools whose padding taps are skipped are max pools of radius r, 2r, 3r
// (r = k / 2) over the in-bounds pixels: a pixel within 2r of p is reached through one within r of
// both, and that one lies between them, so inside the image. Max is exact, so the values are
// bit-identical to the three pools' (NaN propagates as there).
//
// Block = one image, a group of g channels: the group's h x w x g values go to shared memory once
// (and to y's first slice); each radius is a row pass into a second buffer, then a column pass into
// y's slice. Replaces three MaxPool launches, each re-reading its input per window tap, and the
// Concat's copies of x, p1 and p2 (p1 and p2 have two readers, so no producer writes them in place).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/gpu_steps.hpp"
#include "engine/cuda/kernel_util.cuh"

namespace yolocu::cuda_kernels {

namespace {

using kutil::from_f;
using kutil::to_f;

__device__ __forceinline__ float max_nan(float m, float f) { return (f > m || isnan(f)) ? f : m; }

template <typename T>
__global__ void __launch_bounds__(256) sppf_kernel(const T* __restrict__ x, T* __restrict__ y, int h, int w, int c,
                                                   int x_pitch, int y_pitch, int r, int g) {
  extern __shared__ uint4 sppf_smem[];
  const int hw = h * w, total = hw * g;
  T* a = reinterpret_cast<T*>(sppf_smem);
  T* b = a + total;
  const int n = static_cast<int>(blockIdx.y), c0 = static_cast<int>(blockIdx.x) * g;
  const int gc = min(g, c - c0);
  const T* __restrict__ xs = x + static_cast<int64_t>(n) * hw * x_pitch + c0;
  T* __restrict__ ys = y + static_cast<int64_t>(n) * hw * y_pitch + c0;
  for (int i = threadIdx.x; i < total; i += blockDim.x) {
    const int p = i / g, j = i - p * g;
    if (j >= gc) continue;
    const T v = xs[p * x_pitch + j];
    a[i] = v;
    ys[p * y_pitch + j] = v;
  }
  __syncthreads();
  for (int s = 1; s <= 3; ++s) {
    const int rad = s * r;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {  // rows: b = max over [x - rad, x + rad]
      const int p = i / g, j = i - p * g;
      if (j >= gc) continue;
      const int py = p / w, px = p - py * w;
      const int lo = max(0, px - rad), hi = min(w - 1, px + rad);
      const T* row = a + py * w * g + j;
      float m = -INFINITY;
      for (int q = lo; q <= hi; ++q) m = max_nan(m, to_f(row[q * g]));
      b[i] = from_f<T>(m);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < total; i += blockDim.x) {  // columns: y's slice s
      const int p = i / g, j = i - p * g;
      if (j >= gc) continue;
      const int py = p / w, px = p - py * w;
      const int lo = max(0, py - rad), hi = min(h - 1, py + rad);
      const T* col = b + px * g + j;
      float m = -INFINITY;
      for (int q = lo; q <= hi; ++q) m = max_nan(m, to_f(col[q * w * g]));
      ys[p * y_pitch + s * c + j] = from_f<T>(m);
    }
    __syncthreads();  // b is the next radius's
  }
}

}  // namespace

void sppf_nhwc(const void* x, void* y, bool half, int n, int h, int w, int c, int x_pitch, int y_pitch, int k,
               cudaStream_t stream) {
  YOLOCU_CHECK(k >= 1 && k % 2 == 1 && x_pitch >= c && y_pitch >= 4 * c, kInternal, "sppf: kernel ", k, ", pitch ", y_pitch, " for ",
               c, " channels");
  const size_t elem = half ? 2 : 4;
  const int g = engine::sppf_channel_group(h, w, elem);
  YOLOCU_CHECK(g > 0, kInternal, "sppf: a ", h, "x", w, " map does not fit shared memory (the plan checks this)");
  kutil::check_count(int64_t{n} * h * w * std::max(x_pitch, y_pitch), "sppf");
  const dim3 grid(static_cast<unsigned>((c + g - 1) / g), static_cast<unsigned>(n));
  const size_t smem = 2 * static_cast<size_t>(h) * static_cast<size_t>(w) * static_cast<size_t>(g) * elem;
  if (half)
    sppf_kernel<__half><<<grid, 256, smem, stream>>>(static_cast<const __half*>(x), static_cast<__half*>(y), h, w, c,
                                                     x_pitch, y_pitch, k / 2, g);
  else
    sppf_kernel<float><<<grid, 256, smem, stream>>>(static_cast<const float*>(x), static_cast<float*>(y), h, w, c,
                                                    x_pitch, y_pitch, k / 2, g);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

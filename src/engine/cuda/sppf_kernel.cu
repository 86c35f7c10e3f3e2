// SPPF (YOLOv5's and YOLOv8's "spatial pyramid pooling, fast") as one kernel: y = Concat(x, p1, p2,
// p3) on channels, p1 = MaxPool_k(x), p2 = MaxPool_k(p1), p3 = MaxPool_k(p2), stride 1, padding
// k / 2, NHWC. Chained max pools whose padding taps are skipped are max pools of radius r, 2r, 3r
// (r = k / 2) over the in-bounds pixels: a pixel within 2r of p is reached through one within r of
// both, and that one lies between them, so inside the image. Max is exact, so the values are
// bit-identical to the three pools' (NaN propagates as there).
//
// Block = one image and one 16-byte vector of channels (8 fp16 / 4 fp32; one channel when the
// channels or pitches do not allow vectors); thread = one pixel at a time. The map goes to shared
// memory once (and to y's first slice); one row sweep of radius 3r keeps the three nested row maxima
// (radius r, 2r, 3r), then each column sweep writes one slice of y. The vector gives every tap
// 8 (4) independent maxima: a block per channel group of 16 with a scalar thread per element, one
// radius at a time, was bound by the latency of its dependent chains.
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
using kutil::max_nan;
using kutil::to_f;
using kutil::Vec;

template <typename T, int V>
__global__ void __launch_bounds__(1024) sppf_kernel(const T* __restrict__ x, T* __restrict__ y, int h, int w, int c,
                                                    int x_pitch, int y_pitch, int r) {
  using P = Vec<T, V>;
  extern __shared__ uint4 sppf_smem[];
  const int hw = h * w;
  P* a = reinterpret_cast<P*>(sppf_smem);
  P* rows[3] = {a + hw, a + 2 * hw, a + 3 * hw};  // row maxima of radius r, 2r, 3r
  const int n = static_cast<int>(blockIdx.y), c0 = static_cast<int>(blockIdx.x) * V;
  const T* __restrict__ xs = x + static_cast<int64_t>(n) * hw * x_pitch + c0;
  T* __restrict__ ys = y + static_cast<int64_t>(n) * hw * y_pitch + c0;
  for (int p = threadIdx.x; p < hw; p += blockDim.x) {
    const P v = *reinterpret_cast<const P*>(xs + static_cast<int64_t>(p) * x_pitch);
    a[p] = v;
    *reinterpret_cast<P*>(ys + static_cast<int64_t>(p) * y_pitch) = v;
  }
  __syncthreads();
  for (int p = threadIdx.x; p < hw; p += blockDim.x) {
    const int py = p / w, px = p - py * w;
    float m[3][V];
#pragma unroll
    for (int s = 0; s < 3; ++s)
#pragma unroll
      for (int k = 0; k < V; ++k) m[s][k] = -INFINITY;
    const int lo = max(0, px - 3 * r), hi = min(w - 1, px + 3 * r);
    for (int qx = lo; qx <= hi; ++qx) {
      const P v = a[py * w + qx];
      const int d = abs(qx - px);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float f = to_f(v.v[k]);
        m[2][k] = max_nan(m[2][k], f);
        if (d <= 2 * r) m[1][k] = max_nan(m[1][k], f);
        if (d <= r) m[0][k] = max_nan(m[0][k], f);
      }
    }
#pragma unroll
    for (int s = 0; s < 3; ++s) {
      P o;
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = from_f<T>(m[s][k]);
      rows[s][p] = o;
    }
  }
  __syncthreads();
  for (int p = threadIdx.x; p < hw; p += blockDim.x) {
    const int py = p / w, px = p - py * w;
#pragma unroll
    for (int s = 0; s < 3; ++s) {
      const int rad = (s + 1) * r;
      float m[V];
#pragma unroll
      for (int k = 0; k < V; ++k) m[k] = -INFINITY;
      const int lo = max(0, py - rad), hi = min(h - 1, py + rad);
      for (int qy = lo; qy <= hi; ++qy) {
        const P v = rows[s][qy * w + px];
#pragma unroll
        for (int k = 0; k < V; ++k) m[k] = max_nan(m[k], to_f(v.v[k]));
      }
      P o;
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = from_f<T>(m[k]);
      *reinterpret_cast<P*>(ys + static_cast<int64_t>(p) * y_pitch + (s + 1) * c) = o;
    }
  }
}

template <typename T, int V>
void launch_sppf(const void* x, void* y, int n, int h, int w, int c, int x_pitch, int y_pitch, int r,
                 cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(c / V), static_cast<unsigned>(n));
  const int threads = std::min(1024, (h * w + 31) / 32 * 32);
  const size_t smem = engine::kSppfPlanes * static_cast<size_t>(h) * static_cast<size_t>(w) * sizeof(Vec<T, V>);
  sppf_kernel<T, V><<<grid, threads, smem, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), h, w, c, x_pitch,
                                                     y_pitch, r);
}

}  // namespace

void sppf_nhwc(const void* x, void* y, bool half, int n, int h, int w, int c, int x_pitch, int y_pitch, int k,
               cudaStream_t stream) {
  YOLOCU_CHECK(k >= 1 && k % 2 == 1 && x_pitch >= c && y_pitch >= 4 * c, kInternal, "sppf: kernel ", k, ", pitch ",
               x_pitch, " / ", y_pitch, " for ", c, " channels");
  YOLOCU_CHECK(engine::sppf_fits(h, w), kInternal, "sppf: a ", h, "x", w, " map does not fit shared memory (the plan checks this)");
  kutil::check_count(int64_t{n} * h * w * std::max(x_pitch, y_pitch), "sppf");
  // 16-byte vectors when every channel offset and pitch keeps them aligned
  const int v = 16 / (half ? 2 : 4);
  const bool vec = c % v == 0 && x_pitch % v == 0 && y_pitch % v == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (half && vec) launch_sppf<__half, 8>(x, y, n, h, w, c, x_pitch, y_pitch, k / 2, stream);
  else if (half) launch_sppf<__half, 1>(x, y, n, h, w, c, x_pitch, y_pitch, k / 2, stream);
  else if (vec) launch_sppf<float, 4>(x, y, n, h, w, c, x_pitch, y_pitch, k / 2, stream);
  else launch_sppf<float, 1>(x, y, n, h, w, c, x_pitch, y_pitch, k / 2, stream);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels

// The fused C2PSA attention (engine::AttentionBlock) as the GPU engine computes it from the qkv
// convolution's NHWC output: the per-query math, the shared-memory layout and the block shape,
// compiled by nvcc for the kernel (steps/attention_kernel.cu) and by the host compiler for the
// host reference (engine/attention_ref.hpp). One block per (image, head, kQueries queries): it
// stages the head's keys [N][k_pitch] and values [N][hd] in shared memory (the activation dtype),
// then each warp takes one query at a time: scores q.k_j * scale in fp32 (q scaled first, as the
// export's Mul), softmax over the N keys (max, exp, sum, p / sum), out_d = sum_j p_j v_jd in fp32
// (each lane up to kDimsPerPass dims per pass over the keys).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "engine/hd_math.hpp"     // hd::expo, hd::div
#include "yolocu/geometry.hpp"  // YOLOCU_HD

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace yolocu::engine::attn {

constexpr int kWarps = 8;     // warps per block (256 threads)
constexpr int kLanes = 32;
constexpr int kQueries = 16;  // queries per block (each warp takes every kWarps-th)

// One block's problem as the kernel reads it.
struct Geometry {
  int heads = 0, key_dim = 0, head_dim = 0, tokens = 0;
  int qkv_pitch = 0;  // channels per pixel of the qkv source (>= heads * (2 kd + hd))
  int out_pitch = 0;  // of x (NHWC, channel h * hd + d)
  int v_pitch = 0;    // of pe's input Reshape(v) (NHWC), 0: not written
  float scale = 0;
};

// Elements per staged key row: an odd number of 4-byte words, so the lanes of a warp reading key
// rows j = lane (one element each) hit distinct banks.
YOLOCU_HD int key_pitch(int kd, int es) {
  if (es == 4) return kd | 1;
  int p = kd + (kd & 1);         // even: whole words
  if ((p / 2) % 2 == 0) p += 2;  // odd word count
  return p;
}
YOLOCU_HD size_t align16(size_t b) { return (b + 15) / 16 * 16; }
// Shared-memory layout, in bytes: keys, values (activation dtype, `es` bytes), then per warp a
// score row of N floats and the scaled query (kd floats).
YOLOCU_HD size_t values_offset(int kd, int n, int es) { return align16(static_cast<size_t>(n) * key_pitch(kd, es) * es); }
YOLOCU_HD size_t rows_offset(int kd, int hd, int n, int es) {
  return align16(values_offset(kd, n, es) + static_cast<size_t>(n) * hd * es);
}
YOLOCU_HD size_t query_offset(int kd, int hd, int n, int es) {
  return rows_offset(kd, hd, n, es) + static_cast<size_t>(kWarps) * n * sizeof(float);
}
YOLOCU_HD size_t smem_bytes(int kd, int hd, int n, int es) {
  return query_offset(kd, hd, n, es) + static_cast<size_t>(kWarps) * kd * sizeof(float);
}
YOLOCU_HD int query_blocks(int n) { return (n + kQueries - 1) / kQueries; }

YOLOCU_HD float to_f(float v) { return v; }
#if defined(__CUDACC__)
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
#endif

using hd::expo;

// Lane `lane`'s scores: row[j] = q . k_j for j = lane, lane + 32, ...; returns their maximum
// (-inf when it has none). q holds the scaled query (kd floats).
template <class T>
YOLOCU_HD float lane_scores(const float* q, const T* keys, int kp, int kd, int n, int lane, float* row) {
  float m = -INFINITY;
  for (int j = lane; j < n; j += kLanes) {
    const T* kj = keys + static_cast<size_t>(j) * kp;
    float s = 0.f;
    for (int d = 0; d < kd; ++d) s += q[d] * to_f(kj[d]);
    row[j] = s;
    m = s > m ? s : m;
  }
  return m;
}
// row[j] = exp(row[j] - m) for the lane's keys; returns their sum.
YOLOCU_HD float lane_exps(float* row, int n, int lane, float m) {
  float sum = 0.f;
  for (int j = lane; j < n; j += kLanes) {
    const float e = expo(row[j] - m);
    row[j] = e;
    sum += e;
  }
  return sum;
}
// row[j] /= sum for the lane's keys (the probabilities, as Softmax writes them).
YOLOCU_HD void lane_normalize(float* row, int n, int lane, float sum) {
  for (int j = lane; j < n; j += kLanes) row[j] = hd::div(row[j], sum);
}
// out_d = sum_j p_j v_jd (fp32, j in order), values [N][hd], for the lane's dims d = d0 + lane +
// 32 k (k < kDimsPerPass, d < hd) in one pass over the keys: acc[k].
constexpr int kDimsPerPass = 4;  // 128 dims per pass of a warp
template <class T>
YOLOCU_HD void lane_outputs(const float* p, const T* values, int hd, int n, int d0, int lane, float (&acc)[kDimsPerPass]) {
  for (int k = 0; k < kDimsPerPass; ++k) acc[k] = 0.f;
  for (int j = 0; j < n; ++j) {
    const float pj = p[j];
    const T* vj = values + static_cast<size_t>(j) * hd;
    for (int k = 0; k < kDimsPerPass; ++k) {
      const int d = d0 + lane + k * kLanes;
      if (d < hd) acc[k] += pj * to_f(vj[d]);
    }
  }
}

// Element offsets in the NHWC buffers (pixel = image * N + token).
YOLOCU_HD int64_t qkv_index(const Geometry& g, int b, int h, int token, int c) {
  return (static_cast<int64_t>(b) * g.tokens + token) * g.qkv_pitch + static_cast<int64_t>(h) * (2 * g.key_dim + g.head_dim) + c;
}
YOLOCU_HD int64_t image_index(const Geometry& g, int pitch, int b, int h, int token, int d) {
  return (static_cast<int64_t>(b) * g.tokens + token) * pitch + static_cast<int64_t>(h) * g.head_dim + d;
}

}  // namespace yolocu::engine::attn

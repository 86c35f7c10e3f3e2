// Device-side definitions shared by the CUDA post-processing translation units (included by .cu
// files only): the candidate key, the per-call parameter blocks, the result records, the
// candidate rules of the decode, and the launch functions each .cu file defines.
//
//   postprocess_decode.cu   decode_kernel + select_kernel (radix select on overflow)
//   postprocess_nms.cu      nms_kernel: kept-box path per image, and the bitmask path
//                           (postprocess_bitmask.cuh) for crowded images; projection, results
//   postprocess_cuda.cu     host side: plan, workspace, launch sequence
// Every file is compiled with -fmad=false (float expressions round exactly as on the host).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "postprocess/postprocess_common.hpp"
#include "postprocess/postprocess_sources.cuh"
#include "yolocu/postprocess_cuda.hpp"

namespace yolocu::postprocess_detail {

constexpr int kDecodeThreads = 256;
constexpr int kNmsThreads = 1024;  // one thread per candidate of a chunk
constexpr int kChunk = kNmsThreads;
constexpr int kChunkWords = kChunk / 32;
constexpr int kRankSortMax = 512;  // chunks up to this size are sorted by rank, larger bitonically
constexpr int kDigitBits = 11;
constexpr int kBins = 1 << kDigitBits;
constexpr int kSelectPasses = 6;  // 5 x 11 + 9 = 64 key bits
// Bitmask path: 64 candidates per mask word; a mask tile is 1024 rows (one per thread of an NMS
// block) x 256 columns.
constexpr int kMaskRows = kNmsThreads;
constexpr int kMaskCols = 256;
constexpr int kMaxBitmaskWords = static_cast<int>(kMaxNmsBitmaskCandidates / 64);

// Radix-select digit `pass` covers key bits [shift, shift + width), most significant first.
__host__ __device__ constexpr int pass_shift(int pass) {
  return pass < 5 ? 64 - 11 * (pass + 1) : 0;
}
__host__ __device__ constexpr int pass_width(int pass) { return pass < 5 ? 11 : 9; }
__device__ __forceinline__ uint64_t pass_high_mask(int pass) {
  const int hi = pass_shift(pass) + pass_width(pass);
  return hi >= 64 ? 0ull : ~0ull << hi;
}

// What comes back to the host (written by nms_kernel straight into the workspace's mapped pinned
// buffer): per image {detections, candidates found}, then max_det detections per image.
struct ResultHeader {
  int num_detections;
  int num_candidates;
};
struct DetRec {
  float x1, y1, x2, y2, confidence;
  int class_id;
};

struct ProjectBatch {
  ProjectParams p[kMaxCudaBatch];
};

// Sort key, ascending = canonical order: score descending (the bits of a positive float are
// monotonic; scores are > conf >= 0), then index = row * nc + class ascending. Keys of one image
// are unique (the index is).
__device__ __forceinline__ uint64_t make_key(float score, uint32_t index) {
  const uint32_t inverted = 0x7F800000u - __float_as_uint(score);
  return (static_cast<uint64_t>(inverted) << 32) | index;
}
__device__ __forceinline__ float key_score(uint64_t key) {
  return __uint_as_float(0x7F800000u - static_cast<uint32_t>(key >> 32));
}
__device__ __forceinline__ uint32_t key_index(uint64_t key) { return static_cast<uint32_t>(key); }

// Per-image state of one call. Zero between calls: the constructor zeroes it, nms_kernel zeroes
// what it consumed (its last block the counts; so no memset launch is needed), and a call that
// threw half-way makes the next call enqueue one memset first.
struct SelectState {
  int* counts;       // candidates found
  int* emitted;      // slots written by the emit pass
  int* done;         // [img][pass] block tickets
  int* below;        // candidates known to be before the current prefix
  uint64_t* prefix;  // key bits found so far; after the last pass: the capacity-th key
  int* hist;         // [img][pass][kBins]
  int* tiles_done;   // [img] bitmask tiles finished
  int* grid_done;    // blocks of nms_kernel finished (its last block zeroes counts)
};

struct DecodeParams {
  float conf;  // already in the input's dtype
  bool multi_label, agnostic;
  const int* classes;  // filter (device), n_classes == 0: all
  int n_classes;
  int capacity;
  Box* boxes;  // bitmask path: NMS box (class offset applied) per slot < bitmask_cap; or null
  int bitmask_cap;
};

// The bitmask path's buffers (per image: bitmask_cap slots). The path is taken by an image with
// n candidates (after the slot limit) iff 1 <= n <= bitmask_cap && n > bitmask_min.
struct BitmaskParams {
  const uint64_t* keys;  // [img][capacity]
  const Box* boxes;      // [img][bitmask_cap]
  uint64_t* mask;        // [img][bitmask_cap * ceil(bitmask_cap / 64)], row stride ceil(n / 64)
  int* rank;             // [img][bitmask_cap], zero between calls
  int* order;            // [img][bitmask_cap]
  int capacity, bitmask_cap, bitmask_min;
  float cut;
  // (n >= 1: an empty image has no tile, so no block would sweep it and write its header)
  __device__ __forceinline__ bool takes(int n) const {
    return n >= 1 && n <= bitmask_cap && n > bitmask_min;
  }
  __device__ __forceinline__ int64_t mask_stride() const {
    return static_cast<int64_t>(bitmask_cap) * ((bitmask_cap + 63) / 64);
  }
};

struct NmsParams {
  int capacity, max_det;
  float cut;  // nms_iou_cut(iou_threshold): suppress when IoU > cut
  bool agnostic, fast;
};

// Calls f(score, class) for every candidate of row w, classes ascending: the rules of emit_row in
// postprocess_cpu.cpp (obj filter, obj * cls rounded to the dtype, best class with NaN
// propagation or multi-label, class filter).
template <class Src, class F>
__device__ __forceinline__ void for_each_candidate(const Src& src, const typename Src::Row& w,
                                                   const DecodeParams& p, F&& f) {
  const typename Src::RoundT r;
  auto allowed = [&](int c) {
    if (p.n_classes == 0) return true;
    for (int k = 0; k < p.n_classes; ++k)
      if (p.classes[k] == c) return true;
    return false;
  };
  if constexpr (Src::kAnchorFree) {
    // emit_row_v8 (postprocess_cpu.cpp): the best class score (NaN propagates) must pass conf;
    // then every class above conf (multi-label, nc > 1) or the first best class.
    // (the class scores are read kLoads at a time, then compared in class order: a thread's loads
    // are independent, and a row of the channel-major output is nc loads of one thread)
    constexpr int kLoads = 8;
    float best = src.cls(w, 0);
    int best_c = 0;
    for (int c0 = 1; c0 < src.nc; c0 += kLoads) {
      float v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) v[u] = c0 + u < src.nc ? src.cls(w, c0 + u) : 0.f;
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        if (c0 + u < src.nc && (v[u] > best || isnan(v[u])) && !isnan(best)) {
          best = v[u];
          best_c = c0 + u;
        }
      }
    }
    if (!(best > p.conf)) return;
    if (p.multi_label && src.nc > 1) {
      for (int c0 = 0; c0 < src.nc; c0 += kLoads) {
        float v[kLoads];
#pragma unroll
        for (int u = 0; u < kLoads; ++u) v[u] = c0 + u < src.nc ? src.cls(w, c0 + u) : 0.f;
#pragma unroll
        for (int u = 0; u < kLoads; ++u)
          if (c0 + u < src.nc && v[u] > p.conf && allowed(c0 + u)) f(v[u], c0 + u);
      }
      return;
    }
    if (allowed(best_c)) f(best, best_c);
    return;
  }
  const float obj = src.obj(w);
  if (!(obj > p.conf)) return;
  if (p.multi_label) {
    for (int c = 0; c < src.nc; ++c) {
      const float s = r(src.cls(w, c) * obj);
      if (s > p.conf && allowed(c)) f(s, c);
    }
    return;
  }
  float best = r(src.cls(w, 0) * obj);
  int best_c = 0;
  bool nan = isnan(best);
  for (int c = 1; c < src.nc; ++c) {
    const float s = r(src.cls(w, c) * obj);
    nan = nan || isnan(s);
    if (s > best) {
      best = s;
      best_c = c;
    }
  }
  if (!nan && best > p.conf && allowed(best_c)) f(best, best_c);
}

// Launchers (each defined, and instantiated for every source, in the .cu file named above).
// decode_kernel, plus the radix select + emit passes when `select_passes`.
template <class Src>
void launch_decode(const Src& src, int batch, const DecodeParams& p, const SelectState& st,
                   uint64_t* keys, bool select_passes, cudaStream_t stream);
// nms_kernel: one block per image, plus `mask_blocks` blocks for the bitmask path (0: none).
template <class Src>
void launch_nms(const Src& src, int batch, int mask_blocks, const NmsParams& p,
                const BitmaskParams& bm, const SelectState& st, const uint64_t* keys, Box* seen,
                const ProjectBatch& geo, ResultHeader* header, DetRec* dets, size_t shared_bytes,
                cudaStream_t stream);
// Raises the NMS kernels' dynamic shared memory limit to `bytes` (once per process and source).
template <class Src>
void set_nms_shared_limit(size_t bytes);

// The sources the entry points read (the launchers are instantiated for each).
using MergedF32 = MergedSource<float, RoundNone>;
using MergedF16 = MergedSource<__half, RoundHalf>;
using HeadsF32 = HeadsSource<float, RoundNone>;
using HeadsF16 = HeadsSource<__half, RoundHalf>;
using V8F32 = V8Source<float, RoundNone>;
using V8F16 = V8Source<__half, RoundHalf>;
#define YOLOCU_FOR_EACH_POSTPROCESS_SOURCE(X) \
  X(MergedF32) X(MergedF16) X(HeadsF32) X(HeadsF16) X(V8F32) X(V8F16)

}  // namespace yolocu::postprocess_detail

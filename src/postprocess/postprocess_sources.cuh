// The model outputs the CUDA post-processing reads, as "sources" of candidate rows (device code,
// included through postprocess_device.cuh). A source gives, for row r of image img, a Row handle
// and its objectness, class scores and box, rounded like the CPU reference (postprocess_cpu.cpp):
//   MergedSource  YOLOv5 merged output [batch, rows, 5 + nc]
//   HeadsSource   YOLOv5 raw heads, NCHW per level (sigmoid, grid and anchors fused)
//   V8Source      YOLOv8 / YOLO11 output [batch, 4 + nc, anchors], channel-major, no objectness
// kAnchorFree selects the YOLOv8 candidate rules in for_each_candidate (postprocess_device.cuh).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "postprocess/postprocess_common.hpp"

namespace yolocu::postprocess_detail {

struct RoundNone {
  __device__ float operator()(float x) const { return x; }
};
struct RoundHalf {
  __device__ float operator()(float x) const { return __half2float(__float2half_rn(x)); }
};

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }

// Merged output batch x rows x (5 + nc): a row is its pointer.
template <typename T, typename Round>
struct MergedSource {
  using RoundT = Round;
  static constexpr bool kAnchorFree = false;
  struct Row {
    const T* p;
  };
  const T* data;
  int rows, nc;
  __device__ Row row(int img, int r) const {
    return Row{data + (static_cast<int64_t>(img) * rows + r) * (nc + 5)};
  }
  __device__ float obj(const Row& w) const { return load(w.p, 4); }
  __device__ float cls(const Row& w, int c) const { return load(w.p, 5 + c); }
  __device__ Box box(const Row& w) const {
    return xywh_to_xyxy(load(w.p, 0), load(w.p, 1), load(w.p, 2), load(w.p, 3), Round());
  }
};

// Raw heads, NCHW per level (batch x na*(5+nc) x ny x nx): merged row r is found by level, then
// anchor, y, x; value k of the row sits k planes further.
template <typename T, typename Round>
struct HeadsSource {
  using RoundT = Round;
  static constexpr bool kAnchorFree = false;
  struct Level {
    const T* data;
    int ny, nx, na, row_begin;
    float stride;
    float anchors[2 * kMaxAnchors];
  };
  struct Row {
    const T* p;
    int plane, x, y, a, level;
  };
  Level lv[kMaxHeadLevels];
  int num_levels, rows, nc;
  __device__ Row row(int img, int r) const {
    int l = 0;
    while (l + 1 < num_levels && r >= lv[l + 1].row_begin) ++l;
    const Level& L = lv[l];
    const int plane = L.ny * L.nx, i = r - L.row_begin;
    const int a = i / plane, rem = i - a * plane, y = rem / L.nx, x = rem - y * L.nx;
    const T* p = L.data + (static_cast<int64_t>(img) * L.na + a) * (nc + 5) * plane +
                 static_cast<int64_t>(y) * L.nx + x;
    return Row{p, plane, x, y, a, l};
  }
  __device__ float obj(const Row& w) const {
    return Round()(sigmoid(load(w.p, static_cast<int64_t>(4) * w.plane)));
  }
  __device__ float cls(const Row& w, int c) const {
    return Round()(sigmoid(load(w.p, static_cast<int64_t>(5 + c) * w.plane)));
  }
  __device__ Box box(const Row& w) const {
    const Round r;
    float v[4];
    for (int k = 0; k < 4; ++k) v[k] = r(sigmoid(load(w.p, static_cast<int64_t>(k) * w.plane)));
    const Level& L = lv[w.level];
    head_to_xywh(v, w.x, w.y, L.stride, L.anchors[2 * w.a], L.anchors[2 * w.a + 1], r);
    return xywh_to_xyxy(v[0], v[1], v[2], v[3], r);
  }
};

// YOLOv8 / YOLO11 output batch x (4 + nc) x anchors: value k of anchor r sits k * rows further
// (channel-major, coalesced across a warp's anchors). No objectness: obj() is 1, so obj * cls
// rounds to cls itself.
template <typename T, typename Round>
struct V8Source {
  using RoundT = Round;
  static constexpr bool kAnchorFree = true;
  struct Row {
    const T* p;
  };
  const T* data;
  int rows, nc;
  __device__ Row row(int img, int r) const { return Row{data + static_cast<int64_t>(img) * (nc + 4) * rows + r}; }
  __device__ float obj(const Row&) const { return 1.f; }
  __device__ float cls(const Row& w, int c) const { return load(w.p, static_cast<int64_t>(4 + c) * rows); }
  __device__ Box box(const Row& w) const {
    return xywh_to_xyxy(load(w.p, 0), load(w.p, rows), load(w.p, 2 * static_cast<int64_t>(rows)),
                        load(w.p, 3 * static_cast<int64_t>(rows)), Round());
  }
};

}  // namespace yolocu::postprocess_detail

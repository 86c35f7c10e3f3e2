// The fused YOLOv8 / YOLO11 Detect tail (engine::V8Head) as the GPU engine computes it from the
// levels' head convolution outputs (NHWC): the element math and the kernel's tiling, compiled by
// nvcc for the kernel and by the host compiler for the host reference (engine/v8_tail_ref.hpp).
// Per anchor: the 4 distances as DFL softmax expectations over 16 bins (fp32), the box decode
// (xywh in pixels), and the nc class sigmoids; output [N, 4 + nc, A] plain float32.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/detect_tail.hpp"  // tail::sigmoid, tail::mul, tail::add
#include "engine/hd_math.hpp"      // hd::sub, hd::div, hd::expo
#include "yolocu/geometry.hpp"     // YOLOCU_HD

namespace yolocu::engine::v8tail {

constexpr int kBins = 16;      // engine::kV8RegMax
constexpr int kMaxLevels = 4;  // levels one launch takes (YOLOv8 / YOLO11: 3; the P2 and P6 variants: 4)

// One level as the kernel reads it.
struct Level {
  int ny = 0, nx = 0;
  int anchor_begin = 0;  // first anchor of the level in the output
  float stride = 0;
  int box_pitch = 0, cls_pitch = 0;  // channels per pixel of the sources (padding included)
  int cls_channel = 0;               // the first class channel of the class source
};

// The kernel's view of a matched level (engine::V8Level) whose sources have these pitches.
template <class HostLevel>
Level level_from(const HostLevel& d, int64_t box_pitch, int64_t cls_pitch) {
  Level L;
  L.ny = static_cast<int>(d.ny);
  L.nx = static_cast<int>(d.nx);
  L.anchor_begin = static_cast<int>(d.anchor_begin);
  L.stride = d.stride;
  L.box_pitch = static_cast<int>(box_pitch);
  L.cls_pitch = static_cast<int>(cls_pitch);
  L.cls_channel = static_cast<int>(d.cls_channel);
  return L;
}

using hd::div;
using hd::expo;
using hd::sub;

// The DFL's distance from 16 logits: softmax over the bins (max subtracted, as the graph's
// Softmax), then the expectation sum_i i * p_i that the 1x1 convolution with weights 0..15
// computes; here as (sum_i i * e_i) / (sum_i e_i), one division instead of 16 (the same value up
// to rounding).
YOLOCU_HD float dfl_distance(const float* v) {
  float m = v[0];
  for (int i = 1; i < kBins; ++i) m = v[i] > m ? v[i] : m;
  float s = 0.f, acc = 0.f;
  for (int i = 0; i < kBins; ++i) {
    const float e = expo(sub(v[i], m));
    s = tail::add(s, e);
    acc = tail::add(acc, tail::mul(e, static_cast<float>(i)));
  }
  return div(acc, s);
}

// Output row k (0 cx, 1 cy, 2 w, 3 h) of the anchor of cell (x, y) from its distances d (left,
// top, right, bottom), the graph's operations in its order: x1 = anchor - near, x2 = anchor +
// far, centre (x1 + x2) / 2 or size x2 - x1, times the stride.
YOLOCU_HD float decode(int k, int x, int y, const float* d, float stride) {
  const int axis = k & 1;  // 0: x, 1: y
  const float anchor = tail::add(static_cast<float>(axis == 0 ? x : y), 0.5f);
  const float x1 = sub(anchor, d[axis]), x2 = tail::add(anchor, d[axis + 2]);
  const float v = k < 2 ? div(tail::add(x1, x2), 2.f) : sub(x2, x1);
  return tail::mul(v, stride);
}

// The kernel's tiles: a block takes `tile` (a power of two, <= 32) consecutive pixels (anchors)
// of one image of one level; level l's blocks of all images follow level l - 1's.
struct Tile {
  int n = 0, p0 = 0, count = 0;  // image, first pixel, pixels in the tile
};

YOLOCU_HD int tiles_per_image(const Level& L, int tile) { return (L.ny * L.nx + tile - 1) / tile; }

// Block b of the level (0 <= b < batch * tiles_per_image).
YOLOCU_HD Tile tile_of(const Level& L, int b, int tile) {
  const int per_image = tiles_per_image(L, tile), pixels = L.ny * L.nx;
  Tile t;
  t.n = b / per_image;
  t.p0 = (b - t.n * per_image) * tile;
  t.count = pixels - t.p0 < tile ? pixels - t.p0 : tile;
  return t;
}

// Where output row `row` (0..3 boxes, 4 + c class c) of pixel p0 + q of the tile goes in
// [N, 4 + nc, A].
YOLOCU_HD int64_t output_index(const Level& L, int64_t nc, int64_t anchors, const Tile& t, int row, int q) {
  return (static_cast<int64_t>(t.n) * (4 + nc) + row) * anchors + L.anchor_begin + t.p0 + q;
}

// Source value of channel ch of pixel p0 + q of the tile in an NHWC source of `pitch` channels.
YOLOCU_HD int64_t source_index(const Level& L, const Tile& t, int pitch, int q, int ch) {
  return (static_cast<int64_t>(t.n) * L.ny * L.nx + t.p0 + q) * pitch + ch;
}

// The class scores of a tile sit in shared memory as floats, `class_stride` per pixel: odd, so that
// a warp reading one class of 32 pixels hits 32 different banks.
YOLOCU_HD int64_t class_stride(int64_t nc) { return nc | 1; }

// Pixels per tile for nc classes: 32 while their scores fit in 32 KB of shared memory, else the
// largest power of two that fits; 0 if not even one pixel does.
YOLOCU_HD int tile_pixels_for(int64_t nc) {
  const int64_t per_pixel = class_stride(nc) * 4;
  int t = 32;
  while (t > 0 && t * per_pixel > (int64_t{32} << 10)) t /= 2;
  return t;
}

// The kernel's block, phase by phase, for its thread `tid` of `threads` (the host reference runs
// each phase for every thread before the next, as the kernel's barrier orders them). Shared memory:
// `scores` [tile][class_stride(nc)], `dist` [4][tile]; tile = 1 << shift pixels.
//
// 1. Class scores: the tile's class source is one contiguous run of count * cls_pitch values (all
//    channels of its pixels); cls(i) reads element i. Consecutive threads take consecutive elements
//    (coalesced reads) and store the class channels' sigmoids.
template <class Read>
YOLOCU_HD void stage_scores(const Level& L, const Tile& t, int nc, int tid, int threads, Read cls, float* scores) {
  const int cs = static_cast<int>(class_stride(nc)), values = t.count * L.cls_pitch;
  tail::RunWalk wk(tid, threads, L.cls_pitch);
  for (int i = tid; i < values; i += threads, wk.next()) {
    const int c = wk.k - L.cls_channel;  // the run's other channels (padding, box logits) are skipped
    if (c >= 0 && c < nc) scores[wk.q * cs + c] = tail::sigmoid(cls(i));
  }
}

// 2. Distances: one (side, pixel) pair per thread and step; bins(q, side, v) reads the 16 logits
//    of side `side` of pixel p0 + q into v.
template <class Bins>
YOLOCU_HD void stage_distances(const Tile& t, int shift, int tid, int threads, Bins bins, float* dist) {
  const int tile = 1 << shift;
  for (int i = tid; i < 4 * tile; i += threads) {
    const int side = i >> shift, q = i & (tile - 1);
    if (q >= t.count) continue;
    float v[kBins];
    bins(q, side, v);
    dist[side * tile + q] = dfl_distance(v);
  }
}

// 3. Outputs: every output row (4 box rows, nc class rows) of the tile is `count` consecutive
//    floats of [N, 4 + nc, A]; consecutive threads take consecutive pixels of a row (coalesced
//    stores; the reads down a class column of `scores` hit distinct banks). store(index, value).
template <class Store>
YOLOCU_HD void write_outputs(const Level& L, const Tile& t, int nc, int64_t anchors, int shift, int tid, int threads,
                             const float* scores, const float* dist, Store store) {
  const int tile = 1 << shift, cs = static_cast<int>(class_stride(nc)), elems = (4 + nc) << shift;
  for (int j = tid; j < elems; j += threads) {
    const int row = j >> shift, q = j & (tile - 1);
    if (q >= t.count) continue;
    float v;
    if (row < 4) {
      const float d[4] = {dist[q], dist[tile + q], dist[2 * tile + q], dist[3 * tile + q]};
      const int p = t.p0 + q, y = p / L.nx;
      v = decode(row, p - y * L.nx, y, d, L.stride);
    } else {
      v = scores[q * cs + row - 4];
    }
    store(output_index(L, nc, anchors, t, row, q), v);
  }
}

// log2 of a tile size (a power of two).
YOLOCU_HD int tile_shift(int tile) {
  int shift = 0;
  while ((1 << shift) < tile) ++shift;
  return shift;
}

}  // namespace yolocu::engine::v8tail

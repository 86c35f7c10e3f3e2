// The fused YOLOv8 / YOLO11 Detect tail (engine::V8Head) as the GPU engine computes it from the
// levels' head convolution outputs (NHWC): the element math and the kernel's tiling, compiled by
// nvcc for the kernel and by the host compiler for the host reference (engine/v8_tail_ref.hpp).
// Per anchor: the 4 distances as DFL softmax expectations over 16 bins (fp32), the box decode
// (xywh in pixels), and the nc class sigmoids; output [N, 4 + nc, A] plain float32.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/detect_tail.hpp"  // tail::sigmoid, tail::mul, tail::add
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

YOLOCU_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
YOLOCU_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
YOLOCU_HD float expo(float v) {
#if defined(__CUDA_ARCH__)
  return expf(v);
#else
  return std::exp(v);
#endif
}

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
// of one image of one level; the levels' tiles of image 0, then of image 1, ... are not
// interleaved: level l's blocks of all images follow level l - 1's. Its outputs for one output
// row are `count` consecutive floats (coalesced stores along the anchors).
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

}  // namespace yolocu::engine::v8tail

// One element of the fused Detect tail (engine::DetectHead) as the GPU engine computes it from a
// head convolution's NHWC output: compiled by nvcc for the kernel and by the host compiler for the
// CPU test that checks it against the node-by-node CPU engine. The graph's float operations in the
// graph's order; on the device with __fmul_rn / __fadd_rn so that nvcc cannot contract them into
// an FMA (the node-by-node path runs them as separate kernels, and the CPU without FMA).
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/hd_math.hpp"
#include "yolocu/geometry.hpp"  // YOLOCU_HD

namespace yolocu::engine::tail {

// The five per-(anchor, y, x, xy|wh) constant tables of a level, each [na][ny][nx][2], one after
// the other: xy_scale, grid, stride, wh_scale, anchor_grid.
constexpr int kTables = 5;

struct Level {
  int64_t na = 0, no = 0, ny = 0, nx = 0;
  int64_t row_begin = 0;   // first row of the level in the merged output
  const float* tables = nullptr;
  float wh_pow = 2.f;
  int64_t pitch = 0;       // channels per pixel of the source (> na * no when padded); 0: na * no
};

// The device-side description of a matched level (engine::DetectLevel, host) whose tables were
// concatenated in the order above (see tables_of).
template <class HostLevel>
Level level_from(const HostLevel& d, const float* tables) {
  Level L;
  L.na = d.na;
  L.no = d.no;
  L.ny = d.ny;
  L.nx = d.nx;
  L.row_begin = d.row_begin;
  L.tables = tables;
  L.wh_pow = d.wh_pow;
  return L;
}
template <class HostLevel, class Vec>
void tables_of(const HostLevel& d, Vec* out) {
  for (const auto* v : {&d.xy_scale, &d.grid, &d.stride, &d.wh_scale, &d.anchor_grid}) out->insert(out->end(), v->begin(), v->end());
}

using hd::add;
using hd::mul;
YOLOCU_HD float sigmoid(float v) {  // as the GPU engine's Sigmoid kernel
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(1.f, __fadd_rn(1.f, expf(-v)));
#else
  return 1.f / (1.f + std::exp(-v));
#endif
}

// The tail's arithmetic on a sigmoid output s: x / y = (s * scale + grid) * stride,
// w / h = (s * scale) ^ pow * anchor (a product for pow 2, as the CPU's Pow op).
YOLOCU_HD float decode_xy(float s, float scale, float grid, float stride) { return mul(add(mul(s, scale), grid), stride); }
YOLOCU_HD float decode_wh(float s, float scale, float pow_, float anchor) {
  float w = mul(s, scale);
#if defined(__CUDA_ARCH__)
  w = pow_ == 2.f ? mul(w, w) : powf(w, pow_);
#else
  w = pow_ == 2.f ? w * w : std::pow(w, pow_);
#endif
  return mul(w, anchor);
}

// Element k of merged row (a, y, x) of image n.
struct Coord {
  int64_t n, a, y, x, k;
};

YOLOCU_HD int64_t source_pitch(const Level& L) { return L.pitch > 0 ? L.pitch : L.na * L.no; }

// The kernel's tiles: a block takes `tile_pixels` consecutive pixels (pixel = y * nx + x) of one
// image of one level, the level's tiles of an image one after the other. It reads their NHWC
// channels as one contiguous run (count * pitch values, vector loads) into shared memory, and for
// each anchor a writes their merged rows, which are also contiguous: count * no floats from
// run_output_index(), element j = pixel p0 + j / no, channel k = j % no (coalesced stores).
// 32-bit arithmetic (the kernel's; the launcher checks every index fits).
struct Tile {
  int n = 0, p0 = 0, count = 0;  // image, first pixel, pixels in the tile
};

YOLOCU_HD int tiles_per_image(const Level& L, int tile_pixels) {
  const int pixels = static_cast<int>(L.ny * L.nx);
  return (pixels + tile_pixels - 1) / tile_pixels;
}

// Block `b` of the level (0 <= b < batch * tiles_per_image).
YOLOCU_HD Tile tile_of(const Level& L, int b, int tile_pixels) {
  const int per_image = tiles_per_image(L, tile_pixels), pixels = static_cast<int>(L.ny * L.nx);
  Tile t;
  t.n = b / per_image;
  t.p0 = (b - t.n * per_image) * tile_pixels;
  t.count = pixels - t.p0 < tile_pixels ? pixels - t.p0 : tile_pixels;
  return t;
}

// The tile's first source value: pixel p0 of image n, channel 0.
YOLOCU_HD int64_t tile_source_offset(const Level& L, const Tile& t) {
  return (static_cast<int64_t>(t.n) * L.ny * L.nx + t.p0) * source_pitch(L);
}

// Where anchor a's run of the tile starts in the merged output [N, rows, no].
YOLOCU_HD int64_t run_output_index(const Level& L, int64_t rows, const Tile& t, int a) {
  return (static_cast<int64_t>(t.n) * rows + L.row_begin + static_cast<int64_t>(a) * L.ny * L.nx + t.p0) * L.no;
}

// A thread's walk along anchor a's run of a tile: elements first, first + stride, ... (stride =
// the block's threads), each as (q, k): pixel p0 + q of the tile, channel k. One division at the
// start, none per step (k grows by stride % no, and wraps once at most).
struct RunWalk {
  int q, k, dq, dk, no;
  YOLOCU_HD RunWalk(int first, int stride, int no_) : no(no_) {
    q = first / no;
    k = first - q * no;
    dq = stride / no;
    dk = stride - dq * no;
  }
  YOLOCU_HD void next() {
    q += dq;
    k += dk;
    if (k >= no) {
      k -= no;
      ++q;
    }
  }
  // The value's index among the tile's values in shared memory.
  YOLOCU_HD int local(int pitch, int a) const { return q * pitch + a * no + k; }
};

// Pixels per tile for a source of `pitch` channels of `elem_bytes` each: up to 32, within 32 KB of
// shared memory (at least one).
YOLOCU_HD int tile_pixels_for(int64_t pitch, int elem_bytes) {
  const int64_t fit = (int64_t{32} << 10) / (pitch * elem_bytes);
  return fit >= 32 ? 32 : (fit < 1 ? 1 : static_cast<int>(fit));
}

// Its index in the merged output [N, rows, no].
YOLOCU_HD int64_t output_index(const Level& L, int64_t rows, const Coord& c) {
  return (c.n * rows + L.row_begin + (c.a * L.ny + c.y) * L.nx + c.x) * L.no + c.k;
}

// Element k of anchor a's row for pixel p (the level's cell a * ny * nx + p), from the
// convolution's output `v` (bias added, before the sigmoid). 32-bit indices (the launcher checks).
YOLOCU_HD float element(const Level& L, int cell, int k, float v) {
  const float s = sigmoid(v);
  if (k >= 4) return s;
  const int cells = static_cast<int>(L.na * L.ny * L.nx) * 2;
  const int ci = cell * 2 + (k & 1);
  const float* t = L.tables;
  if (k < 2) return decode_xy(s, t[ci], t[cells + ci], t[2 * cells + ci]);
  return decode_wh(s, t[3 * cells + ci], L.wh_pow, t[4 * cells + ci]);
}

}  // namespace yolocu::engine::tail

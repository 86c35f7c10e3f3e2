// One element of the fused Detect tail (engine::DetectHead) as the GPU engine computes it from a
// head convolution's NHWC output: compiled by nvcc for the kernel and by the host compiler for the
// CPU test that checks it against the node-by-node CPU engine. The graph's float operations in the
// graph's order; on the device with __fmul_rn / __fadd_rn so that nvcc cannot contract them into
// an FMA (the node-by-node path runs them as separate kernels, and the CPU without FMA).
#pragma once

#include <cmath>
#include <cstdint>

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

YOLOCU_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
YOLOCU_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
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

// The element a thread handles: i enumerates the head convolution's NHWC output of the batch,
// i = ((n * ny + y) * nx + x) * pitch + a * no + k (coalesced reads). A padding channel
// (a * no + k >= na * no) gives a >= na: is_padding() is true and it has no output element.
YOLOCU_HD Coord coord_of(const Level& L, int64_t i) {
  const int64_t pitch = source_pitch(L);
  const int64_t c = i % pitch;
  int64_t pix = i / pitch;
  const int64_t x = pix % L.nx;
  pix /= L.nx;
  const int64_t a = c / L.no;
  return Coord{pix / L.ny, a, pix % L.ny, x, c - a * L.no};
}

// coord_of for i < 2^32 in 32-bit arithmetic (the kernel's path: 64-bit division is many times
// slower on the GPU); equal to coord_of for every such i (tests/engine/test_detect_tail.cpp).
YOLOCU_HD Coord coord_of_u32(const Level& L, uint32_t i) {
  const uint32_t pitch = static_cast<uint32_t>(source_pitch(L)), no = static_cast<uint32_t>(L.no);
  const uint32_t nx = static_cast<uint32_t>(L.nx), ny = static_cast<uint32_t>(L.ny);
  const uint32_t c = i % pitch;
  uint32_t pix = i / pitch;
  const uint32_t x = pix % nx;
  pix /= nx;
  const uint32_t a = c / no;
  return Coord{pix / ny, a, pix % ny, x, c - a * no};
}

YOLOCU_HD bool is_padding(const Level& L, const Coord& c) { return c.a >= L.na; }

// Its index in the merged output [N, rows, no].
YOLOCU_HD int64_t output_index(const Level& L, int64_t rows, const Coord& c) {
  return (c.n * rows + L.row_begin + (c.a * L.ny + c.y) * L.nx + c.x) * L.no + c.k;
}

// Its value, from the convolution's output `v` (bias added, before the sigmoid).
YOLOCU_HD float element(const Level& L, const Coord& c, float v) {
  const float s = sigmoid(v);
  if (c.k >= 4) return s;
  const int64_t cells = L.na * L.ny * L.nx * 2;
  const int64_t ci = ((c.a * L.ny + c.y) * L.nx + c.x) * 2 + (c.k & 1);
  const float* t = L.tables;
  if (c.k < 2) return decode_xy(s, t[ci], t[cells + ci], t[2 * cells + ci]);
  return decode_wh(s, t[3 * cells + ci], L.wh_pow, t[4 * cells + ci]);
}

}  // namespace yolocu::engine::tail

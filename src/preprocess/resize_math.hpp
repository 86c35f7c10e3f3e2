// Internal: the arithmetic of OpenCV 4.6 cv::resize(INTER_LINEAR) on 8-bit images, written once
// for the CPU reference and the CUDA kernels (every function is __host__ __device__ under nvcc).
//
// OpenCV resizes separably. For each destination column dx it computes, in double then float,
//   fx = float((dx + 0.5) * scale_x - 0.5),  sx = floor(fx),  fx -= sx,
// clamps sx (and sets fx = 0) at both borders, and quantises the two weights separately:
//   w0 = rint((1 - fx) * 2048), w1 = rint(fx * 2048)   (11 bits, round half to even).
// The horizontal pass gives exact 32-bit sums h = S[sx] * w0 + S[sx + 1] * w1. Rows use the same
// formula without the weight clamp; the two source rows are clamped into the image instead. The
// vertical pass, the same for every element (OpenCV's 8-bit SIMD body and its scalar tail agree):
//   v = (((h0 >> 4) * w0 >> 16) + ((h1 >> 4) * w1 >> 16) + 2) >> 2
// i.e. not the exact (h0 * w0 + h1 * w1 + 2^21) >> 22; the two differ by one on some pixels.
// The scale factors are 1 / (dst / src) in double, as OpenCV computes them (not src / dst). When
// both are exactly 2, OpenCV uses the 2x2 block mean (sum + 2) >> 2 instead.
// Floating-point steps are spelled with explicitly rounded device intrinsics so that nvcc cannot
// fuse them into FMAs (the host build uses -ffp-contract=off for the same reason).
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "yolocu/geometry.hpp"  // YOLOCU_HD

namespace yolocu::detail {

inline constexpr int kResizeCoefBits = 11;
inline constexpr int kResizeCoefScale = 1 << kResizeCoefBits;  // 2048

// How OpenCV resizes src -> dst (8-bit, INTER_LINEAR).
enum class ResizeMode : int32_t { kCopy = 0, kArea2x = 1, kLinear = 2 };

// One destination coordinate: the two source taps (already clamped into [0, len)) and their
// fixed-point weights.
struct LinearTap {
  int i0, i1;
  int w0, w1;
};

YOLOCU_HD double resize_scale(int src_len, int dst_len) {
  // OpenCV: inv_scale = (double)dst / src; scale = 1. / inv_scale
#if defined(__CUDA_ARCH__)
  return __drcp_rn(__ddiv_rn(static_cast<double>(dst_len), static_cast<double>(src_len)));
#else
  return 1.0 / (static_cast<double>(dst_len) / static_cast<double>(src_len));
#endif
}

YOLOCU_HD ResizeMode resize_mode(int src_w, int src_h, int dst_w, int dst_h) {
  if (src_w == dst_w && src_h == dst_h) return ResizeMode::kCopy;
  const double sx = resize_scale(src_w, dst_w), sy = resize_scale(src_h, dst_h);
  // is_area_fast with integer scale 2 in both directions (iscale = cvRound(scale))
  const double ix = ::rint(sx), iy = ::rint(sy);
  const bool integral = ::fabs(sx - ix) < DBL_EPSILON && ::fabs(sy - iy) < DBL_EPSILON;
  if (integral && ix == 2.0 && iy == 2.0) return ResizeMode::kArea2x;
  return ResizeMode::kLinear;
}

// Source position of destination index d: sx and the fractional part (float, as OpenCV).
YOLOCU_HD void linear_source(int d, double scale, int* s, float* frac) {
#if defined(__CUDA_ARCH__)
  const double pos = __dadd_rn(__dmul_rn(__dadd_rn(static_cast<double>(d), 0.5), scale), -0.5);
  const float f = __double2float_rn(pos);
  const float fl = floorf(f);
  *s = static_cast<int>(fl);
  *frac = __fsub_rn(f, fl);
#else
  const double pos = (static_cast<double>(d) + 0.5) * scale - 0.5;
  const float f = static_cast<float>(pos);
  const float fl = std::floor(f);
  *s = static_cast<int>(fl);
  *frac = f - fl;
#endif
}

YOLOCU_HD int coef_round(float w) {
  // saturate_cast<short>(w * 2048.f): w * 2048 is exact; cvRound is round half to even.
#if defined(__CUDA_ARCH__)
  return __float2int_rn(w * static_cast<float>(kResizeCoefScale));
#else
  return static_cast<int>(std::nearbyint(w * static_cast<float>(kResizeCoefScale)));
#endif
}

YOLOCU_HD float one_minus(float f) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(1.f, f);
#else
  return 1.f - f;
#endif
}

// Horizontal tap: fx and sx are clamped at both borders (weight (2048, 0) outside the image).
YOLOCU_HD LinearTap linear_tap_x(int dx, double scale, int src_len) {
  int s;
  float f;
  linear_source(dx, scale, &s, &f);
  if (s < 0) {
    s = 0;
    f = 0.f;
  }
  if (s >= src_len - 1) {
    s = src_len - 1;
    f = 0.f;
  }
  LinearTap t;
  t.i0 = s;
  t.i1 = s + 1 < src_len ? s + 1 : src_len - 1;
  t.w0 = coef_round(one_minus(f));
  t.w1 = coef_round(f);
  return t;
}

// Vertical tap: weights from the unclamped position; the two rows clamped into [0, src_len).
YOLOCU_HD LinearTap linear_tap_y(int dy, double scale, int src_len) {
  int s;
  float f;
  linear_source(dy, scale, &s, &f);
  LinearTap t;
  t.i0 = s < 0 ? 0 : (s < src_len ? s : src_len - 1);
  t.i1 = s + 1 < 0 ? 0 : (s + 1 < src_len ? s + 1 : src_len - 1);
  t.w0 = coef_round(one_minus(f));
  t.w1 = coef_round(f);
  return t;
}

YOLOCU_HD uint8_t clamp_u8(int v) { return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v)); }

// Vertical combination of two horizontal sums h0, h1 (row weights w0, w1).
YOLOCU_HD uint8_t vertical_mix(int h0, int h1, int w0, int w1) {
  const int a = ((h0 >> 4) * w0) >> 16;
  const int b = ((h1 >> 4) * w1) >> 16;
  return clamp_u8((a + b + 2) >> 2);
}

// 2x2 block mean, rounded half up.
YOLOCU_HD uint8_t area2x_mean(int a, int b, int c, int d) {
  return static_cast<uint8_t>((a + b + c + d + 2) >> 2);
}

}  // namespace yolocu::detail

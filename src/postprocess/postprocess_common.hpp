// Post-processing arithmetic shared by the CPU reference and the CUDA kernels (__host__ __device__
// under nvcc), so that both evaluate the same float expressions in the same order.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "yolocu/geometry.hpp"
#include "yolocu/postprocess.hpp"

namespace yolocu {

// Canonical candidate order: score descending, then row ascending, then class ascending.
YOLOCU_HD bool canonical_before(float sa, int ra, int ca, float sb, int rb, int cb) {
  if (sa != sb) return sa > sb;
  if (ra != rb) return ra < rb;
  return ca < cb;
}

// Evaluated in double and rounded once to float: the host's and the device's double exp are both
// within 1 ulp, so CPU reference and CUDA kernels give the same float (a float expf differs by
// 1-2 ulp between glibc and CUDA, which moved raw-head boxes and scores off bit-parity).
YOLOCU_HD float sigmoid(float x) { return static_cast<float>(1.0 / (1.0 + ::exp(-static_cast<double>(x)))); }

// xywh -> xyxy as ultralytics xywh2xyxy (x - w / 2, ...); `r` rounds to the tensor's dtype.
template <typename Round>
YOLOCU_HD Box xywh_to_xyxy(float cx, float cy, float w, float h, Round r) {
  const float hw = r(w / 2.f), hh = r(h / 2.f);
  return Box{r(cx - hw), r(cy - hh), r(cx + hw), r(cy + hh)};
}

// Raw head -> merged row, in place: v[0..3] hold sigmoid(t_x, t_y, t_w, t_h) and become
// cx, cy, w, h in input pixels, computed as the exported Detect head does:
// xy = (s * 2 + (grid - 0.5)) * stride, wh = (s * 2) ** 2 * anchor.
template <typename Round>
YOLOCU_HD void head_to_xywh(float* v, int x, int y, float stride, float anchor_w, float anchor_h,
                            Round r) {
  const float gx = r(static_cast<float>(x) - 0.5f), gy = r(static_cast<float>(y) - 0.5f);
  const float tx = r(v[0] * 2.f), ty = r(v[1] * 2.f), tw = r(v[2] * 2.f), th = r(v[3] * 2.f);
  v[0] = r(r(tx + gx) * stride);
  v[1] = r(r(ty + gy) * stride);
  v[2] = r(r(tw * tw) * anchor_w);
  v[3] = r(r(th * th) * anchor_h);
}

// The box NMS compares: shifted by class * 7680 px unless agnostic (float adds, as the reference).
YOLOCU_HD Box nms_box(const Box& b, int class_id, bool agnostic) {
  if (agnostic) return b;
  const float off = static_cast<float>(class_id) * kClassOffset;
  return Box{b.x1 + off, b.y1 + off, b.x2 + off, b.y2 + off};
}

// IoU(a, b) > cut, a the earlier candidate, exactly as `box_iou(a, b) > cut` (geometry.hpp) for
// every cut >= 0 (nms_iou_cut's range), but without the division when the boxes do not overlap:
// then inter == 0 and box_iou returns +-0 or NaN, never > cut. Otherwise box_iou itself decides.
// Used by the CUDA NMS kernels (the CPU reference calls box_iou); equivalence tested on the CPU.
YOLOCU_HD bool iou_exceeds(const Box& a, const Box& b, float cut) {
  const float lt_x = a.x1 > b.x1 ? a.x1 : b.x1, lt_y = a.y1 > b.y1 ? a.y1 : b.y1;
  const float rb_x = a.x2 < b.x2 ? a.x2 : b.x2, rb_y = a.y2 < b.y2 ? a.y2 : b.y2;
  const float w = rb_x - lt_x > 0.f ? rb_x - lt_x : 0.f;
  const float h = rb_y - lt_y > 0.f ? rb_y - lt_y : 0.f;
  if (w * h == 0.f) return false;
  return box_iou(a, b) > cut;
}

// Bit operations of the bitmask NMS sweep, on the host and the device.
YOLOCU_HD int lowest_bit(uint64_t v) {  // v != 0
#if defined(__CUDA_ARCH__)
  return __ffsll(static_cast<long long>(v)) - 1;
#else
  return __builtin_ctzll(v);
#endif
}
YOLOCU_HD int bit_count(uint64_t v) {
#if defined(__CUDA_ARCH__)
  return __popcll(v);
#else
  return __builtin_popcountll(v);
#endif
}
YOLOCU_HD int highest_bit(uint64_t v) {  // v != 0
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(v));
#else
  return 63 - __builtin_clzll(v);
#endif
}

// Greedy NMS within one block of 64 consecutive candidates (canonical order) of the bitmask
// sweep. alive: bit a = candidate a exists and no earlier kept box removed it; diag_at(a): bit c
// (c > a) = candidate a suppresses candidate c; suppressors: bit a = diag_at(a) != 0; room: boxes
// still allowed (max_det - kept, >= 1). Returns the kept bits, as greedy NMS decides them: rows
// are visited in order but only those that suppress something (a kept row with an empty diagonal
// word changes no later decision), then the first `room` survivors are kept. diag_at is called
// with the same argument sequence on every caller (the kernel's version shuffles between lanes).
template <class DiagAt>
YOLOCU_HD uint64_t resolve_bitmask_block(uint64_t alive, uint64_t suppressors, DiagAt&& diag_at,
                                         int room) {
  uint64_t gone = ~alive;
  uint64_t todo = alive & suppressors;
  while (todo != 0) {
    const int a = lowest_bit(todo);
    gone |= diag_at(a);
    todo &= ~gone & ~(uint64_t{1} << a);
  }
  uint64_t kept = ~gone;
  while (bit_count(kept) > room) kept &= ~(uint64_t{1} << highest_bit(kept));
  return kept;
}

// scale_boxes + clip_boxes in float32 (the reference subtracts float(pad), divides by float(gain)):
// coordinates clamped to [lo, width] and [lo, height], lo 0 (or -inf, width and height +inf: not
// clipped).
struct ProjectParams {
  float pad_x, pad_y, gain_x, gain_y, width, height, lo;
};

// kContinuousPad (yolov5): pad = (dst - src * gain) / 2, one gain for both axes.
// kIntegerPad (ultralytics 8.x): pad = the integer left / top padding, gain per axis =
// new / src with new = max(round(src * gain), 1), as LetterBox rounds each side.
inline ProjectParams project_params(const LetterboxGeometry& g, BoxScaling scaling = BoxScaling::kContinuousPad,
                                    bool clip = true) {
  ProjectParams p{};
  if (scaling == BoxScaling::kIntegerPad) {
    const int new_w = g.new_w > 1 ? g.new_w : 1, new_h = g.new_h > 1 ? g.new_h : 1;
    p = ProjectParams{static_cast<float>(g.left), static_cast<float>(g.top),
                      static_cast<float>(static_cast<double>(new_w) / g.src_w),
                      static_cast<float>(static_cast<double>(new_h) / g.src_h),
                      static_cast<float>(g.src_w), static_cast<float>(g.src_h), 0.f};
  } else {
    const float gain = static_cast<float>(g.gain);
    p = ProjectParams{static_cast<float>(g.pad_x), static_cast<float>(g.pad_y), gain, gain,
                      static_cast<float>(g.src_w), static_cast<float>(g.src_h), 0.f};
  }
  if (!clip) {
    p.lo = -std::numeric_limits<float>::infinity();
    p.width = p.height = std::numeric_limits<float>::infinity();
  }
  return p;
}

YOLOCU_HD float clamp_coord(float v, float lo, float hi) {
  // torch.clamp_(lo, hi): NaN stays NaN
  const float lo_v = v < lo ? lo : v;
  return lo_v > hi ? hi : lo_v;
}

YOLOCU_HD Box project_box(const Box& b, const ProjectParams& p) {
  return Box{clamp_coord((b.x1 - p.pad_x) / p.gain_x, p.lo, p.width),
             clamp_coord((b.y1 - p.pad_y) / p.gain_y, p.lo, p.height),
             clamp_coord((b.x2 - p.pad_x) / p.gain_x, p.lo, p.width),
             clamp_coord((b.y2 - p.pad_y) / p.gain_y, p.lo, p.height)};
}

}  // namespace yolocu

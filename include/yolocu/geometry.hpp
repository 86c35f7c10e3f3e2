// yolocu/geometry.hpp - letterbox geometry and box math shared by the CPU reference and the CUDA
// kernels (every function is __host__ __device__ when compiled by nvcc), so that rounding rules,
// `>` versus `>=` and the IoU formula can never drift between implementations.
//
// Conventions (ultralytics/yolov5 v7.0, see docs/semantics.md):
//   boxes are x1, y1, x2, y2 in pixels, continuous coordinates (no +1 convention);
//   IoU = inter / (area_a + area_b - inter), no epsilon.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define YOLOCU_HD __host__ __device__ __forceinline__
#else
#define YOLOCU_HD inline
#endif

namespace yolocu {

// Python's round(): half to even.
YOLOCU_HD double round_half_even(double x) {
  const double r = ::floor(x + 0.5);
  // exactly halfway: choose the even neighbour
  if (r - x == 0.5) {
    const double half = r * 0.5;
    if (half != ::floor(half)) return r - 1.0;
  }
  return r;
}

// Where an image of src_w x src_h lands inside a dst_w x dst_h letterbox (scale-up allowed).
struct LetterboxGeometry {
  int src_w = 0, src_h = 0;   // original image
  int dst_w = 0, dst_h = 0;   // network input (e.g. 640 x 640)
  int new_w = 0, new_h = 0;   // resized image inside the letterbox
  int left = 0, top = 0;      // integer padding actually applied (odd pixel goes right/bottom)
  double gain = 1.0;          // r = min(dst_h / src_h, dst_w / src_w)
  double pad_x = 0, pad_y = 0;  // continuous padding used to map boxes back (not the integer pad)
};

YOLOCU_HD LetterboxGeometry letterbox_geometry(int src_w, int src_h, int dst_w, int dst_h) {
  LetterboxGeometry g;
  g.src_w = src_w;
  g.src_h = src_h;
  g.dst_w = dst_w;
  g.dst_h = dst_h;
  const double rh = static_cast<double>(dst_h) / src_h, rw = static_cast<double>(dst_w) / src_w;
  const double r = rh < rw ? rh : rw;
  g.gain = r;
  // ultralytics: new_unpad = int(round(w * r)), int(round(h * r)); dw, dh = (dst - new) / 2;
  // top = int(round(dh - 0.1)), left = int(round(dw - 0.1))
  g.new_w = static_cast<int>(round_half_even(src_w * r));
  g.new_h = static_cast<int>(round_half_even(src_h * r));
  const double dw = (dst_w - g.new_w) / 2.0, dh = (dst_h - g.new_h) / 2.0;
  g.left = static_cast<int>(round_half_even(dw - 0.1));
  g.top = static_cast<int>(round_half_even(dh - 0.1));
  // scale_boxes: pad = (img1_shape[1] - img0_shape[1] * gain) / 2 (continuous)
  g.pad_x = (dst_w - src_w * r) / 2.0;
  g.pad_y = (dst_h - src_h * r) / 2.0;
  return g;
}

struct Box {
  float x1, y1, x2, y2;
};

YOLOCU_HD float box_area(const Box& b) { return (b.x2 - b.x1) * (b.y2 - b.y1); }

// torchvision.ops.box_iou arithmetic in float: inter / (area_a + area_b - inter).
YOLOCU_HD float box_iou(const Box& a, const Box& b) {
  const float lt_x = a.x1 > b.x1 ? a.x1 : b.x1;
  const float lt_y = a.y1 > b.y1 ? a.y1 : b.y1;
  const float rb_x = a.x2 < b.x2 ? a.x2 : b.x2;
  const float rb_y = a.y2 < b.y2 ? a.y2 : b.y2;
  const float w = rb_x - lt_x > 0.f ? rb_x - lt_x : 0.f;
  const float h = rb_y - lt_y > 0.f ? rb_y - lt_y : 0.f;
  const float inter = w * h;
  return inter / (box_area(a) + box_area(b) - inter);
}

}  // namespace yolocu

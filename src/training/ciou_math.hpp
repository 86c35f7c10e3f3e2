// Internal: the CIoU forward/backward arithmetic, shared by the CPU reference and the CUDA kernels
// (one source, so the two can never drift). T is float or double.
//
// Forward follows ultralytics' bbox_iou(xywh=True, CIoU=True) operation by operation; on the
// device every product/sum/quotient is explicitly rounded (__fmul_rn, ...) so nvcc cannot fuse
// them into FMAs, which keeps the float32 result bit-identical to PyTorch's unfused kernels.
// Backward is the derivative with alpha held constant and PyTorch's tie rules (see ciou.hpp).
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define YOLOCU_HD __host__ __device__ __forceinline__
#else
#define YOLOCU_HD inline
#endif

namespace yolocu::training::detail {

YOLOCU_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
YOLOCU_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
YOLOCU_HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
YOLOCU_HD float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
YOLOCU_HD double mul_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
YOLOCU_HD double add_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
YOLOCU_HD double sub_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
YOLOCU_HD double div_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
YOLOCU_HD float atan_of(float a) { return atanf(a); }
YOLOCU_HD double atan_of(double a) { return atan(a); }
template <typename T>
YOLOCU_HD T max_of(T a, T b) {
  return a > b ? a : b;
}
template <typename T>
YOLOCU_HD T min_of(T a, T b) {
  return a < b ? a : b;
}
// PyTorch's maximum/minimum backward: the larger (smaller) side gets the gradient, a tie splits it.
template <typename T>
YOLOCU_HD T share_max(T a, T b) {
  return a > b ? T(1) : (a == b ? T(0.5) : T(0));
}
template <typename T>
YOLOCU_HD T share_min(T a, T b) {
  return a < b ? T(1) : (a == b ? T(0.5) : T(0));
}

// Everything the forward computes for one box pair; the backward reuses it.
template <typename T>
struct CiouTerms {
  T x1, x2, y1, y2, X1, X2, Y1, Y2;  // corners of the prediction (lower case) and the target
  T iw_raw, ih_raw, iw, ih, inter, uni, iou, cw, ch, c2, sx, sy, rho2, dat, v, alpha, ciou;
};

// p = (x, y, w, h) prediction, t = (X, Y, W, H) target.
template <typename T>
YOLOCU_HD CiouTerms<T> ciou_terms(const T* p, const T* t, double eps_in) {
  const T eps = static_cast<T>(eps_in);  // Python's eps as a T scalar operand
  CiouTerms<T> r;
  const T hw1 = mul_rn(p[2], T(0.5)), hh1 = mul_rn(p[3], T(0.5));
  const T hw2 = mul_rn(t[2], T(0.5)), hh2 = mul_rn(t[3], T(0.5));
  r.x1 = sub_rn(p[0], hw1);
  r.x2 = add_rn(p[0], hw1);
  r.y1 = sub_rn(p[1], hh1);
  r.y2 = add_rn(p[1], hh1);
  r.X1 = sub_rn(t[0], hw2);
  r.X2 = add_rn(t[0], hw2);
  r.Y1 = sub_rn(t[1], hh2);
  r.Y2 = add_rn(t[1], hh2);
  r.iw_raw = sub_rn(min_of(r.x2, r.X2), max_of(r.x1, r.X1));
  r.ih_raw = sub_rn(min_of(r.y2, r.Y2), max_of(r.y1, r.Y1));
  r.iw = max_of(r.iw_raw, T(0));
  r.ih = max_of(r.ih_raw, T(0));
  r.inter = mul_rn(r.iw, r.ih);
  r.uni = add_rn(sub_rn(add_rn(mul_rn(p[2], p[3]), mul_rn(t[2], t[3])), r.inter), eps);
  r.iou = div_rn(r.inter, r.uni);
  r.cw = sub_rn(max_of(r.x2, r.X2), min_of(r.x1, r.X1));
  r.ch = sub_rn(max_of(r.y2, r.Y2), min_of(r.y1, r.Y1));
  r.c2 = add_rn(add_rn(mul_rn(r.cw, r.cw), mul_rn(r.ch, r.ch)), eps);
  r.sx = sub_rn(sub_rn(add_rn(r.X1, r.X2), r.x1), r.x2);
  r.sy = sub_rn(sub_rn(add_rn(r.Y1, r.Y2), r.y1), r.y2);
  r.rho2 = mul_rn(add_rn(mul_rn(r.sx, r.sx), mul_rn(r.sy, r.sy)), T(0.25));
  r.dat = sub_rn(atan_of(div_rn(t[2], t[3])), atan_of(div_rn(p[2], p[3])));
  // 4/pi^2 as Python computes it (double), then rounded to T like a scalar operand.
  r.v = mul_rn(T(0.40528473456935108577551785283891), mul_rn(r.dat, r.dat));
  r.alpha = div_rn(r.v, add_rn(sub_rn(r.v, r.iou), static_cast<T>(1.0 + eps_in)));
  r.ciou = sub_rn(r.iou, add_rn(div_rn(r.rho2, r.c2), mul_rn(r.v, r.alpha)));
  return r;
}

// d(g * ciou)/d(x, y, w, h) of the prediction into grad[0..3].
template <typename T>
YOLOCU_HD void ciou_grad(const T* p, const T* t, double eps, T g, T* grad) {
  const CiouTerms<T> r = ciou_terms(p, t, eps);
  const T w = p[2], h = p[3];
  const T u2 = r.uni * r.uni;
  const T g_inter = g * (r.uni + r.inter) / u2;       // d iou / d inter = (U + I) / U^2
  const T g_area = -g * r.inter / u2;                 // d iou / d (w*h)
  const T g_c2 = g * r.rho2 / (r.c2 * r.c2);          // d ciou / d c2
  const T g_rho2 = -g / r.c2;                         // d ciou / d rho2
  const T mx = r.iw_raw >= T(0) ? T(1) : T(0);        // clamp(0) passes the gradient at 0
  const T my = r.ih_raw >= T(0) ? T(1) : T(0);
  const T gx2 = g_inter * r.ih * mx * share_min(r.x2, r.X2) + g_c2 * 2 * r.cw * share_max(r.x2, r.X2) -
                g_rho2 * r.sx / 2;
  const T gx1 = -g_inter * r.ih * mx * share_max(r.x1, r.X1) - g_c2 * 2 * r.cw * share_min(r.x1, r.X1) -
                g_rho2 * r.sx / 2;
  const T gy2 = g_inter * r.iw * my * share_min(r.y2, r.Y2) + g_c2 * 2 * r.ch * share_max(r.y2, r.Y2) -
                g_rho2 * r.sy / 2;
  const T gy1 = -g_inter * r.iw * my * share_max(r.y1, r.Y1) - g_c2 * 2 * r.ch * share_min(r.y1, r.Y1) -
                g_rho2 * r.sy / 2;
  // v = (4/pi^2) (atan(W/H) - atan(w/h))^2;  d atan(w/h) / dw = h / (w^2 + h^2).
  const T g_aspect = g * r.alpha * T(0.81056946913870217155103570567782) * r.dat / (w * w + h * h);
  grad[0] = gx1 + gx2;
  grad[1] = gy1 + gy2;
  grad[2] = (gx2 - gx1) / 2 + g_area * h + g_aspect * h;
  grad[3] = (gy2 - gy1) / 2 + g_area * w - g_aspect * w;
}

}  // namespace yolocu::training::detail

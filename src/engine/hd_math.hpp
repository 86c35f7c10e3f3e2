// Scalar float operations shared by the fused kernels' host references and their CUDA kernels
// (detect_tail.hpp, v8_tail.hpp, attention.hpp, cuda/int8/int8_math.hpp): on the device each rounds as the host's IEEE operation does (no
// fused multiply-add contraction, exact division), so that a kernel and its host reference agree.
#pragma once

#include <cmath>

#include "yolocu/geometry.hpp"  // YOLOCU_HD

namespace yolocu::engine::hd {

YOLOCU_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
YOLOCU_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
YOLOCU_HD float fma(float a, float b, float c) {  // one rounding on both sides
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
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

}  // namespace yolocu::engine::hd

// Scalar float operations shared by the fused kernels' host references and their CUDA kernels
// (v8_tail.hpp, attention.hpp): on the device each rounds as the host's IEEE operation does (no
// fused multiply-add contraction, exact division), so that a kernel and its host reference agree.
#pragma once

#include <cmath>

#include "yolocu/geometry.hpp"  // YOLOCU_HD

namespace yolocu::engine::hd {

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

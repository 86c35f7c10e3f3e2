// Internal: per-element EMA and SGD arithmetic shared by the CPU reference and the CUDA kernel.
// The roundings are spelled out (explicit fma / rounded products) so host and device agree bit
// for bit and so nvcc cannot contract differently from the reference.
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define YOLOCU_HD_MT __host__ __device__ __forceinline__
#else
#define YOLOCU_HD_MT inline
#endif

namespace yolocu::training::detail {

YOLOCU_HD_MT float fmul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
YOLOCU_HD_MT float fadd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
YOLOCU_HD_MT float ffma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// e <- fl(fl(e * d) + fl(one_minus_d * m)), ultralytics' `v *= d; v += (1 - d) * m`.
YOLOCU_HD_MT float ema_element(float e, float m, float d, float one_minus_d) {
  return fadd(fmul(e, d), fmul(one_minus_d, m));
}

// Per-group SGD constants, already rounded to float like PyTorch's scalar operands.
struct SgdConsts {
  float lr, momentum, one_minus_dampening, weight_decay;
  int nesterov;
};

// One SGD element update; p and buf are updated in place. grad is only read.
YOLOCU_HD_MT void sgd_element(float& p, float grad, float& buf, const SgdConsts& k, bool first_step) {
  float g = grad;
  if (k.weight_decay != 0.0f) g = ffma(k.weight_decay, p, g);
  if (k.momentum != 0.0f) {
    if (first_step)
      buf = g;
    else
      buf = ffma(k.one_minus_dampening, g, fmul(buf, k.momentum));
    g = k.nesterov ? ffma(k.momentum, buf, g) : buf;
  }
  p = ffma(-k.lr, g, p);
}

}  // namespace yolocu::training::detail

// The float math of the INT8 convolution's epilogue and of the fp16 <-> int8 boundary kernels, one
// __host__ __device__ definition shared by the kernels (conv_int8_kernel.cu, int8_convert.cu) and by
// host references, so that both compute bit-identical floats:
//   v = fmaf(float(acc), scale[k], bias[k])           scale[k] = x_scale * w_scale[k] (the caller's)
//   v = v / (1 + exp(-v))                             SiLU (optional), exp below, IEEE division
//   v = fmaf(float(r), r_scale, v)  or  v = v + r     residual (optional): int8 with its scale, or fp16
//   int8 out:  q = saturate(round_half_even(v / y_scale)) to [-128, 127]; NaN -> 0
//   fp16 out:  __float2half_rn(v)
// Quantisation is symmetric (zero point 0), as ONNX QuantizeLinear with an int8 zero point of 0
// (which divides by the scale; so do we).
// Why it is bit-identical on both sides: every step is either one correctly rounded IEEE operation
// (add, multiply, divide, fmaf, rint) or an integer / exponent-bit operation. nvcc fuses a multiply
// followed by an add into an fma by default (--fmad=true), also across inlined functions, so the
// device side spells add / multiply / divide with the __f*_rn intrinsics, which are never fused.
// The host side relies on the compiler not fusing either: true for x86-64 builds without -mfma /
// -march=native (the project's flags); a host build with FMA contraction must use -ffp-contract=off.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/hd_math.hpp"  // add / mul / div / fma rounded alike on both sides

#if defined(__CUDACC__)
#define YOLOCU_I8_HD __host__ __device__ __forceinline__
#else
#define YOLOCU_I8_HD inline
#endif

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace yolocu::engine::int8 {

YOLOCU_I8_HD float add_rn(float a, float b) { return hd::add(a, b); }
YOLOCU_I8_HD float mul_rn(float a, float b) { return hd::mul(a, b); }
YOLOCU_I8_HD float div_rn(float a, float b) { return hd::div(a, b); }
YOLOCU_I8_HD float fma_rn(float a, float b, float c) { return hd::fma(a, b, c); }
YOLOCU_I8_HD float rint_even(float v) {  // round half to even (the default rounding mode on the host)
#if defined(__CUDA_ARCH__)
  return rintf(v);
#else
  return std::nearbyintf(v);
#endif
}
YOLOCU_I8_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
YOLOCU_I8_HD float i2f(int32_t v) {  // round to nearest even (exact below 2^24)
#if defined(__CUDA_ARCH__)
  return __int2float_rn(v);
#else
  return static_cast<float>(v);
#endif
}

// e^x within 2 ulp of the exact value for x in [-87, 88] (Cephes' expf: x = n ln2 + r, |r| <= ln2/2,
// a degree-6 polynomial for e^r, times 2^n built from its exponent bits); 0 below, +inf above
// (e^-87 is still a normal float). NaN in, NaN out.
YOLOCU_I8_HD float exp_f32(float x) {
  if (x > 88.f) return bits_to_float(0x7f800000u);
  if (x < -87.f) return 0.f;
  if (!(x == x)) return x;
  const float n = rint_even(mul_rn(x, 1.44269504088896341f));
  float r = fma_rn(n, -0.693359375f, x);  // ln2 in two parts: n * hi is exact
  r = fma_rn(n, 2.12194440e-4f, r);
  const float z = mul_rn(r, r);
  float p = 1.9875691500e-4f;
  p = fma_rn(p, r, 1.3981999507e-3f);
  p = fma_rn(p, r, 8.3334519073e-3f);
  p = fma_rn(p, r, 4.1665795894e-2f);
  p = fma_rn(p, r, 1.6666665459e-1f);
  p = fma_rn(p, r, 5.0000001201e-1f);
  const float e_r = add_rn(fma_rn(p, z, r), 1.f);
  const int ni = static_cast<int>(n);  // in [-126, 127]
  return mul_rn(e_r, bits_to_float(static_cast<uint32_t>(ni + 127) << 23));
}

YOLOCU_I8_HD float silu_f32(float v) { return div_rn(v, add_rn(1.f, exp_f32(-v))); }

// The convolution's value before the residual: acc * scale + bias, SiLU optional.
YOLOCU_I8_HD float conv_value(int32_t acc, float scale, float bias, bool silu) {
  const float v = fma_rn(i2f(acc), scale, bias);
  return silu ? silu_f32(v) : v;
}
YOLOCU_I8_HD float add_residual_i8(float v, int8_t r, float r_scale) { return fma_rn(i2f(r), r_scale, v); }
YOLOCU_I8_HD float add_residual_f32(float v, float r) { return add_rn(v, r); }

// saturate(round_half_even(v / scale)); NaN -> 0.
YOLOCU_I8_HD int8_t quantize(float v, float scale) {
  float q = rint_even(div_rn(v, scale));
  if (!(q == q)) return 0;
  q = q < -128.f ? -128.f : q;
  q = q > 127.f ? 127.f : q;
  return static_cast<int8_t>(q);
}
// float(q) * scale (exact products of int8 with a float are rounded once).
YOLOCU_I8_HD float dequantize(int8_t q, float scale) { return mul_rn(i2f(q), scale); }

}  // namespace yolocu::engine::int8

#undef YOLOCU_I8_HD

// The float math of the INT8 convolution's epilogue and of the fp16 <-> int8 boundary kernels, one
// __host__ __device__ definition shared by the kernels (conv_int8_kernel.cu, conv_int8_sm90.cu,
// int8_convert.cu) and by host references, so that both compute bit-identical floats (SiLU apart):
//   v = fmaf(float(acc), scale[k], bias[k])           scale[k] = x_scale * w_scale[k] (the caller's)
//   v = v * rcp(1 + exp(-v))                          SiLU (optional), exp and rcp below
//   v = fmaf(float(r), r_scale, v)  or  v = v + r     residual (optional): int8 with its scale, or fp16
//   int8 out:  q = saturate(round_half_even(v * (1 / y_scale))) to [-128, 127]; NaN -> 0
//   fp16 out:  __float2half_rn(v)
// Quantisation is symmetric (zero point 0). Quantising a tensor (quantize: the fp16 -> int8 kernels,
// the weights, simulated INT8) divides, as ONNX QuantizeLinear: the quotient is the IEEE one,
// computed from the reciprocal 1 / scale (rounded once, per tensor) and one correction (div_by
// below). A convolution's epilogue requantises its output with the product by the rounded
// reciprocal alone (requantize): within an ulp of the quotient, so the two differ only where v / s
// lies that close to a half-integer, and it takes one instruction where the division takes five.
// Why it is bit-identical on both sides (all but SiLU on the device, below): every step is either
// one correctly rounded IEEE operation (add, multiply, fmaf, the reciprocal) or an integer /
// exponent-bit / min / max / select operation. nvcc fuses a multiply followed by an add into an
// fma by default (--fmad=true), also across inlined functions, so the device side spells add /
// multiply with the __f*_rn intrinsics, which are never fused. The host side relies on the
// compiler not fusing either: true for x86-64 builds without -mfma / -march=native (the project's
// flags); a host build with FMA contraction must use -ffp-contract=off.
// Why it is cheap on the device: no division instruction sequence (a range check and a slow-path
// branch per output) and no branch (so the compiler interleaves a thread's elements); the
// quantising division is a product and two fused multiply-adds. SiLU on the device is the
// hardware's 2^t and reciprocal approximations (six instructions where the exact form takes
// eighteen: in the kernels' epilogue it was the largest cost): within 2e-6 of the host's form,
// relative (test_int8_math_cuda), so the int8 and fp16 outputs of a SiLU layer equal the host
// reference's except where its value lies that close to a rounding boundary. Every kernel runs the
// same instructions, so every kernel's outputs still equal each other's bit for bit.
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
YOLOCU_I8_HD float sub_rn(float a, float b) { return hd::sub(a, b); }
YOLOCU_I8_HD float mul_rn(float a, float b) { return hd::mul(a, b); }
YOLOCU_I8_HD float div_rn(float a, float b) { return hd::div(a, b); }
YOLOCU_I8_HD float fma_rn(float a, float b, float c) { return hd::fma(a, b, c); }
// C's fminf / fmaxf, CUDA's on the device: the number if one operand is NaN, on both sides.
YOLOCU_I8_HD float min_f(float a, float b) { return fminf(a, b); }
YOLOCU_I8_HD float max_f(float a, float b) { return fmaxf(a, b); }
// Round half to even for |v| <= 2^22: adding 1.5 * 2^23 leaves no fraction bits (two additions, no
// rounding-mode state and no conversion instruction).
constexpr float kRoundMagic = 12582912.f;  // 1.5 * 2^23, bits 0x4b400000
YOLOCU_I8_HD float round_small(float v) { return sub_rn(add_rn(v, kRoundMagic), kRoundMagic); }
YOLOCU_I8_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
YOLOCU_I8_HD uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
YOLOCU_I8_HD float i2f(int32_t v) {  // round to nearest even (exact below 2^24)
#if defined(__CUDA_ARCH__)
  return __int2float_rn(v);
#else
  return static_cast<float>(v);
#endif
}

// 1 / d rounded to nearest, for d in [1, 2^126) (where 1 / d is a normal float): on the device the
// hardware's approximation (within one ulp) and one Newton step, e = fma(-d, y, 1), y + y * e, with
// fused multiply-adds; on the host the IEEE division.
YOLOCU_I8_HD float rcp_rn(float d) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(d));
  return __fmaf_rn(y, __fmaf_rn(-d, y, 1.f), y);
#else
  return 1.f / d;
#endif
}

// 2^t for t clamped to [-125, 125] (NaN becomes -125), within 2e-7 relative: t = n + f with
// n = round_half_even(t) and f = t - n in [-0.5, 0.5] (exact), a degree-5 polynomial for 2^f (fitted
// for relative error), and n added to its exponent field as an integer. Branch-free; the clamp keeps
// 2^t normal and SiLU's 1 + 2^t inside rcp_rn's range.
YOLOCU_I8_HD float exp2_clamped(float t) {
  t = min_f(max_f(t, -125.f), 125.f);
  const float big = add_rn(t, kRoundMagic);  // kRoundMagic + n: n in its low mantissa bits
  const float f = sub_rn(t, sub_rn(big, kRoundMagic));
  float p = 1.32646982e-3f;
  p = fma_rn(p, f, 9.67150927e-3f);
  p = fma_rn(p, f, 5.55073395e-2f);
  p = fma_rn(p, f, 2.40222424e-1f);
  p = fma_rn(p, f, 6.93147004e-1f);
  p = fma_rn(p, f, 1.f);  // in [2^-0.5, 2^0.5]: its exponent field is 126 or 127
  // bits(big) << 23 keeps n's bits alone (kRoundMagic's own bits shift out): p's exponent + n
  return bits_to_float(float_to_bits(p) + (float_to_bits(big) << 23));
}
constexpr float kLog2e = 1.44269504088896341f;
// e^x as 2^(x log2 e): x effectively clamped to [-86.6, 86.6]; the product's roundings cost up to
// |x| * 8e-8 relative (7e-6 at the clamp), which the int8 and fp16 outputs cannot show.
YOLOCU_I8_HD float exp_clamped(float x) { return exp2_clamped(mul_rn(x, kLog2e)); }

// SiLU: v * rcp(1 + e^-v). Below v = -86.6 the clamp leaves v * 2^-125 (|v| / 4e37, where the
// exact value is smaller still): 0 once quantised with a scale above |v| / 2e37, or converted to
// fp16. On the device 2^t and the reciprocal are the hardware's approximations (ex2.approx and
// rcp.approx, flushing subnormals; t clamped above as here, so that v = -inf gives -inf, not NaN).
YOLOCU_I8_HD float silu_f32(float v) {
#if defined(__CUDA_ARCH__)
  const float t = fminf(__fmul_rn(v, -kLog2e), 125.f);
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(t));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(__fadd_rn(1.f, e)));
  return __fmul_rn(v, r);
#else
  return mul_rn(v, rcp_rn(add_rn(1.f, exp2_clamped(mul_rn(v, -kLog2e)))));
#endif
}
// How far the device's SiLU may lie from the host's, relative (test_int8_math_cuda measures it;
// the kernels' tests accept an output differing from the host reference only where the host's
// value moved this much would round the other way).
constexpr float kSiluDeviceTolerance = 2e-6f;

// The convolution's value before the residual: acc * scale + bias, SiLU optional.
YOLOCU_I8_HD float conv_value(int32_t acc, float scale, float bias, bool silu) {
  const float v = fma_rn(i2f(acc), scale, bias);
  return silu ? silu_f32(v) : v;
}
YOLOCU_I8_HD float add_residual_i8(float v, int8_t r, float r_scale) { return fma_rn(i2f(r), r_scale, v); }
YOLOCU_I8_HD float add_residual_f32(float v, float r) { return add_rn(v, r); }

// A tensor's scale with its reciprocal, computed once per tensor (on the host for the kernels).
struct Scale {
  float s = 1.f;
  float inv = 1.f;  // 1 / s, rounded once
};
YOLOCU_I8_HD Scale make_scale(float s) { return {s, div_rn(1.f, s)}; }

// v / s rounded as the IEEE division rounds it, without a division: q = v * inv, then one
// correction with the exact residual, q + fma(-q, s, v) * inv (Markstein's: with inv the rounded
// reciprocal and q within an ulp, the corrected quotient is the rounded one; Int8Math's tests check
// it against the division on the host). Where the product overflows (or v is infinite) the residual
// is NaN and q itself is the quotient's infinity; NaN stays NaN.
YOLOCU_I8_HD float div_by(float v, Scale sc) {
  const float q = mul_rn(v, sc.inv);
  const float c = fma_rn(fma_rn(-q, sc.s, v), sc.inv, q);
  return c == c ? c : q;
}

// saturate(round_half_even(v / s)) as a float holding the integer; NaN -> 0. Branch-free.
YOLOCU_I8_HD float quantize_value(float v, Scale sc) {
  const float x = div_by(v, sc);
  const float q = round_small(min_f(max_f(x, -128.f), 127.f));  // the bounds are integers: clamp first
  return x == x ? q : 0.f;
}
YOLOCU_I8_HD int8_t quantize(float v, Scale sc) { return static_cast<int8_t>(quantize_value(v, sc)); }
// The epilogue's requantisation: saturate(round_half_even(v * sc.inv)) as a float holding the
// integer; NaN -> 0. (Hopper's kernels leave the product to CUTLASS's conversion to int8, which
// rounds and saturates alike and gives 0 for NaN: sm90_conv_epilogue.cuh.)
YOLOCU_I8_HD float requantize_value(float v, Scale sc) {
  const float x = mul_rn(v, sc.inv);
  const float q = round_small(min_f(max_f(x, -128.f), 127.f));
  return x == x ? q : 0.f;
}
YOLOCU_I8_HD int8_t requantize(float v, Scale sc) { return static_cast<int8_t>(requantize_value(v, sc)); }
// quantize with the scale itself (host code; device code passes make_scale(s) computed once).
YOLOCU_I8_HD int8_t quantize(float v, float scale) { return quantize(v, make_scale(scale)); }
// float(q) * scale (exact products of int8 with a float are rounded once).
YOLOCU_I8_HD float dequantize(int8_t q, float scale) { return mul_rn(i2f(q), scale); }

}  // namespace yolocu::engine::int8

#undef YOLOCU_I8_HD

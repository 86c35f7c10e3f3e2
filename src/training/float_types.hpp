// Internal: host-side 16-bit float storage helpers for the CPU references.
#pragma once

#include <cstdint>
#include <cstring>

#include "yolocu/tensor.hpp"
#include "yolocu/training/common.hpp"

namespace yolocu::training::detail {

struct Half16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float to_float(Half16 v) { return half_to_float(v.bits); }
inline float to_float(BFloat16 v) {
  const uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays a (quiet) NaN.
inline BFloat16 to_bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

// Accumulation type and conversions used by the CPU references, mirroring the kernels.
template <typename T>
struct Acc {
  using type = T;  // float -> float, double -> double
  static type load(T v) { return v; }
  static T store(type v) { return v; }
};
template <>
struct Acc<Half16> {
  using type = float;
  static float load(Half16 v) { return to_float(v); }
  static Half16 store(float v) { return Half16{float_to_half(v)}; }
};
template <>
struct Acc<BFloat16> {
  using type = float;
  static float load(BFloat16 v) { return to_float(v); }
  static BFloat16 store(float v) { return to_bfloat16(v); }
};

}  // namespace yolocu::training::detail

#include "yolocu/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>

#include "core/check.hpp"

namespace yolocu {

size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kInt64: return 8;
    case DType::kInt32: return 4;
    case DType::kInt8: return 1;
    case DType::kUInt8: return 1;
    case DType::kBool: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
  }
  return "?";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    YOLOCU_CHECK(d >= 0, kInvalidArgument, "negative dimension in shape ", shape_str(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      detail::fail(ErrorCode::kInvalidArgument, "shape ", shape_str(shape), " overflows int64");
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  // Refuse absurd sizes before asking the allocator (1 TiB is far beyond any YOLO tensor).
  const int64_t limit = (int64_t{1} << 40) / static_cast<int64_t>(dtype_size(dtype_));
  YOLOCU_CHECK(numel_ <= limit, kOutOfMemory, "tensor of shape ", shape_str(shape_), " (",
               dtype_name(dtype_), ") is too large to allocate");
  const size_t bytes = std::max<size_t>(nbytes(), 1);
  try {
    data_ = std::shared_ptr<uint8_t[]>(new uint8_t[bytes]());
  } catch (const std::bad_alloc&) {
    detail::fail(ErrorCode::kOutOfMemory, "cannot allocate ", bytes, " bytes for a tensor of shape ", shape_str(shape_),
                 " (", dtype_name(dtype_), "): out of host memory (the machine's, a ulimit -v or cgroup limit)");
  }
}

Tensor Tensor::view(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.data_ = std::shared_ptr<uint8_t[]>(std::shared_ptr<uint8_t[]>(), static_cast<uint8_t*>(data));
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data(), data(), nbytes());
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  YOLOCU_CHECK(shape_numel(shape) == numel_, kInvalidArgument, "cannot reshape ", shape_str(shape_),
               " to ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

uint16_t float_to_half(float f) noexcept {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);  // rounds to zero
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((absx - 0x38000000u) >> 13);
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {
double load_as_double(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data_as<float>()[i];
    case DType::kFloat16: return half_to_float(t.data_as<uint16_t>()[i]);
    case DType::kFloat64: return t.data_as<double>()[i];
    case DType::kInt64: return static_cast<double>(t.data_as<int64_t>()[i]);
    case DType::kInt32: return t.data_as<int32_t>()[i];
    case DType::kInt8: return t.data_as<int8_t>()[i];
    case DType::kUInt8: return t.data_as<uint8_t>()[i];
    case DType::kBool: return t.data_as<uint8_t>()[i] ? 1.0 : 0.0;
  }
  return 0;
}
}  // namespace

Tensor cast_tensor(const Tensor& t, DType to) {
  if (t.dtype() == to) return t.clone();
  Tensor out(to, t.shape());
  const int64_t n = t.numel();
  // int64 -> int64-ish paths keep exactness; everything else goes through double (exact for the
  // float/int32 ranges involved).
  if (t.dtype() == DType::kInt64 && to == DType::kInt32) {
    for (int64_t i = 0; i < n; ++i) out.data_as<int32_t>()[i] = static_cast<int32_t>(t.data_as<int64_t>()[i]);
    return out;
  }
  if (t.dtype() == DType::kFloat32 && to == DType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) out.data_as<uint16_t>()[i] = float_to_half(t.data_as<float>()[i]);
    return out;
  }
  // To an integer type: an integer source wraps (two's complement, as a C++ integer conversion
  // does); a float source is truncated and saturated, NaN -> 0 (a float -> int cast of an
  // out-of-range value is undefined; found by fuzzing: Cast of 1638.0 to uint8).
  const bool int_source = !(t.dtype() == DType::kFloat32 || t.dtype() == DType::kFloat16 || t.dtype() == DType::kFloat64);
  auto to_int64 = [&](int64_t i, double v) -> int64_t {
    if (int_source) return t.dtype() == DType::kInt64 ? t.data_as<int64_t>()[i] : static_cast<int64_t>(v);
    if (std::isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
    if (v < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(std::trunc(v));
  };
  auto saturate = [&](int64_t x, int64_t lo, int64_t hi) { return int_source ? x : std::clamp(x, lo, hi); };
  for (int64_t i = 0; i < n; ++i) {
    const double v = load_as_double(t, i);
    switch (to) {
      case DType::kFloat32: out.data_as<float>()[i] = static_cast<float>(v); break;
      case DType::kFloat16: out.data_as<uint16_t>()[i] = float_to_half(static_cast<float>(v)); break;
      case DType::kFloat64: out.data_as<double>()[i] = v; break;
      case DType::kInt64: out.data_as<int64_t>()[i] = to_int64(i, v); break;
      case DType::kInt32:
        out.data_as<int32_t>()[i] = static_cast<int32_t>(saturate(to_int64(i, v), INT32_MIN, INT32_MAX));
        break;
      case DType::kInt8: out.data_as<int8_t>()[i] = static_cast<int8_t>(saturate(to_int64(i, v), INT8_MIN, INT8_MAX)); break;
      case DType::kUInt8: out.data_as<uint8_t>()[i] = static_cast<uint8_t>(saturate(to_int64(i, v), 0, UINT8_MAX)); break;
      case DType::kBool: out.data_as<uint8_t>()[i] = v != 0.0; break;
    }
  }
  return out;
}

}  // namespace yolocu

// yolocu/tensor.hpp - host tensors: element types, shapes and an owning, contiguous buffer.
//
// Tensor owns its bytes (shared between copies: a Tensor is a cheap handle, clone() deep-copies).
// Layout is always dense row-major (C order) in the shape given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace yolocu {

enum class DType : int32_t { kFloat32, kFloat16, kFloat64, kInt64, kInt32, kInt8, kUInt8, kBool };

size_t dtype_size(DType t) noexcept;
const char* dtype_name(DType t) noexcept;

using Shape = std::vector<int64_t>;

// Number of elements; throws kInvalidArgument on a negative dimension or int64 overflow.
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Allocates numel(shape) * dtype_size(dtype) zero-initialised bytes.
  Tensor(DType dtype, Shape shape);

  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const noexcept { return shape_.size(); }
  int64_t numel() const noexcept { return numel_; }
  size_t nbytes() const noexcept { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  bool empty() const noexcept { return !data_; }

  void* data() noexcept { return data_.get(); }
  const void* data() const noexcept { return data_.get(); }
  template <typename T>
  T* data_as() noexcept { return static_cast<T*>(data()); }
  template <typename T>
  const T* data_as() const noexcept { return static_cast<const T*>(data()); }

  // Non-owning view over caller memory (the caller keeps it alive and sized).
  static Tensor view(DType dtype, Shape shape, void* data);

  Tensor clone() const;
  // Same bytes, new shape with the same element count (shares storage).
  Tensor reshaped(Shape shape) const;

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<uint8_t[]> data_;
};

// IEEE 754 binary16 <-> binary32, round to nearest even (host side, no hardware needed).
uint16_t float_to_half(float f) noexcept;
float half_to_float(uint16_t h) noexcept;

// Converts between float types (f32/f16/f64) and int types; throws kUnsupported otherwise.
Tensor cast_tensor(const Tensor& t, DType to);

}  // namespace yolocu

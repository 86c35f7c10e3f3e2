// ONNX attributes for models built in C++ by the engine tests (op_cases.hpp's edge shapes, the
// synthetic v8 heads and attention blocks).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "yolocu/model.hpp"

namespace yolocu::test {

inline Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
inline Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline Attribute string_attr(const std::string& s) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = s;
  return a;
}

}  // namespace yolocu::test

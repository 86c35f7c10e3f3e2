// Internal to the CPU op library (ops.cpp and its op-family files): argument checks, strides and
// broadcasting loops, the numeric-type dispatch; the declarations of the op families' shape
// inference and compute functions that ops.cpp's registry lists.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <vector>

#include "core/check.hpp"
#include "engine/ops.hpp"

namespace yolocu::ops::internal {

using detail::fail;
using In = std::vector<const Tensor*>;
using Out = std::vector<Tensor*>;
using Metas = std::vector<ValueMeta>;

constexpr int64_t kParallelMin = 1 << 15;  // elements below which loops stay single-threaded

inline void need_inputs(const Node& n, const Metas& in, size_t lo, size_t hi) {
  size_t present = in.size();
  while (present > 0 && !in[present - 1].present) --present;
  YOLOCU_CHECK(present >= lo && present <= hi, kParse, n.describe(), ": expects ", lo,
               lo == hi ? "" : detail::cat(" to ", hi), " inputs, has ", present);
  for (size_t i = 0; i < lo; ++i)
    YOLOCU_CHECK(in[i].present, kParse, n.describe(), ": required input ", i, " is missing");
}

inline const ValueMeta* opt(const Metas& in, size_t i) { return i < in.size() && in[i].present ? &in[i] : nullptr; }
inline const Tensor* opt(const In& in, size_t i) { return i < in.size() ? in[i] : nullptr; }

// Overflow-checked int64 arithmetic for shape inference: kInvalidArgument naming the node and
// what was computed ("<what> overflows int64"), never a wrapped value.
inline int64_t checked_add(const Node& n, int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  YOLOCU_CHECK(!__builtin_add_overflow(a, b, &r), kInvalidArgument, n.describe(), ": ", what, " (", a, " + ", b,
               ") overflows int64");
  return r;
}
inline int64_t checked_sub(const Node& n, int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  YOLOCU_CHECK(!__builtin_sub_overflow(a, b, &r), kInvalidArgument, n.describe(), ": ", what, " (", a, " - ", b,
               ") overflows int64");
  return r;
}
inline int64_t checked_mul(const Node& n, int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  YOLOCU_CHECK(!__builtin_mul_overflow(a, b, &r), kInvalidArgument, n.describe(), ": ", what, " (", a, " * ", b,
               ") overflows int64");
  return r;
}
// The product of s[begin, end).
inline int64_t checked_product(const Node& n, const Shape& s, size_t begin, size_t end, const char* what) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p = checked_mul(n, p, s[i], what);
  return p;
}

inline int64_t norm_axis(const Node& n, int64_t axis, int64_t rank) {
  // [-rank, rank - 1]: an empty range for a scalar (found by fuzzing: Concat of a scalar read s[0])
  YOLOCU_CHECK(axis >= -rank && axis < rank, kInvalidArgument, n.describe(), ": axis ", axis,
               " out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

inline const Tensor& need_const(const Node& n, const Metas& in, size_t i, const char* what) {
  YOLOCU_CHECK(i < in.size() && in[i].present && in[i].value, kUnsupported, n.describe(), ": input '", what,
               "' must be a constant (computable when the engine is built)");
  return *in[i].value;
}

inline bool is_float(DType t) { return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16; }

inline std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Strides of `in` broadcast to the output shape (0 on broadcast axes), right-aligned.
inline std::vector<int64_t> bcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  const auto s = strides_of(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : s[i];
  return st;
}

template <typename F>
inline void parallel_for(int64_t n, F&& f) {
  if (n >= kParallelMin) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

// Calls f(out_index, a_index, b_index[, c_index]) for every output element, in order per row.
template <int N, typename F>
inline void broadcast_loop(const Shape& out, const std::array<Shape, N>& ins, F&& f) {
  const int64_t total = shape_numel(out);
  if (total == 0) return;
  bool all_same = true;
  for (const auto& s : ins) all_same = all_same && shape_numel(s) == total;
  if (all_same) {
    parallel_for(total, [&](int64_t i) {
      std::array<int64_t, N> idx;
      idx.fill(i);
      f(i, idx);
    });
    return;
  }
  const int64_t inner = out.empty() ? 1 : out.back();
  const int64_t rows = total / inner;
  std::array<std::vector<int64_t>, N> st;
  for (int k = 0; k < N; ++k) st[k] = bcast_strides(ins[k], out);
  const size_t r = out.size();
  auto body = [&](int64_t row) {
    std::array<int64_t, N> base{};
    int64_t rem = row;
    for (size_t d = r ? r - 1 : 0; d-- > 0;) {
      const int64_t c = rem % out[d];
      rem /= out[d];
      for (int k = 0; k < N; ++k) base[k] += c * st[k][d];
    }
    std::array<int64_t, N> last;
    for (int k = 0; k < N; ++k) last[k] = r ? st[k][r - 1] : 0;
    for (int64_t j = 0; j < inner; ++j) {
      std::array<int64_t, N> idx;
      for (int k = 0; k < N; ++k) idx[k] = base[k] + j * last[k];
      f(row * inner + j, idx);
    }
  };
  if (total >= kParallelMin) {
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; ++row) body(row);
  } else {
    for (int64_t row = 0; row < rows; ++row) body(row);
  }
}

template <typename F>
inline void dispatch_numeric(DType t, const Node& n, F&& f) {
  switch (t) {
    case DType::kFloat32: f(float{}); return;
    case DType::kFloat64: f(double{}); return;
    case DType::kInt64: f(int64_t{}); return;
    case DType::kInt32: f(int32_t{}); return;
    default: break;
  }
  fail(ErrorCode::kUnsupported, n.describe(), ": element type ", dtype_name(t), " is not supported by this op");
}


// shape ops (ops_shape.cpp)
void compute_concat(const Node& n, int64_t, const In& in, const Out& out);
void compute_constant_of_shape(const Node& n, int64_t, const In&, const Out& out);
void compute_expand(const Node& n, int64_t, const In& in, const Out& out);
void compute_gather(const Node& n, int64_t, const In& in, const Out& out);
void compute_range(const Node& n, int64_t, const In& in, const Out& out);
void compute_shape(const Node& n, int64_t, const In& in, const Out& out);
void compute_slice(const Node& n, int64_t opset, const In& in, const Out& out);
void compute_split(const Node& n, int64_t opset, const In& in, const Out& out);
void compute_transpose(const Node& n, int64_t, const In& in, const Out& out);
void compute_where(const Node&, int64_t, const In& in, const Out& out);
void infer_concat(const Node& n, int64_t, const Metas& in, Metas& out);
// ops_spatial.cpp
void infer_maxpool(const Node& n, int64_t, const Metas& in, Metas& out);
void compute_maxpool(const Node& n, int64_t, const In& in, const Out& out);
void infer_resize(const Node& n, int64_t opset, const Metas& in, Metas& out);
void compute_resize(const Node& n, int64_t opset, const In& in, const Out& out);
void infer_conv(const Node& n, int64_t, const Metas& in, Metas& out);
void compute_conv(const Node& n, int64_t, const In& in, const Out& out);
// ops_quant.cpp
void infer_quantize_linear(const Node& n, int64_t, const Metas& in, Metas& out);
void compute_quantize_linear(const Node& n, int64_t, const In& in, const Out& out);
void infer_dequantize_linear(const Node& n, int64_t, const Metas& in, Metas& out);
void compute_dequantize_linear(const Node& n, int64_t, const In& in, const Out& out);

void infer_constant_of_shape(const Node& n, int64_t, const Metas& in, Metas& out);
void infer_expand(const Node& n, int64_t, const Metas& in, Metas& out);
void infer_flatten(const Node& n, int64_t, const Metas& in, Metas& out);
void infer_gather(const Node& n, int64_t, const Metas& in, Metas& out);
void infer_range(const Node& n, int64_t, const Metas& in, Metas& out);
void infer_reshape(const Node& n, int64_t, const Metas& in, Metas& out);
void infer_shape(const Node& n, int64_t opset, const Metas& in, Metas& out);
void infer_slice(const Node& n, int64_t opset, const Metas& in, Metas& out);
void infer_split(const Node& n, int64_t opset, const Metas& in, Metas& out);
void infer_squeeze(const Node& n, int64_t opset, const Metas& in, Metas& out);
void infer_transpose(const Node& n, int64_t, const Metas& in, Metas& out);
void infer_unsqueeze(const Node& n, int64_t opset, const Metas& in, Metas& out);
void infer_where(const Node& n, int64_t, const Metas& in, Metas& out);

}  // namespace yolocu::ops::internal

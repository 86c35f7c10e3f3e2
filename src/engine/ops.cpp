#include "engine/ops.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <type_traits>

#include "core/check.hpp"

namespace yolocu::ops {
namespace {

using detail::fail;
using In = std::vector<const Tensor*>;
using Out = std::vector<Tensor*>;
using Metas = std::vector<ValueMeta>;

constexpr int64_t kParallelMin = 1 << 15;  // elements below which loops stay single-threaded

void need_inputs(const Node& n, const Metas& in, size_t lo, size_t hi) {
  size_t present = in.size();
  while (present > 0 && !in[present - 1].present) --present;
  YOLOCU_CHECK(present >= lo && present <= hi, kParse, n.describe(), ": expects ", lo,
               lo == hi ? "" : detail::cat(" to ", hi), " inputs, has ", present);
  for (size_t i = 0; i < lo; ++i)
    YOLOCU_CHECK(in[i].present, kParse, n.describe(), ": required input ", i, " is missing");
}

const ValueMeta* opt(const Metas& in, size_t i) { return i < in.size() && in[i].present ? &in[i] : nullptr; }
const Tensor* opt(const In& in, size_t i) { return i < in.size() ? in[i] : nullptr; }

int64_t norm_axis(const Node& n, int64_t axis, int64_t rank) {
  // [-rank, rank - 1]: an empty range for a scalar (found by fuzzing: Concat of a scalar read s[0])
  YOLOCU_CHECK(axis >= -rank && axis < rank, kInvalidArgument, n.describe(), ": axis ", axis,
               " out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

const Tensor& need_const(const Node& n, const Metas& in, size_t i, const char* what) {
  YOLOCU_CHECK(i < in.size() && in[i].present && in[i].value, kUnsupported, n.describe(), ": input '", what,
               "' must be a constant (computable when the engine is built)");
  return *in[i].value;
}

bool is_float(DType t) { return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16; }

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Strides of `in` broadcast to the output shape (0 on broadcast axes), right-aligned.
std::vector<int64_t> bcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  const auto s = strides_of(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : s[i];
  return st;
}

template <typename F>
void parallel_for(int64_t n, F&& f) {
  if (n >= kParallelMin) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

// Calls f(out_index, a_index, b_index[, c_index]) for every output element, in order per row.
template <int N, typename F>
void broadcast_loop(const Shape& out, const std::array<Shape, N>& ins, F&& f) {
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
void dispatch_numeric(DType t, const Node& n, F&& f) {
  switch (t) {
    case DType::kFloat32: f(float{}); return;
    case DType::kFloat64: f(double{}); return;
    case DType::kInt64: f(int64_t{}); return;
    case DType::kInt32: f(int32_t{}); return;
    default: break;
  }
  fail(ErrorCode::kUnsupported, n.describe(), ": element type ", dtype_name(t), " is not supported by this op");
}

// ---------------------------------------------------------------- elementwise binary
enum class BinOp { kAdd, kSub, kMul, kDiv, kPow, kEqual, kGreater, kLess, kMax, kMin };

BinOp bin_kind(const std::string& t) {
  if (t == "Add") return BinOp::kAdd;
  if (t == "Sub") return BinOp::kSub;
  if (t == "Mul") return BinOp::kMul;
  if (t == "Div") return BinOp::kDiv;
  if (t == "Pow") return BinOp::kPow;
  if (t == "Equal") return BinOp::kEqual;
  if (t == "Greater") return BinOp::kGreater;
  if (t == "Less") return BinOp::kLess;
  if (t == "Max") return BinOp::kMax;
  return BinOp::kMin;
}

bool is_compare(BinOp k) { return k == BinOp::kEqual || k == BinOp::kGreater || k == BinOp::kLess; }

void infer_binary(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 2);
  const BinOp k = bin_kind(n.op_type);
  YOLOCU_CHECK(k == BinOp::kPow || in[0].dtype == in[1].dtype, kParse, n.describe(), ": input types differ (",
               dtype_name(in[0].dtype), " vs ", dtype_name(in[1].dtype), ")");
  out.resize(1);
  out[0].dtype = is_compare(k) ? DType::kBool : in[0].dtype;
  out[0].shape = broadcast_shapes(in[0].shape, in[1].shape, n.describe());
}

template <typename T>
T apply_bin(BinOp k, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Integer arithmetic wraps (two's complement) instead of signed-overflow UB: shape constants
    // from a hostile file reach here when folding (found by fuzzing: 1 - INT64_MIN).
    using U = std::make_unsigned_t<T>;
    switch (k) {
      case BinOp::kAdd: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case BinOp::kSub: return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
      case BinOp::kMul: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case BinOp::kDiv:
        if (b == 0) return T(0);
        if (std::is_signed_v<T> && b == T(-1)) return static_cast<T>(U(0) - static_cast<U>(a));  // MIN / -1
        return static_cast<T>(a / b);
      default: break;
    }
  }
  switch (k) {
    case BinOp::kAdd: return a + b;
    case BinOp::kSub: return a - b;
    case BinOp::kMul: return a * b;
    case BinOp::kDiv:
      if constexpr (std::is_integral_v<T>) return b == 0 ? T(0) : a / b;
      else return a / b;
    case BinOp::kMax: return a > b ? a : b;
    case BinOp::kMin: return a < b ? a : b;
    default: return a;
  }
}

void compute_binary(const Node& n, int64_t, const In& in, const Out& out) {
  const BinOp k = bin_kind(n.op_type);
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  Tensor& y = *out[0];
  const std::array<Shape, 2> shapes{a.shape(), b.shape()};
  if (k == BinOp::kPow) {
    YOLOCU_CHECK(is_float(a.dtype()), kUnsupported, n.describe(), ": Pow of ", dtype_name(a.dtype()));
    const Tensor bf = b.dtype() == a.dtype() ? b : cast_tensor(b, a.dtype());
    dispatch_numeric(a.dtype(), n, [&](auto tag) {
      using T = decltype(tag);
      const T* pa = a.data_as<T>();
      const T* pb = bf.data_as<T>();
      T* py = y.data_as<T>();
      if (bf.numel() == 1 && pb[0] == T(2)) {
        parallel_for(a.numel(), [&](int64_t i) { py[i] = pa[i] * pa[i]; });
        return;
      }
      broadcast_loop<2>(y.shape(), {a.shape(), bf.shape()},
                        [&](int64_t o, const std::array<int64_t, 2>& i) { py[o] = std::pow(pa[i[0]], pb[i[1]]); });
    });
    return;
  }
  dispatch_numeric(a.dtype(), n, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data_as<T>();
    const T* pb = b.data_as<T>();
    if (is_compare(k)) {
      uint8_t* py = y.data_as<uint8_t>();
      broadcast_loop<2>(y.shape(), shapes, [&](int64_t o, const std::array<int64_t, 2>& i) {
        py[o] = k == BinOp::kEqual ? pa[i[0]] == pb[i[1]] : k == BinOp::kGreater ? pa[i[0]] > pb[i[1]] : pa[i[0]] < pb[i[1]];
      });
      return;
    }
    T* py = y.data_as<T>();
    if (b.numel() == 1 && a.numel() == y.numel()) {  // tensor op scalar: the common fast path
      const T s = pb[0];
      parallel_for(y.numel(), [&](int64_t i) { py[i] = apply_bin(k, pa[i], s); });
      return;
    }
    broadcast_loop<2>(y.shape(), shapes,
                      [&](int64_t o, const std::array<int64_t, 2>& i) { py[o] = apply_bin(k, pa[i[0]], pb[i[1]]); });
  });
}

// ---------------------------------------------------------------- elementwise unary
void infer_same(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = in[0].shape;
}

template <typename F>
void unary_float(const Node& n, const In& in, const Out& out, F&& f) {
  const Tensor& x = *in[0];
  YOLOCU_CHECK(x.dtype() == DType::kFloat32 || x.dtype() == DType::kFloat64, kUnsupported, n.describe(),
               ": element type ", dtype_name(x.dtype()));
  if (x.dtype() == DType::kFloat32) {
    const float* px = x.data_as<float>();
    float* py = out[0]->data_as<float>();
    parallel_for(x.numel(), [&](int64_t i) { py[i] = static_cast<float>(f(px[i])); });
  } else {
    const double* px = x.data_as<double>();
    double* py = out[0]->data_as<double>();
    parallel_for(x.numel(), [&](int64_t i) { py[i] = f(px[i]); });
  }
}

void compute_unary(const Node& n, int64_t, const In& in, const Out& out) {
  const std::string& t = n.op_type;
  if (t == "Sigmoid") {
    unary_float(n, in, out, [](auto v) { return decltype(v)(1) / (decltype(v)(1) + std::exp(-v)); });
  } else if (t == "Relu") {
    unary_float(n, in, out, [](auto v) { return v > 0 ? v : decltype(v)(0); });
  } else if (t == "LeakyRelu") {
    const float alpha = n.attr_float("alpha", 0.01f);
    unary_float(n, in, out, [alpha](auto v) { return v >= 0 ? v : v * alpha; });
  } else if (t == "HardSigmoid") {
    const float a = n.attr_float("alpha", 0.2f), b = n.attr_float("beta", 0.5f);
    unary_float(n, in, out, [a, b](auto v) { return std::min<decltype(v)>(1, std::max<decltype(v)>(0, a * v + b)); });
  } else if (t == "HardSwish") {
    unary_float(n, in, out, [](auto v) { return v * std::min<decltype(v)>(1, std::max<decltype(v)>(0, v / 6 + 0.5)); });
  } else if (t == "Exp") {
    unary_float(n, in, out, [](auto v) { return std::exp(v); });
  } else if (t == "Sqrt") {
    unary_float(n, in, out, [](auto v) { return std::sqrt(v); });
  } else if (t == "Floor" || t == "Ceil") {
    const bool fl = t == "Floor";
    unary_float(n, in, out, [fl](auto v) { return fl ? std::floor(v) : std::ceil(v); });
  } else if (t == "Neg" || t == "Abs") {
    const bool neg = t == "Neg";
    dispatch_numeric(in[0]->dtype(), n, [&](auto tag) {
      using T = decltype(tag);
      const T* px = in[0]->data_as<T>();
      T* py = out[0]->data_as<T>();
      parallel_for(in[0]->numel(), [&](int64_t i) { py[i] = neg ? T(-px[i]) : (px[i] < 0 ? T(-px[i]) : px[i]); });
    });
  } else {
    fail(ErrorCode::kInternal, "unary op ", t);
  }
}

void infer_unary_float(const Node& n, int64_t o, const Metas& in, Metas& out) {
  infer_same(n, o, in, out);
  const std::string& t = n.op_type;
  if (t != "Neg" && t != "Abs")
    YOLOCU_CHECK(is_float(in[0].dtype), kParse, n.describe(), ": needs a float input, has ", dtype_name(in[0].dtype));
}

// ---------------------------------------------------------------- Softmax
// Opset >= 13: along one axis (default -1). Opset < 13: the input is seen as 2-D [outer, inner]
// split at `axis` (default 1) and every row of `inner` values is normalised. Both are
// outer x len x inner loops; max subtracted first, the sum accumulated in double.
struct SoftmaxDims {
  int64_t outer = 1, len = 1, inner = 1;
};

SoftmaxDims softmax_dims(const Node& n, int64_t opset, const Shape& s) {
  const int64_t r = static_cast<int64_t>(s.size());
  const int64_t axis = norm_axis(n, n.attr_int("axis", opset >= 13 ? -1 : 1), r);
  SoftmaxDims d;
  for (int64_t i = 0; i < axis; ++i) d.outer *= s[static_cast<size_t>(i)];
  if (opset >= 13) {
    d.len = r ? s[static_cast<size_t>(axis)] : 1;
    for (int64_t i = axis + 1; i < r; ++i) d.inner *= s[static_cast<size_t>(i)];
  } else {
    for (int64_t i = axis; i < r; ++i) d.len *= s[static_cast<size_t>(i)];
  }
  return d;
}

void infer_softmax(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  infer_same(n, opset, in, out);
  YOLOCU_CHECK(is_float(in[0].dtype), kParse, n.describe(), ": needs a float input, has ", dtype_name(in[0].dtype));
  softmax_dims(n, opset, in[0].shape);  // validates the axis
}

template <typename T>
void softmax_loop(const T* x, T* y, const SoftmaxDims& d) {
  const int64_t lanes = d.outer * d.inner;
  auto lane = [&](int64_t l) {
    const int64_t o = l / d.inner, i = l % d.inner;
    const T* px = x + o * d.len * d.inner + i;
    T* py = y + o * d.len * d.inner + i;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < d.len; ++k) m = std::max(m, px[k * d.inner]);
    double sum = 0;
    for (int64_t k = 0; k < d.len; ++k) {
      const T e = std::exp(px[k * d.inner] - m);
      py[k * d.inner] = e;
      sum += static_cast<double>(e);
    }
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t k = 0; k < d.len; ++k) py[k * d.inner] *= inv;
  };
  if (lanes * d.len >= kParallelMin) {
#pragma omp parallel for schedule(static)
    for (int64_t l = 0; l < lanes; ++l) lane(l);
  } else {
    for (int64_t l = 0; l < lanes; ++l) lane(l);
  }
}

void compute_softmax(const Node& n, int64_t opset, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  const SoftmaxDims d = softmax_dims(n, opset, x.shape());
  if (x.dtype() == DType::kFloat32) {
    softmax_loop(x.data_as<float>(), out[0]->data_as<float>(), d);
  } else if (x.dtype() == DType::kFloat64) {
    softmax_loop(x.data_as<double>(), out[0]->data_as<double>(), d);
  } else {
    fail(ErrorCode::kUnsupported, n.describe(), ": element type ", dtype_name(x.dtype()));
  }
}

// ---------------------------------------------------------------- MatMul
// numpy.matmul: 1-D operands are promoted (a: [1, K], b: [K, 1]) and the added axis removed from
// the result; the batch axes broadcast.
struct MatMulDims {
  Shape out, batch;          // result shape; broadcast batch shape
  Shape a_batch, b_batch;    // each operand's batch axes
  int64_t m = 1, k = 1, n = 1;
};

MatMulDims matmul_dims(const Node& node, const Shape& a, const Shape& b) {
  YOLOCU_CHECK(!a.empty() && !b.empty(), kInvalidArgument, node.describe(), ": scalar operands");
  MatMulDims d;
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  const Shape a2 = a1 ? Shape{1, a[0]} : a, b2 = b1 ? Shape{b[0], 1} : b;
  d.m = a2[a2.size() - 2];
  d.k = a2.back();
  d.n = b2.back();
  YOLOCU_CHECK(b2[b2.size() - 2] == d.k, kInvalidArgument, node.describe(), ": shapes ", shape_str(a), " and ",
               shape_str(b), " do not multiply");
  d.a_batch.assign(a2.begin(), a2.end() - 2);
  d.b_batch.assign(b2.begin(), b2.end() - 2);
  d.batch = broadcast_shapes(d.a_batch, d.b_batch, node.describe());
  d.out = d.batch;
  if (!a1) d.out.push_back(d.m);
  if (!b1) d.out.push_back(d.n);
  return d;
}

void infer_matmul(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 2);
  YOLOCU_CHECK(in[0].dtype == in[1].dtype && (in[0].dtype == DType::kFloat32 || in[0].dtype == DType::kFloat64),
               kUnsupported, n.describe(), ": operands must both be float32 (or float64), are ", dtype_name(in[0].dtype),
               " and ", dtype_name(in[1].dtype));
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = matmul_dims(n, in[0].shape, in[1].shape).out;
}

template <typename T>
void matmul_loop(const T* a, const T* b, T* y, const MatMulDims& d) {
  const int64_t batches = shape_numel(d.batch);
  const auto sa = bcast_strides(d.a_batch, d.batch), sb = bcast_strides(d.b_batch, d.batch);
  const int64_t mk = d.m * d.k, kn = d.k * d.n, mn = d.m * d.n;
  auto row = [&](int64_t t) {  // t = batch * m + i: one output row, accumulated over k in order
    const int64_t bi = t / d.m, i = t % d.m;
    int64_t oa = 0, ob = 0, rem = bi;
    for (size_t ax = d.batch.size(); ax-- > 0;) {
      const int64_t c = rem % d.batch[ax];
      rem /= d.batch[ax];
      oa += c * sa[ax];
      ob += c * sb[ax];
    }
    const T* pa = a + oa * mk + i * d.k;
    const T* pb = b + ob * kn;
    T* py = y + bi * mn + i * d.n;
    for (int64_t j = 0; j < d.n; ++j) py[j] = 0;
    for (int64_t kk = 0; kk < d.k; ++kk) {
      const T av = pa[kk];
      const T* brow = pb + kk * d.n;
      for (int64_t j = 0; j < d.n; ++j) py[j] += av * brow[j];
    }
  };
  const int64_t rows = batches * d.m;
  if (rows * d.n * d.k >= kParallelMin) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < rows; ++t) row(t);
  } else {
    for (int64_t t = 0; t < rows; ++t) row(t);
  }
}

void compute_matmul(const Node& n, int64_t, const In& in, const Out& out) {
  const MatMulDims d = matmul_dims(n, in[0]->shape(), in[1]->shape());
  if (in[0]->dtype() == DType::kFloat32)
    matmul_loop(in[0]->data_as<float>(), in[1]->data_as<float>(), out[0]->data_as<float>(), d);
  else
    matmul_loop(in[0]->data_as<double>(), in[1]->data_as<double>(), out[0]->data_as<double>(), d);
}

// ---------------------------------------------------------------- Identity / Cast / Constant
void compute_copy(const Node&, int64_t, const In& in, const Out& out) {
  if (out[0]->data() != in[0]->data() && in[0]->nbytes()) std::memcpy(out[0]->data(), in[0]->data(), in[0]->nbytes());
}

DType onnx_dtype(const Node& n, int64_t t) {
  switch (t) {
    case 1: return DType::kFloat32;
    case 10: return DType::kFloat16;
    case 11: return DType::kFloat64;
    case 7: return DType::kInt64;
    case 6: return DType::kInt32;
    case 3: return DType::kInt8;
    case 2: return DType::kUInt8;
    case 9: return DType::kBool;
    default: break;
  }
  fail(ErrorCode::kUnsupported, n.describe(), ": cast to ONNX type ", t, " is not supported");
}

void infer_cast(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  YOLOCU_CHECK(n.has_attr("to"), kParse, n.describe(), ": missing attribute 'to'");
  out.resize(1);
  out[0].dtype = onnx_dtype(n, n.attr_int("to", 1));
  out[0].shape = in[0].shape;
}

void compute_cast(const Node& n, int64_t, const In& in, const Out& out) {
  Tensor c = cast_tensor(*in[0], out[0]->dtype());
  if (c.nbytes()) std::memcpy(out[0]->data(), c.data(), c.nbytes());
}

Tensor constant_value(const Node& n) {
  auto it = n.attributes.find("value");
  if (it != n.attributes.end()) {
    YOLOCU_CHECK(it->second.kind == Attribute::Kind::kTensor, kParse, n.describe(), ": 'value' is not a tensor");
    return it->second.t;
  }
  if (n.has_attr("value_float")) {
    Tensor t(DType::kFloat32, {});
    t.data_as<float>()[0] = n.attr_float("value_float", 0);
    return t;
  }
  if (n.has_attr("value_int")) {
    Tensor t(DType::kInt64, {});
    t.data_as<int64_t>()[0] = n.attr_int("value_int", 0);
    return t;
  }
  if (n.has_attr("value_floats")) {
    const auto& v = n.attributes.at("value_floats").floats;
    Tensor t(DType::kFloat32, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data_as<float>());
    return t;
  }
  if (n.has_attr("value_ints")) {
    const auto v = n.attr_ints("value_ints");
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
    return t;
  }
  fail(ErrorCode::kUnsupported, n.describe(), ": Constant without a supported value attribute");
}

void infer_constant(const Node& n, int64_t, const Metas& in, Metas& out) {
  const Tensor t = constant_value(n);
  out.resize(1);
  out[0].dtype = t.dtype();
  out[0].shape = t.shape();
}

void compute_constant(const Node& n, int64_t, const In&, const Out& out) {
  const Tensor t = constant_value(n);
  if (t.nbytes()) std::memcpy(out[0]->data(), t.data(), t.nbytes());
}

// ---------------------------------------------------------------- shape ops
void infer_shape(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  out.resize(1);
  out[0].dtype = DType::kInt64;
  out[0].shape = {std::max<int64_t>(end - start, 0)};
}

void compute_shape(const Node& n, int64_t, const In& in, const Out& out) {
  const int64_t r = static_cast<int64_t>(in[0]->rank());
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  for (int64_t i = start; i < end; ++i) out[0]->data_as<int64_t>()[i - start] = in[0]->dim(static_cast<size_t>(i));
}

void infer_reshape(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 2);
  const auto target = to_int_vector(need_const(n, in, 1, "shape"));
  const bool allowzero = n.attr_int("allowzero", 0) != 0;
  Shape s(target.size());
  int64_t infer_at = -1, known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowzero) {
      YOLOCU_CHECK(i < in[0].shape.size(), kInvalidArgument, n.describe(), ": 0 in shape refers to a missing axis");
      d = in[0].shape[i];
    }
    if (d == -1) {
      YOLOCU_CHECK(infer_at < 0, kInvalidArgument, n.describe(), ": more than one -1 in the target shape");
      infer_at = static_cast<int64_t>(i);
      d = 1;
    }
    YOLOCU_CHECK(d >= 0, kInvalidArgument, n.describe(), ": invalid target dimension ", d);
    YOLOCU_CHECK(d == 0 || known <= std::numeric_limits<int64_t>::max() / d, kInvalidArgument, n.describe(),
                 ": target shape ", shape_str(Shape(target.begin(), target.end())), " overflows int64");
    s[i] = d;
    known *= d;
  }
  const int64_t total = shape_numel(in[0].shape);
  if (infer_at >= 0) {
    YOLOCU_CHECK(known > 0 && total % known == 0, kInvalidArgument, n.describe(), ": cannot reshape ",
                 shape_str(in[0].shape), " to ", shape_str(Shape(target.begin(), target.end())));
    s[static_cast<size_t>(infer_at)] = total / known;
  }
  YOLOCU_CHECK(shape_numel(s) == total, kInvalidArgument, n.describe(), ": cannot reshape ",
               shape_str(in[0].shape), " (", total, " elements) to ", shape_str(s));
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

std::vector<int64_t> axes_arg(const Node& n, int64_t opset, const Metas& in, bool required) {
  if (opset >= 13) {
    if (opt(in, 1)) return to_int_vector(need_const(n, in, 1, "axes"));
    YOLOCU_CHECK(!required, kParse, n.describe(), ": missing input 'axes'");
    return {};
  }
  YOLOCU_CHECK(!required || n.has_attr("axes"), kParse, n.describe(), ": missing attribute 'axes'");
  return n.attr_ints("axes");
}

void infer_unsqueeze(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, opset >= 13 ? 2 : 1);
  auto axes = axes_arg(n, opset, in, true);
  const int64_t r = static_cast<int64_t>(in[0].shape.size() + axes.size());
  std::vector<bool> mark(static_cast<size_t>(r), false);
  for (auto& a : axes) {
    a = norm_axis(n, a, r);
    YOLOCU_CHECK(!mark[static_cast<size_t>(a)], kInvalidArgument, n.describe(), ": repeated axis ", a);
    mark[static_cast<size_t>(a)] = true;
  }
  Shape s;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) s.push_back(mark[static_cast<size_t>(i)] ? 1 : in[0].shape[k++]);
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void infer_squeeze(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, opset >= 13 ? 2 : 1);
  auto axes = axes_arg(n, opset, in, false);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  std::vector<bool> drop(static_cast<size_t>(r), false);
  if (axes.empty()) {
    for (int64_t i = 0; i < r; ++i) drop[static_cast<size_t>(i)] = in[0].shape[static_cast<size_t>(i)] == 1;
  } else {
    for (auto a : axes) {
      a = norm_axis(n, a, r);
      YOLOCU_CHECK(in[0].shape[static_cast<size_t>(a)] == 1, kInvalidArgument, n.describe(), ": axis ", a,
                   " has size ", in[0].shape[static_cast<size_t>(a)], ", not 1");
      drop[static_cast<size_t>(a)] = true;
    }
  }
  Shape s;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[static_cast<size_t>(i)]) s.push_back(in[0].shape[static_cast<size_t>(i)]);
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void infer_flatten(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < 0) axis += r;
  YOLOCU_CHECK(axis >= 0 && axis <= r, kInvalidArgument, n.describe(), ": axis out of range");
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= in[0].shape[static_cast<size_t>(i)];
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = {a, b};
}

void infer_transpose(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  const size_t r = in[0].shape.size();
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  YOLOCU_CHECK(perm.size() == r, kInvalidArgument, n.describe(), ": perm has ", perm.size(), " axes, input rank ", r);
  std::vector<bool> used(r, false);
  Shape s;
  for (auto p : perm) {
    YOLOCU_CHECK(p >= 0 && p < static_cast<int64_t>(r) && !used[static_cast<size_t>(p)], kInvalidArgument,
                 n.describe(), ": invalid perm");
    used[static_cast<size_t>(p)] = true;
    s.push_back(in[0].shape[static_cast<size_t>(p)]);
  }
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void compute_transpose(const Node& n, int64_t, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const size_t r = x.rank();
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  const auto xs = strides_of(x.shape());
  std::vector<int64_t> st(r);  // input stride for each output axis
  for (size_t i = 0; i < r; ++i) st[i] = xs[static_cast<size_t>(perm[i])];
  const size_t es = dtype_size(x.dtype());
  const int64_t total = y.numel();
  if (total == 0) return;
  if (r == 0) {  // a scalar: the row loop below assumes rank >= 1 (found by fuzzing)
    std::memcpy(y.data(), x.data(), dtype_size(x.dtype()));
    return;
  }
  const int64_t inner = y.shape().back();
  const int64_t rows = total / inner;
  const int64_t inner_stride = r ? st[r - 1] : 0;
  const auto* px = static_cast<const uint8_t*>(x.data());
  auto* py = static_cast<uint8_t*>(y.data());
  auto row_fn = [&](int64_t row) {
    int64_t rem = row, base = 0;
    for (size_t d = r ? r - 1 : 0; d-- > 0;) {
      base += (rem % y.shape()[d]) * st[d];
      rem /= y.shape()[d];
    }
    uint8_t* dst = py + row * inner * static_cast<int64_t>(es);
    if (es == 4) {
      const float* s = reinterpret_cast<const float*>(px) + base;
      float* dd = reinterpret_cast<float*>(dst);
      for (int64_t j = 0; j < inner; ++j) dd[j] = s[j * inner_stride];
    } else {
      for (int64_t j = 0; j < inner; ++j) std::memcpy(dst + j * static_cast<int64_t>(es), px + (base + j * inner_stride) * static_cast<int64_t>(es), es);
    }
  };
  if (total >= kParallelMin) {
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; ++row) row_fn(row);
  } else {
    for (int64_t row = 0; row < rows; ++row) row_fn(row);
  }
}

// Copies `rows` blocks of `block` bytes with independent strides (Concat, Split, Slice helpers).
// Large copies are cut into 64 KiB pieces spread over the threads (a channel Concat of one image
// is a few MiB in one block).
void copy_blocks(uint8_t* dst, int64_t dst_stride, const uint8_t* src, int64_t src_stride, int64_t rows, int64_t block) {
  constexpr int64_t kPiece = 64 << 10;
  const int64_t pieces = (block + kPiece - 1) / kPiece;
  const int64_t total = rows * pieces;
  if (rows * block >= kParallelMin * 4 && total > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < total; ++t) {
      const int64_t i = t / pieces, off = (t % pieces) * kPiece;
      std::memcpy(dst + i * dst_stride + off, src + i * src_stride + off, static_cast<size_t>(std::min(kPiece, block - off)));
    }
  } else {
    for (int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, static_cast<size_t>(block));
  }
}

void infer_concat(const Node& n, int64_t, const Metas& in, Metas& out) {
  YOLOCU_CHECK(!in.empty(), kParse, n.describe(), ": no inputs");
  YOLOCU_CHECK(n.has_attr("axis"), kParse, n.describe(), ": missing attribute 'axis'");
  YOLOCU_CHECK(in[0].present && !in[0].shape.empty(), kInvalidArgument, n.describe(),
               ": inputs must be tensors of rank >= 1");
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  Shape s = in[0].shape;
  s[static_cast<size_t>(axis)] = 0;
  for (const auto& m : in) {
    YOLOCU_CHECK(m.present && m.shape.size() == static_cast<size_t>(r) && m.dtype == in[0].dtype, kInvalidArgument,
                 n.describe(), ": inputs differ in rank or type");
    for (int64_t d = 0; d < r; ++d)
      YOLOCU_CHECK(d == axis || m.shape[static_cast<size_t>(d)] == in[0].shape[static_cast<size_t>(d)], kInvalidArgument,
                   n.describe(), ": input shapes ", shape_str(m.shape), " and ", shape_str(in[0].shape),
                   " differ outside axis ", axis);
    s[static_cast<size_t>(axis)] += m.shape[static_cast<size_t>(axis)];
  }
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void compute_concat(const Node& n, int64_t, const In& in, const Out& out) {
  Tensor& y = *out[0];
  const int64_t r = static_cast<int64_t>(y.rank());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= y.shape()[static_cast<size_t>(d)];
  const int64_t es = static_cast<int64_t>(dtype_size(y.dtype()));
  const int64_t ystride = y.numel() / std::max<int64_t>(outer, 1) * es;
  std::vector<int64_t> blocks;
  int64_t max_block = 0;
  for (const Tensor* x : in) {
    blocks.push_back(outer ? x->numel() / outer * es : 0);
    max_block = std::max(max_block, blocks.back());
  }
  if (outer > 1 && max_block <= 1024 && es == 4) {
    // Many small pieces (the Detect head joins 2 + 2 + 81 floats per row): one parallel pass over
    // the rows, plain float copies instead of a memcpy call per piece.
    auto* py = y.data_as<float>();
#pragma omp parallel for schedule(static) if (y.numel() >= kParallelMin)
    for (int64_t row = 0; row < outer; ++row) {
      float* dst = py + row * (ystride / 4);
      for (size_t k = 0; k < in.size(); ++k) {
        const int64_t len = blocks[k] / 4;
        const float* src = in[k]->data_as<float>() + row * len;
        for (int64_t j = 0; j < len; ++j) dst[j] = src[j];
        dst += len;
      }
    }
    return;
  }
  int64_t off = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    copy_blocks(static_cast<uint8_t*>(y.data()) + off, ystride, static_cast<const uint8_t*>(in[k]->data()), blocks[k],
                outer, blocks[k]);
    off += blocks[k];
  }
}

std::vector<int64_t> split_sizes(const Node& n, int64_t opset, const Shape& s, int64_t axis, size_t outputs,
                                 const Tensor* split_input) {
  std::vector<int64_t> sizes;
  if (opset >= 13) {
    if (split_input) sizes = to_int_vector(*split_input);
  } else {
    sizes = n.attr_ints("split");
  }
  const int64_t dim = s[static_cast<size_t>(axis)];
  if (opset >= 18 && n.has_attr("num_outputs"))
    YOLOCU_CHECK(sizes.empty() && n.attr_int("num_outputs", 0) == static_cast<int64_t>(outputs), kInvalidArgument,
                 n.describe(), ": num_outputs ", n.attr_int("num_outputs", 0), " with ", outputs,
                 " outputs (and no split sizes) expected");
  if (sizes.empty()) {
    YOLOCU_CHECK(outputs > 0, kParse, n.describe(), ": no outputs");
    const int64_t k = static_cast<int64_t>(outputs);
    const int64_t chunk = (dim + k - 1) / k;
    for (int64_t i = 0; i < k; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  YOLOCU_CHECK(sizes.size() == outputs, kInvalidArgument, n.describe(), ": split has ", sizes.size(), " parts for ",
               outputs, " outputs");
  int64_t sum = 0;  // each part in [0, dim]: the sum cannot overflow (found by fuzzing: sizes near 2^63)
  for (int64_t part : sizes) {
    YOLOCU_CHECK(part >= 0 && part <= dim, kInvalidArgument, n.describe(), ": split size ", part, " for an axis of ", dim);
    sum += part;
  }
  YOLOCU_CHECK(sum == dim, kInvalidArgument, n.describe(), ": split sizes do not add up to ", dim);
  return sizes;
}

void infer_split(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 2);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  const Tensor* sp = opt(in, 1) ? &need_const(n, in, 1, "split") : nullptr;
  const auto sizes = split_sizes(n, opset, in[0].shape, axis, n.outputs.size(), sp);
  out.resize(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].dtype = in[0].dtype;
    out[i].shape = in[0].shape;
    out[i].shape[static_cast<size_t>(axis)] = sizes[i];
  }
}

void compute_split(const Node& n, int64_t opset, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  const int64_t r = static_cast<int64_t>(x.rank());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  // the sizes, not the outputs, place each part: an unused (null) output still takes its share
  const auto sizes = split_sizes(n, opset, x.shape(), axis, out.size(), opt(in, 1));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x.shape()[static_cast<size_t>(d)];
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  const int64_t xstride = x.shape()[static_cast<size_t>(axis)] * inner * es;
  int64_t off = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t block = sizes[i] * inner * es;
    if (out[i])
      copy_blocks(static_cast<uint8_t*>(out[i]->data()), block, static_cast<const uint8_t*>(x.data()) + off, xstride,
                  outer, block);
    off += block;
  }
}

struct SliceSpec {
  std::vector<int64_t> start, step;  // per axis of the input
  Shape out;
};

SliceSpec slice_spec(const Node& n, int64_t opset, const Shape& s, const std::vector<int64_t>& starts,
                     const std::vector<int64_t>& ends, std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const int64_t r = static_cast<int64_t>(s.size());
  YOLOCU_CHECK(starts.size() == ends.size(), kInvalidArgument, n.describe(), ": starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  YOLOCU_CHECK(axes.size() == starts.size() && steps.size() == starts.size(), kInvalidArgument, n.describe(),
               ": axes/steps length mismatch");
  SliceSpec sp;
  sp.start.assign(static_cast<size_t>(r), 0);
  sp.step.assign(static_cast<size_t>(r), 1);
  sp.out = s;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = norm_axis(n, axes[i], r);
    const int64_t dim = s[static_cast<size_t>(a)];
    const int64_t step = steps[i];
    YOLOCU_CHECK(step != 0, kInvalidArgument, n.describe(), ": step 0");
    auto clampv = [&](int64_t v, bool is_end) {
      if (v < 0) v += dim;
      if (step > 0) return std::clamp<int64_t>(v, 0, dim);
      return std::clamp<int64_t>(v, -1, dim - 1);
      (void)is_end;
    };
    int64_t b = starts[i], e = ends[i];
    if (b == std::numeric_limits<int64_t>::max() || b > dim) b = step > 0 ? dim : dim - 1;
    if (e == std::numeric_limits<int64_t>::max() || e > dim) e = dim;
    if (e < -dim) e = step > 0 ? 0 : -1;
    else e = clampv(e, true);
    if (b < -dim) b = 0;
    else b = clampv(b, false);
    // b, e are in [-1, dim]; the step may be anything (INT64_MIN included): count in uint64
    const uint64_t span = step > 0 ? (e > b ? static_cast<uint64_t>(e - b) : 0) : (b > e ? static_cast<uint64_t>(b - e) : 0);
    const uint64_t mag = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
    const int64_t len = span ? static_cast<int64_t>(1 + (span - 1) / mag) : 0;
    sp.start[static_cast<size_t>(a)] = b;
    sp.step[static_cast<size_t>(a)] = step;
    sp.out[static_cast<size_t>(a)] = len;
  }
  return sp;
}

SliceSpec slice_spec_from(const Node& n, int64_t opset, const Shape& s, const std::vector<const Tensor*>& args) {
  if (opset < 10)
    return slice_spec(n, opset, s, n.attr_ints("starts"), n.attr_ints("ends"), n.attr_ints("axes"), {});
  auto get = [&](size_t i) { return i < args.size() && args[i] ? to_int_vector(*args[i]) : std::vector<int64_t>{}; };
  return slice_spec(n, opset, s, get(1), get(2), get(3), get(4));
}

void infer_slice(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, opset >= 10 ? 3 : 1, opset >= 10 ? 5 : 1);
  std::vector<const Tensor*> args(in.size(), nullptr);
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i].present) args[i] = &need_const(n, in, i, "starts/ends/axes/steps");
  const SliceSpec sp = slice_spec_from(n, opset, in[0].shape, args);
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = sp.out;
}

void compute_slice(const Node& n, int64_t opset, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const SliceSpec sp = slice_spec_from(n, opset, x.shape(), in);
  const auto xs = strides_of(x.shape());
  const size_t r = x.rank();
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  const int64_t total = y.numel();
  if (total == 0) return;
  const auto* px = static_cast<const uint8_t*>(x.data());
  auto* py = static_cast<uint8_t*>(y.data());
  for (int64_t o = 0; o < total; ++o) {
    int64_t rem = o, src = 0;
    for (size_t d = r; d-- > 0;) {
      const int64_t c = rem % y.shape()[d];
      rem /= y.shape()[d];
      src += (sp.start[d] + c * sp.step[d]) * xs[d];
    }
    std::memcpy(py + o * es, px + src * es, static_cast<size_t>(es));
  }
}

void infer_gather(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 2);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  YOLOCU_CHECK(r >= 1, kInvalidArgument, n.describe(), ": gather from a scalar");
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  YOLOCU_CHECK(in[1].dtype == DType::kInt64 || in[1].dtype == DType::kInt32, kParse, n.describe(), ": indices must be int");
  Shape s(in[0].shape.begin(), in[0].shape.begin() + axis);
  s.insert(s.end(), in[1].shape.begin(), in[1].shape.end());
  s.insert(s.end(), in[0].shape.begin() + axis + 1, in[0].shape.end());
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void compute_gather(const Node& n, int64_t, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  const auto idx = to_int_vector(*in[1]);
  const int64_t r = static_cast<int64_t>(x.rank());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  const int64_t dim = x.shape()[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x.shape()[static_cast<size_t>(d)];
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  const auto* px = static_cast<const uint8_t*>(x.data());
  auto* py = static_cast<uint8_t*>(out[0]->data());
  const int64_t k = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = idx[static_cast<size_t>(j)];
      if (i < 0) i += dim;
      YOLOCU_CHECK(i >= 0 && i < dim, kInvalidArgument, n.describe(), ": index ", idx[static_cast<size_t>(j)],
                   " out of range for axis of size ", dim);
      std::memcpy(py + (o * k + j) * inner * es, px + (o * dim + i) * inner * es, static_cast<size_t>(inner * es));
    }
}

void infer_range(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 3, 3);
  const Tensor& s = need_const(n, in, 0, "start");
  const Tensor& l = need_const(n, in, 1, "limit");
  const Tensor& d = need_const(n, in, 2, "delta");
  YOLOCU_CHECK(s.numel() == 1 && l.numel() == 1 && d.numel() == 1, kInvalidArgument, n.describe(), ": scalars expected");
  const Tensor sf = cast_tensor(s, DType::kFloat64), lf = cast_tensor(l, DType::kFloat64), df = cast_tensor(d, DType::kFloat64);
  const double a = sf.data_as<double>()[0], b = lf.data_as<double>()[0], c = df.data_as<double>()[0];
  YOLOCU_CHECK(c != 0, kInvalidArgument, n.describe(), ": delta 0");
  const double count = std::ceil((b - a) / c);  // NaN / inf / beyond int64 from a hostile file: no cast
  YOLOCU_CHECK(std::isfinite(count) && count < 2147483648.0, kInvalidArgument, n.describe(), ": a range from ", a,
               " to ", b, " by ", c, " has ", count, " elements");
  const int64_t cnt = std::max<int64_t>(0, static_cast<int64_t>(count));
  out.resize(1);
  out[0].dtype = s.dtype();
  out[0].shape = {cnt};
}

void compute_range(const Node& n, int64_t, const In& in, const Out& out) {
  dispatch_numeric(in[0]->dtype(), n, [&](auto tag) {
    using T = decltype(tag);
    const T a = in[0]->data_as<T>()[0], c = in[2]->data_as<T>()[0];
    T* py = out[0]->data_as<T>();
    for (int64_t i = 0; i < out[0]->numel(); ++i) {
      if constexpr (std::is_integral_v<T>)  // two's-complement wrap, never signed-overflow UB
        py[i] = static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(i) * static_cast<uint64_t>(c));
      else
        py[i] = static_cast<T>(a + static_cast<T>(i) * c);
    }
  });
}

void infer_expand(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 2);
  const auto target = to_int_vector(need_const(n, in, 1, "shape"));
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = broadcast_shapes(in[0].shape, Shape(target.begin(), target.end()), n.describe());
}

void compute_expand(const Node& n, int64_t, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  const auto* px = static_cast<const uint8_t*>(x.data());
  auto* py = static_cast<uint8_t*>(out[0]->data());
  broadcast_loop<1>(out[0]->shape(), {x.shape()}, [&](int64_t o, const std::array<int64_t, 1>& i) {
    std::memcpy(py + o * es, px + i[0] * es, static_cast<size_t>(es));
  });
}

void infer_where(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 3, 3);
  YOLOCU_CHECK(in[0].dtype == DType::kBool, kParse, n.describe(), ": condition must be bool");
  YOLOCU_CHECK(in[1].dtype == in[2].dtype, kParse, n.describe(), ": X and Y types differ");
  out.resize(1);
  out[0].dtype = in[1].dtype;
  out[0].shape = broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape, n.describe()), in[2].shape, n.describe());
}

void compute_where(const Node&, int64_t, const In& in, const Out& out) {
  const int64_t es = static_cast<int64_t>(dtype_size(in[1]->dtype()));
  const auto* pc = in[0]->data_as<uint8_t>();
  const auto* px = static_cast<const uint8_t*>(in[1]->data());
  const auto* pyy = static_cast<const uint8_t*>(in[2]->data());
  auto* po = static_cast<uint8_t*>(out[0]->data());
  broadcast_loop<3>(out[0]->shape(), {in[0]->shape(), in[1]->shape(), in[2]->shape()},
                    [&](int64_t o, const std::array<int64_t, 3>& i) {
                      std::memcpy(po + o * es, pc[i[0]] ? px + i[1] * es : pyy + i[2] * es, static_cast<size_t>(es));
                    });
}

void infer_constant_of_shape(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  const auto s = to_int_vector(need_const(n, in, 0, "input"));
  out.resize(1);
  auto it = n.attributes.find("value");
  out[0].dtype = it != n.attributes.end() ? it->second.t.dtype() : DType::kFloat32;
  out[0].shape = Shape(s.begin(), s.end());
  shape_numel(out[0].shape);
}

void compute_constant_of_shape(const Node& n, int64_t, const In&, const Out& out) {
  auto it = n.attributes.find("value");
  Tensor& y = *out[0];
  if (it == n.attributes.end()) {
    std::memset(y.data(), 0, y.nbytes());
    return;
  }
  const Tensor& v = it->second.t;
  YOLOCU_CHECK(v.numel() == 1, kParse, n.describe(), ": 'value' must hold one element");
  const size_t es = dtype_size(v.dtype());
  for (int64_t i = 0; i < y.numel(); ++i) std::memcpy(static_cast<uint8_t*>(y.data()) + i * static_cast<int64_t>(es), v.data(), es);
}

// ---------------------------------------------------------------- MaxPool / Resize / Conv shapes
struct PoolParams {
  int64_t kh, kw, sh, sw, ph0, pw0, ph1, pw1, dh, dw;
  bool ceil;
};

// strides / pads / dilations of a 2-D Conv or MaxPool, validated once for both (auto_pad: only
// NOTSET and VALID, which both mean the explicit pads).
struct Window2d {
  std::vector<int64_t> strides, pads, dilations;
};

Window2d window_2d(const Node& n) {
  Window2d w{n.attr_ints("strides", {1, 1}), n.attr_ints("pads", {0, 0, 0, 0}), n.attr_ints("dilations", {1, 1})};
  YOLOCU_CHECK(w.strides.size() == 2 && w.pads.size() == 4 && w.dilations.size() == 2, kParse, n.describe(),
               ": malformed strides/pads/dilations");
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  YOLOCU_CHECK(ap == "NOTSET" || ap == "VALID", kUnsupported, n.describe(), ": auto_pad ", ap);
  // Bounded so that the window arithmetic (pool_out) cannot overflow, and no stride of 0 divides.
  constexpr int64_t kMax = int64_t{1} << 24;
  for (size_t i = 0; i < 2; ++i)
    YOLOCU_CHECK(w.strides[i] >= 1 && w.strides[i] <= kMax && w.dilations[i] >= 1 && w.dilations[i] <= kMax,
                 kInvalidArgument, n.describe(), ": strides ", shape_str(w.strides), " and dilations ",
                 shape_str(w.dilations), " must be in 1..2^24");
  for (int64_t pad : w.pads)
    YOLOCU_CHECK(pad >= 0 && pad <= kMax, kInvalidArgument, n.describe(), ": pads ", shape_str(w.pads),
                 " must be in 0..2^24");
  return w;
}

PoolParams pool_params(const Node& n, const Shape& x) {
  const auto k = n.attr_ints("kernel_shape");
  YOLOCU_CHECK(k.size() == 2 && x.size() == 4, kUnsupported, n.describe(), ": only 2-D pooling on NCHW is supported");
  const Window2d w = window_2d(n);
  const auto& s = w.strides;
  const auto& p = w.pads;
  const auto& d = w.dilations;
  YOLOCU_CHECK(n.attr_int("storage_order", 0) == 0, kUnsupported, n.describe(), ": storage_order 1");
  YOLOCU_CHECK(k[0] > 0 && k[1] > 0 && k[0] <= (int64_t{1} << 24) && k[1] <= (int64_t{1} << 24) && s[0] > 0 &&
                   s[1] > 0 && d[0] > 0 && d[1] > 0,
               kInvalidArgument, n.describe(), ": invalid kernel, stride or dilation");
  return {k[0], k[1], s[0], s[1], p[0], p[1], p[2], p[3], d[0], d[1], n.attr_int("ceil_mode", 0) != 0};
}

int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d, bool ceil_mode) {
  const int64_t span = in + p0 + p1 - d * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p0) --o;  // last window must start inside the input or left pad
  return o;
}

void infer_maxpool(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  YOLOCU_CHECK(n.outputs.size() == 1 || n.outputs[1].empty(), kUnsupported, n.describe(), ": Indices output");
  const PoolParams p = pool_params(n, in[0].shape);
  const Shape& x = in[0].shape;
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = {x[0], x[1], pool_out(x[2], p.kh, p.sh, p.ph0, p.ph1, p.dh, p.ceil),
                  pool_out(x[3], p.kw, p.sw, p.pw0, p.pw1, p.dw, p.ceil)};
}

void compute_maxpool(const Node& n, int64_t, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  YOLOCU_CHECK(x.dtype() == DType::kFloat32, kUnsupported, n.describe(), ": element type ", dtype_name(x.dtype()));
  const PoolParams p = pool_params(n, x.shape());
  const int64_t planes = x.dim(0) * x.dim(1), H = x.dim(2), W = x.dim(3), OH = y.dim(2), OW = y.dim(3);
  const float* px = x.data_as<float>();
  float* py = y.data_as<float>();
#pragma omp parallel for schedule(static) if (planes * OH * OW >= kParallelMin)
  for (int64_t c = 0; c < planes; ++c) {
    const float* src = px + c * H * W;
    float* dst = py + c * OH * OW;
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t iy = oy * p.sh - p.ph0 + ky * p.dh;
          if (iy < 0 || iy >= H) continue;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t ix = ox * p.sw - p.pw0 + kx * p.dw;
            if (ix < 0 || ix >= W) continue;
            const float v = src[iy * W + ix];
            if (v > m || std::isnan(v)) m = v;
          }
        }
        dst[oy * OW + ox] = m;
      }
  }
}

struct ResizeSpec {
  std::vector<double> scales;  // per axis, output/input
  Shape out;
};

ResizeSpec resize_spec(const Node& n, int64_t opset, const Shape& x, const Tensor* scales, const Tensor* sizes) {
  ResizeSpec rs;
  const size_t r = x.size();
  if (sizes && sizes->numel() > 0) {
    const auto sz = to_int_vector(*sizes);
    YOLOCU_CHECK(sz.size() == r, kInvalidArgument, n.describe(), ": sizes has ", sz.size(), " entries for rank ", r);
    rs.out = Shape(sz.begin(), sz.end());
    for (size_t i = 0; i < r; ++i) rs.scales.push_back(x[i] ? static_cast<double>(sz[i]) / x[i] : 1.0);
  } else {
    YOLOCU_CHECK(scales && scales->numel() == static_cast<int64_t>(r), kInvalidArgument, n.describe(),
                 ": needs 'scales' or 'sizes' for every axis");
    const Tensor sf = cast_tensor(*scales, DType::kFloat32);
    for (size_t i = 0; i < r; ++i) {
      const float s = sf.data_as<float>()[i];
      const double len = std::floor(static_cast<double>(x[i]) * s);
      // no float -> int64 cast of inf or of a value beyond 2^62 (a hostile scale of 1e30)
      YOLOCU_CHECK(s > 0 && std::isfinite(len) && len < 4.6e18, kInvalidArgument, n.describe(), ": scale ", s,
                   " of axis ", i, " (size ", x[i], ") must be > 0 and give a representable size");
      rs.scales.push_back(s);
      rs.out.push_back(static_cast<int64_t>(len));
    }
  }
  return rs;
}

const Tensor* resize_arg(const Node& n, int64_t opset, const Metas& in, const char* which) {
  // opset 10: X, scales; opset 11+: X, roi, scales, sizes; Upsample 7-9: scales attr or input 1
  if (n.op_type == "Upsample" || opset < 11) return std::string(which) == "scales" && opt(in, 1) ? &need_const(n, in, 1, "scales") : nullptr;
  const size_t i = std::string(which) == "scales" ? 2 : 3;
  return opt(in, i) ? &need_const(n, in, i, which) : nullptr;
}

void check_resize_mode(const Node& n) {
  const std::string mode = n.attr_string("mode", "nearest");
  YOLOCU_CHECK(mode == "nearest", kUnsupported, n.describe(), ": mode '", mode,
               "' is not supported (YOLO exports use 'nearest')");
  // opset 18 attributes: only their defaults
  YOLOCU_CHECK(n.attr_int("antialias", 0) == 0, kUnsupported, n.describe(), ": antialias is not supported");
  YOLOCU_CHECK(!n.has_attr("axes"), kUnsupported, n.describe(), ": the 'axes' attribute is not supported");
  const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  YOLOCU_CHECK(policy == "stretch", kUnsupported, n.describe(), ": keep_aspect_ratio_policy '", policy,
               "' is not supported");
}

Tensor upsample_scales_attr(const Node& n) {
  const auto& a = n.attributes.at("scales").floats;
  Tensor t(DType::kFloat32, {static_cast<int64_t>(a.size())});
  std::copy(a.begin(), a.end(), t.data_as<float>());
  return t;
}

void infer_resize(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 4);
  check_resize_mode(n);
  Tensor attr_scales;
  const Tensor* scales = resize_arg(n, opset, in, "scales");
  if (!scales && n.has_attr("scales")) {
    attr_scales = upsample_scales_attr(n);
    scales = &attr_scales;
  }
  const Tensor* sizes = n.op_type == "Resize" && opset >= 11 ? resize_arg(n, opset, in, "sizes") : nullptr;
  YOLOCU_CHECK(!in[0].shape.empty(), kInvalidArgument, n.describe(), ": cannot resize a scalar");
  const ResizeSpec rs = resize_spec(n, opset, in[0].shape, scales, sizes);
  for (size_t i = 0; i < rs.out.size(); ++i)  // an output axis needs a source (found by fuzzing)
    YOLOCU_CHECK(rs.out[i] == 0 || in[0].shape[i] > 0, kInvalidArgument, n.describe(), ": axis ", i,
                 " resizes an empty input axis to ", rs.out[i]);
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = rs.out;
}

int64_t nearest_index(const std::string& ctm, const std::string& nm, int64_t o, double scale, int64_t in_len,
                      int64_t out_len) {
  double x;
  if (ctm == "asymmetric") x = o / scale;
  else if (ctm == "align_corners") x = out_len > 1 ? o * static_cast<double>(in_len - 1) / (out_len - 1) : 0.0;
  else if (ctm == "pytorch_half_pixel") x = out_len > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
  else if (ctm == "tf_half_pixel_for_nn") x = (o + 0.5) / scale;
  else x = (o + 0.5) / scale - 0.5;  // half_pixel
  int64_t i;
  if (nm == "floor") i = static_cast<int64_t>(std::floor(x));
  else if (nm == "ceil") i = static_cast<int64_t>(std::ceil(x));
  else if (nm == "round_prefer_ceil") i = static_cast<int64_t>(std::floor(x + 0.5));
  else i = (x - std::floor(x) == 0.5) ? static_cast<int64_t>(std::floor(x)) : static_cast<int64_t>(std::round(x));
  return std::clamp<int64_t>(i, 0, in_len - 1);
}

}  // namespace

std::vector<std::vector<int64_t>> resize_source_indices(const Node& n, int64_t opset, const Shape& x,
                                                        const std::vector<const Tensor*>& in) {
  Tensor attr_scales;
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
  if (n.op_type == "Upsample" || opset < 11) {
    scales = opt(in, 1);
  } else {
    scales = opt(in, 2);
    sizes = opt(in, 3);
  }
  if (!scales && n.has_attr("scales")) {
    attr_scales = upsample_scales_attr(n);
    scales = &attr_scales;
  }
  const ResizeSpec rs = resize_spec(n, opset, x, scales, sizes);
  const std::string ctm = opset >= 11 ? n.attr_string("coordinate_transformation_mode", "half_pixel") : "asymmetric";
  const std::string nm = opset >= 11 ? n.attr_string("nearest_mode", "round_prefer_floor") : "floor";
  std::vector<std::vector<int64_t>> idx(x.size());
  for (size_t d = 0; d < x.size(); ++d)
    for (int64_t o = 0; o < rs.out[d]; ++o) idx[d].push_back(nearest_index(ctm, nm, o, rs.scales[d], x[d], rs.out[d]));
  return idx;
}

namespace {

void compute_resize(const Node& n, int64_t opset, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const auto idx = resize_source_indices(n, opset, x.shape(), in);
  const size_t r = x.rank();
  const auto xs = strides_of(x.shape());
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  const int64_t inner = r ? y.shape().back() : 1;
  const int64_t rows = inner ? y.numel() / inner : 0;
  const auto* px = static_cast<const uint8_t*>(x.data());
  auto* py = static_cast<uint8_t*>(y.data());
#pragma omp parallel for schedule(static) if (y.numel() >= kParallelMin)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rem = row, base = 0;
    for (size_t d = r ? r - 1 : 0; d-- > 0;) {
      base += idx[d][static_cast<size_t>(rem % y.shape()[d])] * xs[d];
      rem /= y.shape()[d];
    }
    if (es == 4) {
      const float* s = reinterpret_cast<const float*>(px) + base;
      float* dd = reinterpret_cast<float*>(py) + row * inner;
      for (int64_t j = 0; j < inner; ++j) dd[j] = s[idx[r - 1][static_cast<size_t>(j)]];
    } else {
      for (int64_t j = 0; j < inner; ++j)
        std::memcpy(py + (row * inner + j) * es, px + (base + idx[r - 1][static_cast<size_t>(j)]) * es, static_cast<size_t>(es));
    }
  }
}

void infer_conv(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 3);
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  YOLOCU_CHECK(x.size() == 4 && w.size() == 4, kUnsupported, n.describe(), ": only 2-D convolution on NCHW input is supported (input ",
               shape_str(x), ", weights ", shape_str(w), ")");
  YOLOCU_CHECK(is_float(in[0].dtype) && in[1].dtype == in[0].dtype, kParse, n.describe(), ": input/weight types");
  const int64_t group = n.attr_int("group", 1);
  YOLOCU_CHECK(group >= 1 && group <= x[1] && x[1] % group == 0 && x[1] / group == w[1] && w[0] % group == 0,
               kInvalidArgument, n.describe(),
               ": input has ", x[1], " channels, weights ", shape_str(w), " with group ", group);
  if (opt(in, 2))
    YOLOCU_CHECK(in[2].shape == Shape{w[0]}, kInvalidArgument, n.describe(), ": bias shape ", shape_str(in[2].shape));
  const auto ks = n.attr_ints("kernel_shape", {w[2], w[3]});
  YOLOCU_CHECK(ks.size() == 2 && ks[0] == w[2] && ks[1] == w[3], kInvalidArgument, n.describe(), ": kernel_shape mismatch");
  const Window2d win = window_2d(n);
  const auto& s = win.strides;
  const auto& p = win.pads;
  const auto& d = win.dilations;
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = {x[0], w[0], pool_out(x[2], w[2], s[0], p[0], p[2], d[0], false),
                  pool_out(x[3], w[3], s[1], p[1], p[3], d[1], false)};
  YOLOCU_CHECK(out[0].shape[2] > 0 && out[0].shape[3] > 0, kInvalidArgument, n.describe(), ": input ", shape_str(x),
               " is smaller than the kernel");
}

// Direct convolution (reference; the executor runs oneDNN). Used for constant folding and tests.
void compute_conv(const Node& n, int64_t, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* b = opt(in, 2);
  Tensor& y = *out[0];
  YOLOCU_CHECK(x.dtype() == DType::kFloat32, kUnsupported, n.describe(), ": reference conv needs float32");
  const int64_t group = n.attr_int("group", 1);
  const Window2d win = window_2d(n);
  const auto& s = win.strides;
  const auto& p = win.pads;
  const auto& d = win.dilations;
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t K = w.dim(0), KH = w.dim(2), KW = w.dim(3), OH = y.dim(2), OW = y.dim(3);
  const int64_t cg = C / group, kg = K / group;
  const float* px = x.data_as<float>();
  const float* pw = w.data_as<float>();
  float* py = y.data_as<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = k / kg;
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double acc = b ? b->data_as<float>()[k] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < KH; ++ky) {
              const int64_t iy = oy * s[0] - p[0] + ky * d[0];
              if (iy < 0 || iy >= H) continue;
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t ix = ox * s[1] - p[1] + kx * d[1];
                if (ix < 0 || ix >= W) continue;
                acc += static_cast<double>(px[((nn * C + g * cg + c) * H + iy) * W + ix]) *
                       pw[((k * cg + c) * KH + ky) * KW + kx];
              }
            }
          py[((nn * K + k) * OH + oy) * OW + ox] = static_cast<float>(acc);
        }
    }
}

const OpDef kOps[] = {
    {"Conv", infer_conv, compute_conv, false},
    {"Add", infer_binary, compute_binary, false},
    {"Sub", infer_binary, compute_binary, false},
    {"Mul", infer_binary, compute_binary, false},
    {"Div", infer_binary, compute_binary, false},
    {"Pow", infer_binary, compute_binary, false},
    {"Max", infer_binary, compute_binary, false},
    {"Min", infer_binary, compute_binary, false},
    {"Equal", infer_binary, compute_binary, false},
    {"Greater", infer_binary, compute_binary, false},
    {"Less", infer_binary, compute_binary, false},
    {"Sigmoid", infer_unary_float, compute_unary, false},
    {"Relu", infer_unary_float, compute_unary, false},
    {"LeakyRelu", infer_unary_float, compute_unary, false},
    {"HardSigmoid", infer_unary_float, compute_unary, false},
    {"HardSwish", infer_unary_float, compute_unary, false},
    {"Exp", infer_unary_float, compute_unary, false},
    {"Sqrt", infer_unary_float, compute_unary, false},
    {"Floor", infer_unary_float, compute_unary, false},
    {"Ceil", infer_unary_float, compute_unary, false},
    {"Neg", infer_unary_float, compute_unary, false},
    {"Abs", infer_unary_float, compute_unary, false},
    {"Identity", infer_same, compute_copy, true},
    {"Cast", infer_cast, compute_cast, false},
    {"Constant", infer_constant, compute_constant, false},
    {"Shape", infer_shape, compute_shape, false},
    {"Reshape", infer_reshape, compute_copy, true},
    {"Unsqueeze", infer_unsqueeze, compute_copy, true},
    {"Squeeze", infer_squeeze, compute_copy, true},
    {"Flatten", infer_flatten, compute_copy, true},
    {"Transpose", infer_transpose, compute_transpose, false},
    {"Softmax", infer_softmax, compute_softmax, false},
    {"MatMul", infer_matmul, compute_matmul, false},
    {"Concat", infer_concat, compute_concat, false},
    {"Split", infer_split, compute_split, false},
    {"Slice", infer_slice, compute_slice, false},
    {"Gather", infer_gather, compute_gather, false},
    {"Range", infer_range, compute_range, false},
    {"Expand", infer_expand, compute_expand, false},
    {"Where", infer_where, compute_where, false},
    {"ConstantOfShape", infer_constant_of_shape, compute_constant_of_shape, false},
    {"MaxPool", infer_maxpool, compute_maxpool, false},
    {"Resize", infer_resize, compute_resize, false},
    {"Upsample", infer_resize, compute_resize, false},
};

}  // namespace

const OpDef* find_op(const std::string& op_type) {
  for (const auto& op : kOps)
    if (op_type == op.op_type) return &op;
  return nullptr;
}

std::vector<std::string> op_types() {
  std::vector<std::string> v;
  for (const auto& op : kOps) v.emplace_back(op.op_type);
  return v;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what) {
  const size_t r = std::max(a.size(), b.size());
  Shape s(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    YOLOCU_CHECK(da == db || da == 1 || db == 1, kInvalidArgument, what, ": shapes ", shape_str(a), " and ",
                 shape_str(b), " cannot be broadcast");
    s[i] = da == 1 ? db : da;
  }
  return s;
}

std::vector<int64_t> to_int_vector(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kInt64) {
    std::copy(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel(), v.begin());
  } else if (t.dtype() == DType::kInt32) {
    std::copy(t.data_as<int32_t>(), t.data_as<int32_t>() + t.numel(), v.begin());
  } else {
    fail(ErrorCode::kParse, "expected an int64/int32 tensor, got ", dtype_name(t.dtype()));
  }
  return v;
}

}  // namespace yolocu::ops

namespace yolocu {
const std::vector<std::string>& supported_ops() {
  static const std::vector<std::string> v = ops::op_types();
  return v;
}
}  // namespace yolocu

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
#include "engine/ops_internal.hpp"

namespace yolocu::ops {
namespace {

using namespace internal;

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
      // Signed integers negate with two's-complement wrap (-INT64_MIN == INT64_MIN, as the other
      // folded integer arithmetic does), never signed-overflow UB.
      auto negate = [](T v) -> T {
        if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
          using U = std::make_unsigned_t<T>;
          return static_cast<T>(static_cast<U>(U(0) - static_cast<U>(v)));
        } else {
          return T(-v);
        }
      };
      parallel_for(in[0]->numel(), [&](int64_t i) { py[i] = neg || px[i] < 0 ? negate(px[i]) : px[i]; });
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
    {"QuantizeLinear", infer_quantize_linear, compute_quantize_linear, false},
    {"DequantizeLinear", infer_dequantize_linear, compute_dequantize_linear, false},
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

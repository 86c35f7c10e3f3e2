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

// Output size of a window along one axis; every step checked (a dilation of 2^24 times a kernel
// declared by a graph input overflowed `d * (k - 1)`).
int64_t pool_out(const Node& n, int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d, bool ceil_mode) {
  const char* what = "the window's extent";
  const int64_t extent = checked_add(n, checked_mul(n, d, checked_sub(n, k, 1, what), what), 1, what);
  const int64_t span = checked_sub(n, checked_add(n, checked_add(n, in, p0, what), p1, what), extent, what);
  if (span < 0) return 0;
  int64_t o = (ceil_mode ? checked_add(n, span, s - 1, what) / s : span / s) + 1;
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
  out[0].shape = {x[0], x[1], pool_out(n, x[2], p.kh, p.sh, p.ph0, p.ph1, p.dh, p.ceil),
                  pool_out(n, x[3], p.kw, p.sw, p.pw0, p.pw1, p.dw, p.ceil)};
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
  // An empty output (a zero dimension) needs no tables, and another dimension may then be huge (a
  // scale of 1e9 next to one of 1e-30: tables of 4e9 entries, found by the onnx fuzzer).
  if (std::find(rs.out.begin(), rs.out.end(), int64_t{0}) != rs.out.end()) return idx;
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
  out[0].shape = {x[0], w[0], pool_out(n, x[2], w[2], s[0], p[0], p[2], d[0], false),
                  pool_out(n, x[3], w[3], s[1], p[1], p[3], d[1], false)};
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

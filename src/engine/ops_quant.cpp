// ONNX QuantizeLinear and DequantizeLinear (opsets 10-18), the Q / DQ nodes of an already quantised
// export (a QAT flow, or onnxruntime's quantize_static in QDQ format), computed as the ONNX
// reference does: q = saturate(round_half_even(x / scale) + zero_point) in int8 or uint8,
// x = (q - zero_point) * scale in float32 (q also int32: a quantised bias); per tensor (scalar scale) or per axis (a 1-D scale along
// the `axis` attribute, default 1). A weight's DequantizeLinear has constant inputs and folds into
// float weights when the engine is built; the activations' Q / DQ pairs run as these steps.
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/ops_internal.hpp"

namespace yolocu::ops::internal {
namespace {

// The quantised dtype: the zero point's when given (int8 or uint8), else uint8 (ONNX's default).
DType quant_dtype(const Node& n, const ValueMeta* zero_point) {
  if (zero_point == nullptr) return DType::kUInt8;
  YOLOCU_CHECK(zero_point->dtype == DType::kInt8 || zero_point->dtype == DType::kUInt8, kUnsupported, n.describe(),
               ": zero point of type ", dtype_name(zero_point->dtype), " (int8 and uint8 are supported)");
  return zero_point->dtype;
}

// Scale and zero point per channel of x: x seen as [outer, count, inner] (count 1 per tensor, else
// the axis' size), the zero points as floats.
struct QuantParams {
  const float* scale = nullptr;
  std::vector<float> zero;
  int64_t outer = 1, count = 1, inner = 1;
};

// Checks the scale / zero point shapes against x (scalar, or 1-D of x's size along `axis`).
void check_params(const Node& n, const Metas& in) {
  YOLOCU_CHECK(in[1].dtype == DType::kFloat32, kUnsupported, n.describe(), ": scale of type ", dtype_name(in[1].dtype),
               " (float32 is supported)");
  const Shape& x = in[0].shape;
  const Shape& s = in[1].shape;
  const int64_t numel = shape_numel(s);
  if (numel != 1 || s.size() > 1) {
    YOLOCU_CHECK(s.size() == 1, kInvalidArgument, n.describe(), ": scale must be a scalar or 1-D, has shape ", shape_str(s));
    const int64_t axis = norm_axis(n, n.attr_int("axis", 1), static_cast<int64_t>(x.size()));
    YOLOCU_CHECK(s[0] == x[static_cast<size_t>(axis)], kInvalidArgument, n.describe(), ": ", s[0],
                 " scales for axis ", axis, " of size ", x[static_cast<size_t>(axis)]);
  }
  if (const ValueMeta* zp = opt(in, 2))
    YOLOCU_CHECK(shape_numel(zp->shape) == numel, kInvalidArgument, n.describe(), ": zero point shape ",
                 shape_str(zp->shape), " differs from the scale's ", shape_str(s));
}

QuantParams params_of(const Node& n, const In& in) {
  QuantParams p;
  p.scale = in[1]->data_as<float>();
  p.count = in[1]->numel();
  p.zero.assign(static_cast<size_t>(p.count), 0.f);
  if (const Tensor* z = opt(in, 2))
    for (int64_t c = 0; c < p.count; ++c)
      switch (z->dtype()) {
        case DType::kInt8: p.zero[static_cast<size_t>(c)] = static_cast<float>(z->data_as<int8_t>()[c]); break;
        case DType::kInt32: p.zero[static_cast<size_t>(c)] = static_cast<float>(z->data_as<int32_t>()[c]); break;
        default: p.zero[static_cast<size_t>(c)] = static_cast<float>(z->data_as<uint8_t>()[c]); break;
      }
  const int64_t numel = in[0]->numel();
  if (p.count > 1) {
    const Shape& x = in[0]->shape();
    const int64_t axis = norm_axis(n, n.attr_int("axis", 1), static_cast<int64_t>(x.size()));
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) p.inner *= x[d];
  } else {
    p.inner = numel;
  }
  p.outer = p.count * p.inner > 0 ? numel / (p.count * p.inner) : 0;
  return p;
}

// y[i] = f(x[i], scale, zero) over every element: per tensor in one loop, per channel a (outer,
// channel) row of `inner` elements at a time.
template <typename X, typename Y, typename F>
void per_channel(const X* x, Y* y, const QuantParams& p, F f) {
  if (p.count == 1) {
    const float scale = p.scale[0], zero = p.zero[0];
#pragma omp parallel for if (p.inner > kParallelMin)
    for (int64_t i = 0; i < p.inner; ++i) y[i] = f(x[i], scale, zero);
    return;
  }
  const int64_t rows = p.outer * p.count;
#pragma omp parallel for if (rows * p.inner > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = r % p.count;
    const float scale = p.scale[c], zero = p.zero[static_cast<size_t>(c)];
    const X* xr = x + r * p.inner;
    Y* yr = y + r * p.inner;
    for (int64_t k = 0; k < p.inner; ++k) yr[k] = f(xr[k], scale, zero);
  }
}

template <typename Q>
void quantize(const float* x, Q* y, const QuantParams& p, float lo, float hi) {
  per_channel(x, y, p, [lo, hi](float v, float scale, float zero) {
    const float q = std::nearbyint(v / scale) + zero;  // ties to even (the default rounding mode)
    return static_cast<Q>(std::fmin(std::fmax(q, lo), hi));
  });
}

template <typename Q>
void dequantize(const Q* x, float* y, const QuantParams& p) {
  per_channel(x, y, p, [](Q v, float scale, float zero) { return (static_cast<float>(v) - zero) * scale; });
}

}  // namespace

void infer_quantize_linear(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 3);
  YOLOCU_CHECK(in[0].dtype == DType::kFloat32, kUnsupported, n.describe(), ": input of type ", dtype_name(in[0].dtype),
               " (float32 is supported)");
  check_params(n, in);
  out.resize(1);
  out[0].dtype = quant_dtype(n, opt(in, 2));
  out[0].shape = in[0].shape;
}

void compute_quantize_linear(const Node& n, int64_t, const In& in, const Out& out) {
  const QuantParams p = params_of(n, in);
  if (out[0]->dtype() == DType::kInt8)
    quantize(in[0]->data_as<float>(), out[0]->data_as<int8_t>(), p, -128.f, 127.f);
  else
    quantize(in[0]->data_as<float>(), out[0]->data_as<uint8_t>(), p, 0.f, 255.f);
}

void infer_dequantize_linear(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 3);
  YOLOCU_CHECK(in[0].dtype == DType::kInt8 || in[0].dtype == DType::kUInt8 || in[0].dtype == DType::kInt32,
               kUnsupported, n.describe(), ": input of type ", dtype_name(in[0].dtype),
               " (int8, uint8 and int32 are supported)");
  check_params(n, in);
  if (const ValueMeta* zp = opt(in, 2))
    YOLOCU_CHECK(zp->dtype == in[0].dtype, kInvalidArgument, n.describe(), ": zero point of type ",
                 dtype_name(zp->dtype), " for an input of type ", dtype_name(in[0].dtype));
  out.resize(1);
  out[0].dtype = DType::kFloat32;
  out[0].shape = in[0].shape;
}

void compute_dequantize_linear(const Node& n, int64_t, const In& in, const Out& out) {
  const QuantParams p = params_of(n, in);
  if (in[0]->dtype() == DType::kInt8)
    dequantize(in[0]->data_as<int8_t>(), out[0]->data_as<float>(), p);
  else if (in[0]->dtype() == DType::kInt32)  // a quantised bias (scale = input scale x weight scale)
    dequantize(in[0]->data_as<int32_t>(), out[0]->data_as<float>(), p);
  else
    dequantize(in[0]->data_as<uint8_t>(), out[0]->data_as<float>(), p);
}

}  // namespace yolocu::ops::internal

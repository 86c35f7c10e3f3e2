// ONNX QuantizeLinear and DequantizeLinear (opsets 10-18), the Q / DQ nodes of an already quantised
// export (a QAT flow, or onnxruntime's quantize_static in QDQ format), computed as the ONNX
// reference does: q = saturate(round_half_even(x / scale) + zero_point) in int8 or uint8,
// x = (q - zero_point) * scale in float32 (q also int32: a quantised bias); per tensor (scalar scale) or per axis (a 1-D scale along
// the `axis` attribute, default 1). A weight's DequantizeLinear has constant inputs and folds into
// float weights when the engine is built; the activations' Q / DQ pairs run as these steps.
#include <cmath>
#include <cstdint>

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

// Scale and zero point per element of x: `channel(i)` maps an element index to its scale index.
struct QuantParams {
  const float* scale = nullptr;
  const Tensor* zero_point = nullptr;
  int64_t count = 1;          // scales: 1 per tensor, else the axis' size
  int64_t inner = 1;          // elements after the axis
  int64_t channel(int64_t i) const { return count == 1 ? 0 : (i / inner) % count; }
  float zero(int64_t c) const {
    if (zero_point == nullptr) return 0.f;
    switch (zero_point->dtype()) {
      case DType::kInt8: return static_cast<float>(zero_point->data_as<int8_t>()[c]);
      case DType::kInt32: return static_cast<float>(zero_point->data_as<int32_t>()[c]);
      default: return static_cast<float>(zero_point->data_as<uint8_t>()[c]);
    }
  }
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
  p.zero_point = opt(in, 2);
  p.count = in[1]->numel();
  if (p.count > 1) {
    const Shape& x = in[0]->shape();
    const int64_t axis = norm_axis(n, n.attr_int("axis", 1), static_cast<int64_t>(x.size()));
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) p.inner *= x[d];
  }
  return p;
}

template <typename Q>
void quantize(const float* x, Q* y, int64_t count, const QuantParams& p, float lo, float hi) {
#pragma omp parallel for if (count > kParallelMin)
  for (int64_t i = 0; i < count; ++i) {
    const int64_t c = p.channel(i);
    const float v = std::nearbyint(x[i] / p.scale[c]) + p.zero(c);  // ties to even (the default rounding mode)
    y[i] = static_cast<Q>(std::fmin(std::fmax(v, lo), hi));
  }
}

template <typename Q>
void dequantize(const Q* x, float* y, int64_t count, const QuantParams& p) {
#pragma omp parallel for if (count > kParallelMin)
  for (int64_t i = 0; i < count; ++i) {
    const int64_t c = p.channel(i);
    y[i] = (static_cast<float>(x[i]) - p.zero(c)) * p.scale[c];
  }
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
  const int64_t count = in[0]->numel();
  if (out[0]->dtype() == DType::kInt8)
    quantize(in[0]->data_as<float>(), out[0]->data_as<int8_t>(), count, p, -128.f, 127.f);
  else
    quantize(in[0]->data_as<float>(), out[0]->data_as<uint8_t>(), count, p, 0.f, 255.f);
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
  const int64_t count = in[0]->numel();
  if (in[0]->dtype() == DType::kInt8)
    dequantize(in[0]->data_as<int8_t>(), out[0]->data_as<float>(), count, p);
  else if (in[0]->dtype() == DType::kInt32)  // a quantised bias (scale = input scale x weight scale)
    dequantize(in[0]->data_as<int32_t>(), out[0]->data_as<float>(), count, p);
  else
    dequantize(in[0]->data_as<uint8_t>(), out[0]->data_as<float>(), count, p);
}

}  // namespace yolocu::ops::internal

// The spatial ops of the reference executor: MaxPool, Resize / Upsample (nearest) and Conv, with
// their shape inference (overflow-checked windows). Registered in ops.cpp's table.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/check.hpp"
#include "engine/ops.hpp"
#include "engine/ops_internal.hpp"

namespace yolocu::ops {
namespace internal {

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

}  // namespace internal

using namespace internal;

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

namespace internal {

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

}  // namespace internal
}  // namespace yolocu::ops

// calibrate_int8() (yolocu/int8.hpp): the convolution sites of the CPU plan, two passes of the CPU
// engine over the images (max |x|, then histograms over [0, max |x|]), the thresholds of
// calib_stats.hpp, per-channel weight scales, and the optional sensitivity pass.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/check.hpp"
#include "core/sha256.hpp"
#include "engine/cpu/cpu_layout.hpp"
#include "engine/cpu/cpu_plan.hpp"
#include "engine/plan.hpp"
#include "engine/quant/calib_stats.hpp"
#include "engine/quant/conv_sites.hpp"
#include "engine/quant/int8_conv_ref.hpp"
#include "engine/quant/int8_math.hpp"
#include "engine/quant/sensitivity.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/image.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/letterbox.hpp"
#include "yolocu/model.hpp"

namespace yolocu {
namespace {

using engine::Plan;
using engine::quant::conv_sites;
using engine::quant::ConvSite;

// The network input of one image file: decoded, letterboxed and normalised as the detector does.
Tensor image_input(const std::string& bytes, const std::string& name, int width, int height, DType dtype) {
  const Image img = decode_image(bytes.data(), bytes.size(), {}, name);
  Tensor t(dtype, {1, 3, height, width});
  letterbox_to_input(img.view(), width, height, dtype, t.data());
  return t;
}

struct TensorStats {
  engine::quant::MinMax range;
  engine::quant::AbsHistogram hist;
};

float tensor_amax(const TensorStats& s, const Int8CalibrateOptions& o) {
  const float max_abs = s.range.amax();
  switch (o.method) {
    case CalibrationMethod::kMinMax: return max_abs;
    case CalibrationMethod::kPercentile: return engine::quant::percentile_amax(s.hist, o.percentile, max_abs);
    case CalibrationMethod::kEntropy: return engine::quant::entropy_amax(s.hist, max_abs);
  }
  return max_abs;
}

// SHA-256 over each image's file name, '\0', its size in decimal, '\0', and its bytes.
std::string images_sha256(const std::vector<std::string>& images) {
  detail::Sha256 hash;
  for (const std::string& path : images) {
    const std::string bytes = read_file_bytes(path);
    hash.update(std::filesystem::path(path).filename().string());
    hash.update(std::string(1, '\0') + std::to_string(bytes.size()) + std::string(1, '\0'));
    hash.update(bytes);
  }
  return hash.hex();
}

// Runs the engine over every image and hands each observed tensor to `add(tensor index, data)`.
template <typename Add>
void pass(CpuEngine& engine, const std::vector<std::string>& images, const std::vector<std::string>& names,
          int width, int height, DType dtype, const char* phase, const Int8CalibrateOptions& o, Add&& add) {
  for (size_t i = 0; i < images.size(); ++i) {
    const Tensor x = image_input(read_file_bytes(images[i]), images[i], width, height, dtype);
    engine.run_observed({x}, names, [&](size_t k, const Tensor& t) {
      YOLOCU_CHECK(t.dtype() == DType::kFloat32, kUnsupported, "INT8 calibration: tensor '", names[k], "' is ",
                   dtype_name(t.dtype()), ", not float32");
      add(k, t.data_as<float>(), static_cast<size_t>(t.numel()));
    });
    if (o.progress) o.progress(phase, static_cast<int64_t>(i + 1), static_cast<int64_t>(images.size()));
  }
}

// The activation scales from two passes over the images: max |x|, then (entropy, percentile) the
// histograms over [0, max |x|].
std::vector<Int8TensorScale> tensor_scales(const std::shared_ptr<const Model>& model, const std::vector<std::string>& images,
                                           const std::vector<std::string>& names, const Int8Calibration& c,
                                           const Int8CalibrateOptions& o) {
  CpuEngineOptions eo;
  eo.num_threads = o.num_threads;
  eo.fuse_detect_head = false;
  CpuEngine engine(model, eo);
  const DType dtype = model->graph.inputs[0].dtype;
  std::vector<TensorStats> stats(names.size());
  pass(engine, images, names, c.input_width, c.input_height, dtype, "range", o,
       [&](size_t k, const float* x, size_t n) { stats[k].range.add(x, n); });
  if (o.method != CalibrationMethod::kMinMax) {
    for (TensorStats& s : stats) s.hist = engine::quant::AbsHistogram(s.range.amax(), c.num_bins);
    pass(engine, images, names, c.input_width, c.input_height, dtype, "histogram", o,
         [&](size_t k, const float* x, size_t n) { stats[k].hist.add(x, n); });
  }
  std::vector<Int8TensorScale> scales;
  for (size_t k = 0; k < names.size(); ++k) {
    const float amax = tensor_amax(stats[k], o);
    scales.push_back({names[k], amax, engine::quant::int8_scale(amax)});
  }
  return scales;
}

// Int8CalibrateOptions::scales_from: its tensors, when it was made with these images and method.
std::vector<Int8TensorScale> reused_scales(const Int8Calibration& c, const Int8CalibrateOptions& o) {
  const Int8Calibration& r = *o.scales_from;
  YOLOCU_CHECK(r.model_sha256 == c.model_sha256, kInvalidArgument, "INT8 calibration: the scales to reuse were made "
               "for another model (sha256 ", r.model_sha256, ", this one's ", c.model_sha256, ")");
  YOLOCU_CHECK(r.images_sha256 == c.images_sha256 && r.num_images == c.num_images, kInvalidArgument,
               "INT8 calibration: the scales to reuse were made on other images (", r.num_images, " images, sha256 ",
               r.images_sha256, "; these: ", c.num_images, ", ", c.images_sha256, ")");
  YOLOCU_CHECK(r.method == c.method && r.percentile == c.percentile && r.num_bins == c.num_bins &&
                   r.input_width == c.input_width && r.input_height == c.input_height,
               kInvalidArgument, "INT8 calibration: the scales to reuse were made with another method (",
               calibration_method_name(r.method), ") or input size");
  return r.tensors;
}

// The network inputs of the first n images (the sensitivity pass).
std::vector<Tensor> first_inputs(const std::vector<std::string>& images, size_t n, const Int8Calibration& c, DType dtype) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < images.size() && i < n; ++i)
    inputs.push_back(image_input(read_file_bytes(images[i]), images[i], c.input_width, c.input_height, dtype));
  return inputs;
}

void check_options(const std::vector<std::string>& images, const Int8CalibrateOptions& o) {
  YOLOCU_CHECK(!images.empty(), kInvalidArgument, "INT8 calibration needs at least one image");
  YOLOCU_CHECK(o.percentile > 0 && o.percentile <= 100, kInvalidArgument, "percentile must be in (0, 100], got ",
               o.percentile);
  YOLOCU_CHECK(o.max_images >= 0 && o.keep_worst >= 0 && o.sensitivity_images >= 1 && o.num_threads >= 0,
               kInvalidArgument, "INT8 calibration: max_images, keep_worst, num_threads must be >= 0 and "
               "sensitivity_images >= 1");
  YOLOCU_CHECK(o.input_width >= 0 && o.input_height >= 0, kInvalidArgument, "INT8 calibration: negative input size");
}

// The network input size: the model's static size (options may only repeat it), else the
// options' size, else 640.
std::pair<int, int> input_size(const Model& model, const Int8CalibrateOptions& o) {
  YOLOCU_CHECK(model.graph.inputs.size() == 1, kUnsupported, "INT8 calibration: the model must have one input");
  const ValueInfo& in = model.graph.inputs[0];
  auto pick = [&](size_t axis, int requested, const char* what) {
    const bool fixed = in.has_shape && in.dims.size() == 4 && in.dims[axis].is_static();
    if (fixed) {
      const int64_t v = in.dims[axis].value;
      YOLOCU_CHECK(requested == 0 || requested == v, kInvalidArgument, "INT8 calibration: input ", what, " ", requested,
                   " requested, the model's is fixed at ", v);
      return static_cast<int>(v);
    }
    return requested > 0 ? requested : 640;
  };
  const int w = pick(3, o.input_width, "width"), h = pick(2, o.input_height, "height");
  YOLOCU_CHECK(w % model.stride() == 0 && h % model.stride() == 0, kInvalidArgument, "INT8 calibration: input size ", w,
               "x", h, " must be a multiple of the model stride ", model.stride());
  return {w, h};
}

}  // namespace

Int8Calibration calibrate_int8(const std::string& onnx_path, const std::vector<std::string>& all_images,
                               const Int8CalibrateOptions& o) {
  check_options(all_images, o);
  const std::string onnx = read_file_bytes(onnx_path);
  auto model = std::make_shared<const Model>(parse_onnx(onnx.data(), onnx.size(), onnx_path));
  std::vector<std::string> images = all_images;
  if (o.max_images > 0 && images.size() > static_cast<size_t>(o.max_images)) images.resize(static_cast<size_t>(o.max_images));
  Int8Calibration c;
  c.method = o.method;
  c.percentile = o.percentile;
  c.model_sha256 = detail::sha256_hex(onnx);
  std::tie(c.input_width, c.input_height) = input_size(*model, o);
  std::vector<ConvSite> sites = conv_sites(*model, c.input_width, c.input_height);
  std::vector<std::string> names;
  std::map<std::string, size_t> index;
  for (const ConvSite& s : sites)
    for (const std::string& t : {s.scales.input, s.scales.output})
      if (index.emplace(t, names.size()).second) names.push_back(t);

  c.num_images = static_cast<int64_t>(images.size());
  c.images_sha256 = images_sha256(images);
  c.tensors = o.scales_from ? reused_scales(c, o) : tensor_scales(model, images, names, c, o);
  for (const std::string& name : names)
    YOLOCU_CHECK(c.tensor(name), kInvalidArgument, "INT8 calibration: the scales to reuse lack tensor '", name, "'");
  for (ConvSite& s : sites) {
    s.scales.keep_float = o.keep_detect_and_stem && (s.stem || s.head);
    c.convs.push_back(s.scales);
  }
  if (o.keep_worst > 0) {
    const auto progress = [&](int64_t done, int64_t total) {
      if (o.progress) o.progress("sensitivity", done, total);
    };
    const std::vector<Tensor> inputs =
        first_inputs(images, static_cast<size_t>(o.sensitivity_images), c, model->graph.inputs[0].dtype);
    engine::quant::sensitivity_pass(model, inputs, o.keep_worst, o.num_threads, c, progress);
  }
  return c;
}

}  // namespace yolocu

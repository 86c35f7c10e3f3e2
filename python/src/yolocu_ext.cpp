// yolocu._yolocu: the nanobind extension under the Python package `yolocu` (python/yolocu).
//
// A thin layer over the public C++ API (yolocu/detector.hpp, pipeline.hpp, image.hpp): it checks
// the Python inputs (dtype, shape, strides, device) and hands them to the pipeline (decoding on
// worker threads, detection, eval: the loop the CLI runs) without copying host pixels, and
// releases the GIL for everything that runs in C++, so that calls from several Python threads
// overlap. The thread contract is the C++ one: one Detector may be called from several threads at
// once.
//
// yolocu::Error is translated to Python exceptions: kInvalidArgument / kParse / kUnsupported ->
// ValueError, kIo -> OSError (FileNotFoundError for a missing file), kOutOfMemory -> MemoryError,
// kCuda / kInternal -> RuntimeError. The message names the problem and the image's index.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/eval.hpp"
#include "yolocu/image.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/pipeline.hpp"
#include "ext_bindings.hpp"

#if defined(YOLOCU_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// ---- results ------------------------------------------------------------------------------------

template <typename T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& v, std::initializer_list<size_t> shape) {
  if (v.empty()) v.reserve(1);  // a valid pointer even for an empty array
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape, owner);
}

// (boxes N x 4 float32 xyxy, scores N float32, classes N int32, width, height)
nb::tuple result_tuple(const yolocu::Detections& dets, int width, int height) {
  const size_t n = dets.size();
  std::vector<float> boxes(n * 4), scores(n);
  std::vector<int32_t> classes(n);
  for (size_t i = 0; i < n; ++i) {
    boxes[4 * i + 0] = dets[i].x1, boxes[4 * i + 1] = dets[i].y1;
    boxes[4 * i + 2] = dets[i].x2, boxes[4 * i + 3] = dets[i].y2;
    scores[i] = dets[i].confidence;
    classes[i] = dets[i].class_id;
  }
  return nb::make_tuple(to_numpy(std::move(boxes), {n, 4}), to_numpy(std::move(scores), {n}),
                        to_numpy(std::move(classes), {n}), width, height);
}

// ---- inputs -------------------------------------------------------------------------------------

// One image of a call: a host view (NumPy array, host DLPack tensor), encoded bytes, a file path,
// or (CUDA builds) a CUDA tensor: read in place by a CUDA detector on its GPU, else copied to the
// host before detection.
struct Input {
  enum Kind { kView, kBytes, kPath, kDeviceView } kind = kView;
  yolocu::ImageView view;  // kView, kDeviceView
  int device_id = 0;       // kDeviceView
  const char* bytes = nullptr;
  size_t size = 0;         // kBytes
  std::string path;        // kPath
  yolocu::Image owned;     // decoded (kBytes, kPath) or copied (kDeviceView) pixels
};

using Array = nb::ndarray<nb::ro>;  // read-only arrays too (np.frombuffer, Triton's inputs)

std::string shape_text(const Array& a) {
  std::string s = "(";
  for (size_t d = 0; d < a.ndim(); ++d) s += (d ? ", " : "") + std::to_string(a.shape(d));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

std::string dtype_text(const nb::dlpack::dtype& t) {
  const char* kind = t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Int)     ? "int"
                     : t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::UInt)  ? "uint"
                     : t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) ? "float"
                     : t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bool)  ? "bool"
                                                                                     : "other";
  return std::string(kind) + std::to_string(t.bits);
}

// Checks an array (NumPy, or any DLPack producer) and describes it as an image view. Raises
// TypeError (dtype) or ValueError (shape, strides, empty) naming image `i` and the problem.
Input array_input(const Array& a, size_t i) {
  const std::string where = "image " + std::to_string(i) + ": ";
  if (a.dtype() != nb::dtype<uint8_t>())
    throw nb::type_error((where + "dtype " + dtype_text(a.dtype()) +
                          ", expected uint8 (an HxWx3 BGR image as cv2.imread returns it)").c_str());
  if (a.ndim() == 2)
    throw nb::value_error((where + "shape " + shape_text(a) +
                           " has 1 channel (grey); expected HxWx3 BGR (cv2.cvtColor(img, cv2.COLOR_GRAY2BGR))").c_str());
  if (a.ndim() != 3)
    throw nb::value_error((where + "shape " + shape_text(a) + ", expected HxWx3 (BGR)").c_str());
  if (a.shape(2) != 3)
    throw nb::value_error((where + "shape " + shape_text(a) + " has " + std::to_string(a.shape(2)) +
                           " channels, expected 3 (BGR)" +
                           (a.shape(2) == 4 ? "; drop alpha with cv2.cvtColor(img, cv2.COLOR_BGRA2BGR)" : ""))
                              .c_str());
  if (a.shape(0) == 0 || a.shape(1) == 0)
    throw nb::value_error((where + "empty image, shape " + shape_text(a)).c_str());
  if (a.shape(0) > (1u << 20) || a.shape(1) > (1u << 20))
    throw nb::value_error((where + "image too large, shape " + shape_text(a)).c_str());
  // Pixels interleaved (B, G, R adjacent) and each row's pixels adjacent; rows may be padded (a
  // crop of a larger array works without a copy). Strides are in elements (bytes for uint8).
  const int64_t s0 = a.stride(0), s1 = a.stride(1), s2 = a.stride(2);
  const int64_t row = static_cast<int64_t>(a.shape(1)) * 3;
  if (s2 != 1 || s1 != 3 || s0 < row)
    throw nb::value_error((where + "strides (" + std::to_string(s0) + ", " + std::to_string(s1) + ", " +
                           std::to_string(s2) + ") elements: the pixels of a row must be contiguous and rows must " +
                           "go forward (no negative strides, no [:, ::2] or channel views); pass np.ascontiguousarray(img)")
                              .c_str());
  Input in;
  in.view = {static_cast<const uint8_t*>(a.data()), static_cast<int>(a.shape(1)), static_cast<int>(a.shape(0)),
             static_cast<size_t>(s0)};
  if (a.device_type() == nb::device::cpu::value) {
    in.kind = Input::kView;
  } else if (a.device_type() == nb::device::cuda::value) {
#if defined(YOLOCU_WITH_CUDA)
    in.kind = Input::kDeviceView;
    in.device_id = a.device_id();
#else
    throw nb::type_error((where + "a CUDA tensor, but this build of yolocu has no CUDA support; pass a host array").c_str());
#endif
  } else {
    throw nb::type_error((where + "tensor on an unsupported device (DLPack device type " +
                          std::to_string(a.device_type()) + "); pass a host array or a CUDA tensor").c_str());
  }
  return in;
}

// A CUDA tensor copied to host memory (one pitched device-to-host copy, after the producer's work
// on the device is finished), for a detector that takes host images. Runs without the GIL.
void copy_to_host(Input& in, size_t i) {
#if defined(YOLOCU_WITH_CUDA)
  yolocu::Image host(in.view.width, in.view.height);
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(in.device_id);
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess)
    e = cudaMemcpy2D(host.data(), host.pitch_bytes(), in.view.data, in.view.pitch_bytes, host.pitch_bytes(),
                     static_cast<size_t>(in.view.height), cudaMemcpyDeviceToHost);
  cudaSetDevice(prev);
  if (e != cudaSuccess)
    throw yolocu::Error(yolocu::ErrorCode::kCuda, "image " + std::to_string(i) + ": copying the CUDA tensor failed: " +
                                                      cudaGetErrorString(e));
  in.owned = std::move(host);
  in.view = in.owned.view();
  in.kind = Input::kView;
#else
  (void)in, (void)i;
#endif
}

// The inputs as the pipeline's sources (CUDA tensors copied to the host first). Runs without the GIL.
std::vector<yolocu::Source> to_sources(std::vector<Input>& inputs) {
  std::vector<yolocu::Source> sources;
  sources.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Input& in = inputs[i];
    if (in.kind == Input::kDeviceView) copy_to_host(in, i);
    const std::string name = "image " + std::to_string(i);
    if (in.kind == Input::kBytes) sources.push_back(yolocu::Source::encoded(in.bytes, in.size, name));
    else if (in.kind == Input::kPath) sources.push_back(yolocu::Source::file(in.path));
    else sources.push_back(yolocu::Source::decoded(in.view, name));
  }
  return sources;
}

// The first failure of a run, in input order, rethrown as it was thrown.
void rethrow_first_error(const std::vector<yolocu::ImageResult>& results) {
  for (const yolocu::ImageResult& r : results) {
    if (r.exception) std::rethrow_exception(r.exception);
    if (!r.error.empty()) throw yolocu::Error(yolocu::ErrorCode::kIo, r.error);
  }
}

// The message of a failed image: what() of its exception, else its error text.
std::string error_message(const yolocu::ImageResult& r) {
  if (!r.exception) return r.error;
  try {
    std::rethrow_exception(r.exception);
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Sorts a Python list (already flattened by the Python layer) into inputs. Keeps no references:
// the caller's list keeps the arrays and bytes alive for the duration of the call.
std::vector<Input> collect_inputs(const nb::list& items) {
  std::vector<Input> inputs;
  inputs.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    nb::handle h = items[i];
    if (nb::isinstance<nb::bytes>(h)) {
      nb::bytes b = nb::borrow<nb::bytes>(h);
      Input in;
      in.kind = Input::kBytes;
      in.bytes = b.c_str();
      in.size = b.size();
      if (in.size == 0) throw nb::value_error(("image " + std::to_string(i) + ": empty bytes").c_str());
      inputs.push_back(std::move(in));
    } else if (nb::isinstance<nb::str>(h)) {
      Input in;
      in.kind = Input::kPath;
      in.path = nb::cast<std::string>(h);
      inputs.push_back(std::move(in));
    } else {
      Array a;
      if (!nb::try_cast(h, a, false))
        throw nb::type_error(("image " + std::to_string(i) + ": expected a NumPy array, a DLPack tensor, a path or " +
                              "encoded bytes, got " + nb::cast<std::string>(nb::str(nb::type_name(h.type()))))
                                 .c_str());
      inputs.push_back(array_input(a, i));
    }
  }
  return inputs;
}

yolocu::Device parse_device(const std::string& s, int* index) {
  *index = 0;
  if (s == "auto") return yolocu::Device::kAuto;
  if (s == "cpu") return yolocu::Device::kCpu;
  if (s == "cuda" || s == "gpu") return yolocu::Device::kCuda;
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 &&
      std::all_of(s.begin() + 5, s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    *index = std::stoi(s.substr(5));
    return yolocu::Device::kCuda;
  }
  if (!s.empty() && s.size() < 4 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    *index = std::stoi(s);
    return yolocu::Device::kCuda;
  }
  throw nb::value_error(("device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got '" + s + "'").c_str());
}

// ---- the detector -------------------------------------------------------------------------------

// The Python Detector's options. iou < 0 (Python's None) leaves the IoU threshold to the model
// family, as `defaults` ("predict" or "val") says; the Detector resolves it from the parsed model.
struct PyOptions {
  std::string device = "auto", precision = "fp16", decode = "cpu", defaults = "predict";
  std::string calibration;  // precision "int8": the calibration file (yolocu calibrate)
  float conf = 0.25f, iou = -1.f, decode_cpu_share = 0;
  int max_det = 300, batch = 1, imgsz_h = 0, imgsz_w = 0, threads = 0, contexts = 1;
  std::vector<int> classes;
  bool agnostic = false, multi_label = false, engine_graphs = true;
  uint64_t max_memory = 0, max_device_memory = 0;
  int64_t max_pixels = yolocu::DecodeLimits::kDefaultMaxPixels;  // the largest image decoded
};

yolocu::DetectorOptions detector_options(const PyOptions& p) {
  yolocu::DetectorOptions o;
  o.device = parse_device(p.device, &o.cuda_device);
  if (p.precision == "fp16" || p.precision == "half") o.precision = yolocu::Precision::kFloat16;
  else if (p.precision == "fp32" || p.precision == "float") o.precision = yolocu::Precision::kFloat32;
  else if (p.precision == "int8") o.precision = yolocu::Precision::kInt8;  // its calibration: PyDetector
  else throw nb::value_error(("precision must be 'fp16', 'fp32' or 'int8', got '" + p.precision + "'").c_str());
  if (o.precision == yolocu::Precision::kInt8 && p.calibration.empty())
    throw nb::value_error("precision='int8' needs calibration=FILE (a calibration of this model by yolocu calibrate)");
  if (o.precision != yolocu::Precision::kInt8 && !p.calibration.empty())
    throw nb::value_error("calibration is the INT8 calibration: it goes with precision='int8'");
  if (!(p.conf >= 0 && p.conf <= 1)) throw nb::value_error(("conf must be in [0, 1], got " + std::to_string(p.conf)).c_str());
  if (!(p.iou < 0 || p.iou <= 1)) throw nb::value_error(("iou must be in [0, 1], got " + std::to_string(p.iou)).c_str());
  if (p.max_det < 1) throw nb::value_error(("max_det must be >= 1, got " + std::to_string(p.max_det)).c_str());
  if (p.batch < 1 || p.batch > 1024) throw nb::value_error(("batch must be in 1..1024, got " + std::to_string(p.batch)).c_str());
  for (int c : p.classes)
    if (c < 0) throw nb::value_error(("classes: class ids are >= 0, got " + std::to_string(c)).c_str());
  if (p.defaults == "predict") o.postprocess_defaults = yolocu::PostprocessDefaults::kPredict;
  else if (p.defaults == "val") o.postprocess_defaults = yolocu::PostprocessDefaults::kVal;
  else throw nb::value_error(("defaults must be 'predict' or 'val', got '" + p.defaults + "'").c_str());
  o.postprocess.conf_threshold = p.conf;
  o.postprocess.iou_threshold = p.iou < 0 ? yolocu::kFamilyDefault : p.iou;
  o.postprocess.max_det = p.max_det;
  o.postprocess.classes = p.classes;
  o.postprocess.agnostic = p.agnostic;
  o.postprocess.multi_label = p.multi_label;
  o.max_batch = p.batch;
  o.input_height = p.imgsz_h;
  o.input_width = p.imgsz_w;
  o.cpu_threads = p.threads;
  o.contexts = p.contexts;
  o.max_memory = p.max_memory;
  o.max_device_memory = p.max_device_memory;
  o.decode_limits.max_pixels = p.max_pixels;  // every decode of this Detector's (pool, nvJPEG, detect_encoded)
  yolocu::validate_decode_limits(o.decode_limits, "max_pixels");
  if (p.decode == "cpu") o.decode = yolocu::DecodeDevice::kCpu;
  else if (p.decode == "gpu" || p.decode == "nvjpeg") o.decode = yolocu::DecodeDevice::kGpu;
  else throw nb::value_error(("decode must be 'cpu' or 'gpu', got '" + p.decode + "'").c_str());
  o.decode_cpu_share = p.decode_cpu_share;  // range and combination checked by create()
  o.engine_graphs = p.engine_graphs;
  return o;
}

nb::dict metrics_dict(const yolocu::EvalRun& run) {
  const yolocu::MapResult& m = run.metrics;
  nb::dict d;
  d["map50"] = m.map50;
  d["map50_95"] = m.map50_95;
  d["precision"] = m.precision;
  d["recall"] = m.recall;
  d["num_images"] = m.num_images;
  d["num_labels"] = m.num_labels;
  nb::list per_class;
  for (const yolocu::ClassAp& c : m.per_class) {
    nb::dict e;
    e["class_id"] = c.class_id;
    e["labels"] = c.num_labels;
    e["predictions"] = c.num_predictions;
    e["ap50"] = c.ap50;
    e["ap50_95"] = c.ap50_95;
    e["precision"] = c.precision;
    e["recall"] = c.recall;
    per_class.append(e);
  }
  d["per_class"] = per_class;
  // images or label files that failed ("<path>: <message>", "<path>: labels: <message>")
  std::vector<std::string> errors;
  for (size_t i = 0; i < run.images.size(); ++i) {
    const yolocu::ImageResult& r = run.images[i];
    if (!r.error.empty()) errors.push_back(r.path + ": " + error_message(r));
    if (!run.label_errors[i].empty()) errors.push_back(r.path + ": labels: " + run.label_errors[i]);
  }
  d["errors"] = nb::cast(errors);
  return d;
}

class PyDetector {
 public:
  explicit PyDetector(const std::string& model, const PyOptions& options) {
    yolocu::DetectorOptions o = detector_options(options);
    nb::gil_scoped_release release;
    if (o.precision == yolocu::Precision::kInt8)  // bound to this model's bytes: another model's is refused
      o.int8_calibration = std::make_shared<const yolocu::Int8Calibration>(
          yolocu::load_int8_calibration(options.calibration, yolocu::file_sha256(model)));
    det_ = yolocu::Detector::create(model, o);
  }

  // This call's post-processing options: the detector's, with the keys of `over` (a dict or None:
  // conf, iou, max_det, classes, agnostic) in their place. The Python layer checks the values.
  yolocu::PostprocessOptions call_options(const nb::object& over) const {
    yolocu::PostprocessOptions p = det_->options().postprocess;
    if (over.is_none()) return p;
    const nb::dict d = nb::cast<nb::dict>(over);
    if (d.contains("conf")) p.conf_threshold = nb::cast<float>(d["conf"]);
    if (d.contains("iou")) p.iou_threshold = nb::cast<float>(d["iou"]);
    if (d.contains("max_det")) p.max_det = nb::cast<int>(d["max_det"]);
    if (d.contains("classes")) p.classes = nb::cast<std::vector<int>>(d["classes"]);
    if (d.contains("agnostic")) p.agnostic = nb::cast<bool>(d["agnostic"]);
    return p;
  }

  // items: a flat list of arrays / bytes / str paths; post: per-call options (call_options).
  // Returns one result tuple per item.
  nb::list detect(const nb::list& items, const nb::object& post) {
    std::vector<Input> inputs = collect_inputs(items);
    const yolocu::PostprocessOptions options = call_options(post);
#if defined(YOLOCU_WITH_CUDA)
    if (all_on_this_gpu(inputs)) return detect_on_device(inputs, options);
#endif
    std::vector<yolocu::ImageResult> results;
    {
      nb::gil_scoped_release release;
      const std::vector<yolocu::Source> sources = to_sources(inputs);
      size_t encoded = 0;
      for (const yolocu::Source& src : sources) encoded += src.kind != yolocu::Source::Kind::kDecoded ? 1 : 0;
      // One detect() call for the list (the detector batches it, last_times() covers it), its
      // encoded images decoded on up to one thread per core; decode "gpu" and every image encoded:
      // nvJPEG decodes them (detect_encoded), else the CPU does.
      yolocu::PipelineOptions po;
      po.batch = static_cast<int>(std::max<size_t>(sources.size(), 1));
      po.decode_threads = static_cast<int>(std::min<size_t>(std::max<size_t>(encoded, 1),
                                                            std::max(1u, std::thread::hardware_concurrency())));
      po.encoded = !sources.empty() && encoded == sources.size() &&
                   det_->options().decode == yolocu::DecodeDevice::kGpu;
      po.postprocess = &options;
      results = yolocu::run_pipeline(*det_, sources, po);
      rethrow_first_error(results);
    }
    nb::list out;
    for (const yolocu::ImageResult& r : results) out.append(result_tuple(r.detections, r.width, r.height));
    return out;
  }

  // val.py's metrics over image files and a folder of YOLO labels (LABELS/<stem>.txt): the loop of
  // `yolocu eval`.
  nb::dict evaluate(const std::vector<std::string>& paths, const std::string& labels_dir) {
    yolocu::EvalRun run;
    {
      nb::gil_scoped_release release;
      std::vector<yolocu::Source> sources;
      for (const std::string& p : paths) sources.push_back(yolocu::Source::file(p));
      yolocu::PipelineOptions po;
      po.batch = det_->options().max_batch;
      po.decode_threads = static_cast<int>(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
      po.encoded = det_->options().decode == yolocu::DecodeDevice::kGpu;
      run = yolocu::evaluate_sources(*det_, sources, labels_dir, po);
    }
    return metrics_dict(run);
  }

  std::vector<std::string> class_names() const { return det_->class_names(); }
  std::string device() const {
    if (det_->device() == yolocu::Device::kCuda) return "cuda:" + std::to_string(det_->options().cuda_device);
    return yolocu::device_name(det_->device());
  }
  nb::tuple imgsz() const { return nb::make_tuple(det_->input_height(), det_->input_width()); }
  int batch() const { return det_->options().max_batch; }
  // The post-processing options in use (the family's defaults resolved).
  nb::dict postprocess() const {
    const yolocu::PostprocessOptions& p = det_->options().postprocess;
    nb::dict d;
    d["conf"] = p.conf_threshold;
    d["iou"] = p.iou_threshold;
    d["max_det"] = p.max_det;
    d["multi_label"] = p.multi_label;
    d["agnostic"] = p.agnostic;
    d["classes"] = nb::cast(p.classes);
    return d;
  }
  nb::dict last_times() const {
    const yolocu::StageTimes t = det_->last_times();
    nb::dict d;
    d["preprocess"] = t.preprocess;
    d["inference"] = t.inference;
    d["postprocess"] = t.postprocess;
    d["total"] = t.total;
    d["gpu_upload"] = t.gpu_upload;
    d["gpu_letterbox"] = t.gpu_letterbox;
    d["gpu_engine"] = t.gpu_engine;
    d["gpu_postprocess"] = t.gpu_postprocess;
    d["gpu_timed_batches"] = t.gpu_timed_batches;
    d["gpu_untimed_batches"] = t.gpu_untimed_batches;
    d["batches"] = t.batches;
    d["max_in_flight"] = t.max_in_flight;
    return d;
  }
  void set_stage_profiling(bool on) { det_->set_stage_profiling(on); }
  void warm_up(const std::vector<int>& sizes) {
    nb::gil_scoped_release release;
    det_->warm_up(sizes);
  }

 private:
#if defined(YOLOCU_WITH_CUDA)
  // All images CUDA tensors on this CUDA detector's GPU: zero copy (the letterbox reads them in
  // place) once the device has finished writing them.
  bool all_on_this_gpu(const std::vector<Input>& inputs) const {
    return !inputs.empty() && det_->device() == yolocu::Device::kCuda &&
           std::all_of(inputs.begin(), inputs.end(), [&](const Input& in) {
             return in.kind == Input::kDeviceView && in.device_id == det_->options().cuda_device;
           });
  }

  nb::list detect_on_device(const std::vector<Input>& inputs, const yolocu::PostprocessOptions& options) {
    std::vector<yolocu::Detections> dets;
    {
      nb::gil_scoped_release release;
      int prev = 0;
      cudaGetDevice(&prev);
      cudaSetDevice(det_->options().cuda_device);
      const cudaError_t e = cudaDeviceSynchronize();
      cudaSetDevice(prev);
      if (e != cudaSuccess)
        throw yolocu::Error(yolocu::ErrorCode::kCuda, std::string("waiting for the CUDA tensors: ") + cudaGetErrorString(e));
      std::vector<yolocu::ImageView> views;
      for (const Input& in : inputs) views.push_back(in.view);
      dets = det_->detect_device(views, &options);
    }
    nb::list out;
    for (size_t i = 0; i < inputs.size(); ++i)
      out.append(result_tuple(dets[i], inputs[i].view.width, inputs[i].view.height));
    return out;
  }
#endif

  std::unique_ptr<yolocu::Detector> det_;
};

// Decodes a JPEG/PNG (path or bytes) exactly as yolocu's CLI does (cv2.imread's pixels).
// max_pixels: DecodeLimits::max_pixels (the other limits keep the library's defaults).
nb::ndarray<nb::numpy, uint8_t> decode(nb::handle src, int64_t max_pixels) {
  yolocu::DecodeLimits limits;
  limits.max_pixels = max_pixels;
  yolocu::validate_decode_limits(limits, "decode: max_pixels");
  yolocu::Image im;
  if (nb::isinstance<nb::bytes>(src)) {
    nb::bytes b = nb::borrow<nb::bytes>(src);
    if (b.size() == 0) throw nb::value_error("empty bytes");
    nb::gil_scoped_release release;
    im = yolocu::decode_image(b.c_str(), b.size(), limits, "image 0");
  } else if (nb::isinstance<nb::str>(src)) {
    const std::string path = nb::cast<std::string>(src);
    nb::gil_scoped_release release;
    im = yolocu::decode_image_file(path, limits);
  } else {
    throw nb::type_error("decode: expected a path (str) or encoded bytes");
  }
  const size_t h = static_cast<size_t>(im.height()), w = static_cast<size_t>(im.width());
  std::vector<uint8_t> px(im.data(), im.data() + im.size_bytes());
  return to_numpy(std::move(px), {h, w, 3});
}

bool cuda_available() {
#if defined(YOLOCU_WITH_CUDA)
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
#else
  return false;
#endif
}

}  // namespace

void bind_tracker(nb::module_& m);  // tracker_ext.cpp

NB_MODULE(_yolocu, m) {
  m.doc() = "yolocu's C++ core (nanobind). Use the `yolocu` package, not this module.";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const yolocu::Error& e) {
      const std::string msg = std::string(e.what());
      switch (e.code()) {
        case yolocu::ErrorCode::kInvalidArgument:
        case yolocu::ErrorCode::kParse:
        case yolocu::ErrorCode::kUnsupported:
          PyErr_SetString(PyExc_ValueError, msg.c_str());
          break;
        case yolocu::ErrorCode::kIo:
          if (msg.find("No such file") != std::string::npos)
            PyErr_SetString(PyExc_FileNotFoundError, msg.c_str());
          else
            PyErr_SetString(PyExc_OSError, msg.c_str());
          break;
        case yolocu::ErrorCode::kOutOfMemory:
          PyErr_SetString(PyExc_MemoryError, msg.c_str());
          break;
        default:
          PyErr_SetString(PyExc_RuntimeError, (std::string(yolocu::error_code_name(e.code())) + ": " + msg).c_str());
      }
    }
  });

  nb::class_<PyOptions>(m, "_Options")
      .def(nb::init<>())
      .def_rw("device", &PyOptions::device)
      .def_rw("precision", &PyOptions::precision)
      .def_rw("calibration", &PyOptions::calibration)
      .def_rw("decode", &PyOptions::decode)
      .def_rw("defaults", &PyOptions::defaults)
      .def_rw("conf", &PyOptions::conf)
      .def_rw("iou", &PyOptions::iou)
      .def_rw("decode_cpu_share", &PyOptions::decode_cpu_share)
      .def_rw("max_det", &PyOptions::max_det)
      .def_rw("batch", &PyOptions::batch)
      .def_rw("imgsz_h", &PyOptions::imgsz_h)
      .def_rw("imgsz_w", &PyOptions::imgsz_w)
      .def_rw("threads", &PyOptions::threads)
      .def_rw("contexts", &PyOptions::contexts)
      .def_rw("classes", &PyOptions::classes)
      .def_rw("agnostic", &PyOptions::agnostic)
      .def_rw("multi_label", &PyOptions::multi_label)
      .def_rw("engine_graphs", &PyOptions::engine_graphs)
      .def_rw("max_memory", &PyOptions::max_memory)
      .def_rw("max_device_memory", &PyOptions::max_device_memory)
      .def_rw("max_pixels", &PyOptions::max_pixels);

  nb::class_<PyDetector>(m, "_Detector")
      .def(nb::init<const std::string&, const PyOptions&>(), "model"_a, "options"_a)
      .def("detect", &PyDetector::detect, "items"_a, "post"_a = nb::none(),
           "Detects objects in a flat list of images (arrays, bytes, paths); the GIL is released.")
      .def("evaluate", &PyDetector::evaluate, "paths"_a, "labels_dir"_a)
      .def_prop_ro("class_names", &PyDetector::class_names)
      .def_prop_ro("device", &PyDetector::device)
      .def_prop_ro("imgsz", &PyDetector::imgsz)
      .def_prop_ro("batch", &PyDetector::batch)
      .def_prop_ro("postprocess", &PyDetector::postprocess)
      .def("last_times", &PyDetector::last_times)
      .def("set_stage_profiling", &PyDetector::set_stage_profiling, "on"_a)
      .def("warm_up", &PyDetector::warm_up, "sizes"_a = std::vector<int>{},
           "Makes every context ready for these batch sizes (default: 1..batch); the GIL is released.");
  m.def("decode", &decode, "source"_a, "max_pixels"_a = yolocu::DecodeLimits::kDefaultMaxPixels,
        "Decodes an image (path or bytes) to an HxWx3 uint8 BGR array.");
  m.def("cuda_available", &cuda_available, "True when this build has CUDA and a GPU is usable.");
  bind_tracker(m);
  yolocu::python::bind_annotate(m);
  yolocu::python::bind_video(m);
#if defined(YOLOCU_WITH_CUDA)
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif
}

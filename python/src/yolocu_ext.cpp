// yolocu._yolocu: the nanobind extension under the Python package `yolocu` (python/yolocu).
//
// A thin layer over the public C++ API (yolocu/detector.hpp, image.hpp, eval.hpp): it checks the
// Python inputs (dtype, shape, strides, device), hands them to the C++ detector without copying
// host pixels, and releases the GIL for everything that runs in C++ (decoding, detection, eval),
// so that calls from several Python threads overlap. The thread contract is the C++ one: one
// Detector may be called from several threads at once.
//
// yolocu::Error is translated to Python exceptions: kInvalidArgument / kParse / kUnsupported ->
// ValueError, kIo -> OSError (FileNotFoundError for a missing file), kOutOfMemory -> MemoryError,
// kCuda / kInternal -> RuntimeError. The message names the problem and the image's index.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/eval.hpp"
#include "yolocu/image.hpp"

#if defined(YOLOCU_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

namespace fs = std::filesystem;

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

// Decodes / copies input i if it is not yet a host view. Runs without the GIL.
void materialise_one(std::vector<Input>& inputs, size_t i) {
  {
    Input& in = inputs[i];
    const std::string name = "image " + std::to_string(i);
    if (in.kind == Input::kBytes) {
      in.owned = yolocu::decode_image(in.bytes, in.size, {}, name);
      in.view = in.owned.view();
    } else if (in.kind == Input::kPath) {
      in.owned = yolocu::decode_image_file(in.path);
      in.view = in.owned.view();
    } else if (in.kind == Input::kDeviceView) {
#if defined(YOLOCU_WITH_CUDA)
      // The detector takes host images: one pitched device-to-host copy (after the producer's
      // work on the device is finished).
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
        throw yolocu::Error(yolocu::ErrorCode::kCuda, name + ": copying the CUDA tensor failed: " + cudaGetErrorString(e));
      in.owned = std::move(host);
      in.view = in.owned.view();
#endif
    }
  }
}

// All inputs; encoded images are decoded on up to hardware_concurrency() threads. The first
// failure (in input order) is rethrown.
void materialise(std::vector<Input>& inputs) {
  size_t encoded = 0;
  for (const Input& in : inputs) encoded += (in.kind == Input::kBytes || in.kind == Input::kPath) ? 1 : 0;
  const size_t threads = std::min<size_t>(encoded, std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (size_t i = 0; i < inputs.size(); ++i) materialise_one(inputs, i);
    return;
  }
  std::vector<std::exception_ptr> errors(inputs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < inputs.size();) {
      try {
        materialise_one(inputs, i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
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

class PyDetector {
 public:
  PyDetector(const std::string& model, const std::string& device, const std::string& precision, float conf, float iou,
             int max_det, const std::vector<int>& classes, bool agnostic, bool multi_label, int batch, int imgsz_h,
             int imgsz_w, int threads, int contexts, uint64_t max_memory, uint64_t max_device_memory,
             const std::string& decode, float decode_cpu_share, bool engine_graphs) {
    yolocu::DetectorOptions o;
    o.device = parse_device(device, &o.cuda_device);
    if (precision == "fp16" || precision == "half") o.precision = yolocu::Precision::kFloat16;
    else if (precision == "fp32" || precision == "float") o.precision = yolocu::Precision::kFloat32;
    else throw nb::value_error(("precision must be 'fp16' or 'fp32', got '" + precision + "'").c_str());
    if (!(conf >= 0 && conf <= 1)) throw nb::value_error(("conf must be in [0, 1], got " + std::to_string(conf)).c_str());
    if (!(iou >= 0 && iou <= 1)) throw nb::value_error(("iou must be in [0, 1], got " + std::to_string(iou)).c_str());
    if (max_det < 1) throw nb::value_error(("max_det must be >= 1, got " + std::to_string(max_det)).c_str());
    if (batch < 1 || batch > 1024) throw nb::value_error(("batch must be in 1..1024, got " + std::to_string(batch)).c_str());
    for (int c : classes)
      if (c < 0) throw nb::value_error(("classes: class ids are >= 0, got " + std::to_string(c)).c_str());
    o.postprocess.conf_threshold = conf;
    o.postprocess.iou_threshold = iou;
    o.postprocess.max_det = max_det;
    o.postprocess.classes = classes;
    o.postprocess.agnostic = agnostic;
    o.postprocess.multi_label = multi_label;
    o.max_batch = batch;
    o.input_height = imgsz_h;
    o.input_width = imgsz_w;
    o.cpu_threads = threads;
    o.contexts = contexts;
    o.max_memory = max_memory;
    o.max_device_memory = max_device_memory;
    if (decode == "cpu") o.decode = yolocu::DecodeDevice::kCpu;
    else if (decode == "gpu" || decode == "nvjpeg") o.decode = yolocu::DecodeDevice::kGpu;
    else throw nb::value_error(("decode must be 'cpu' or 'gpu', got '" + decode + "'").c_str());
    o.decode_cpu_share = decode_cpu_share;  // range and combination checked by create()
    o.engine_graphs = engine_graphs;
    nb::gil_scoped_release release;
    det_ = yolocu::Detector::create(model, o);
  }

  // items: a flat list of arrays / bytes / str paths. Returns one result tuple per item.
  nb::list detect(const nb::list& items) {
    std::vector<Input> inputs = collect_inputs(items);
    std::vector<yolocu::Detections> dets;
#if defined(YOLOCU_WITH_CUDA)
    // All images CUDA tensors on this CUDA detector's GPU: zero copy (the letterbox reads them in
    // place) once the device has finished writing them.
    const bool all_on_device =
        !inputs.empty() && det_->device() == yolocu::Device::kCuda &&
        std::all_of(inputs.begin(), inputs.end(), [&](const Input& in) {
          return in.kind == Input::kDeviceView && in.device_id == det_->options().cuda_device;
        });
    if (all_on_device) {
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
        dets = det_->detect_device(views);
      }
      nb::list out;
      for (size_t i = 0; i < inputs.size(); ++i)
        out.append(result_tuple(dets[i], inputs[i].view.width, inputs[i].view.height));
      return out;
    }
#endif
    // decode "gpu" and every image encoded (bytes or a path): nvJPEG decodes them on the device
    // (detect_encoded); a call with arrays among them decodes on the CPU as usual.
    const bool all_encoded =
        !inputs.empty() && det_->options().decode == yolocu::DecodeDevice::kGpu &&
        std::all_of(inputs.begin(), inputs.end(),
                    [](const Input& in) { return in.kind == Input::kBytes || in.kind == Input::kPath; });
    if (all_encoded) {
      std::vector<yolocu::DecodedSize> sizes;
      {
        nb::gil_scoped_release release;
        std::vector<std::string> files(inputs.size());  // the bytes of the paths, kept for the call
        std::vector<yolocu::EncodedImage> encoded;
        for (size_t i = 0; i < inputs.size(); ++i) {
          const Input& in = inputs[i];
          if (in.kind == Input::kPath) {
            files[i] = yolocu::read_file_bytes(in.path);
            encoded.push_back({files[i].data(), files[i].size(), in.path});
          } else {
            encoded.push_back({in.bytes, in.size, "image " + std::to_string(i)});
          }
        }
        dets = det_->detect_encoded(encoded, &sizes);
      }
      nb::list out;
      for (size_t i = 0; i < inputs.size(); ++i) out.append(result_tuple(dets[i], sizes[i].width, sizes[i].height));
      return out;
    }
    {
      nb::gil_scoped_release release;
      materialise(inputs);  // CUDA tensors for a CPU detector (or mixed inputs): one copy to the host
      std::vector<yolocu::ImageView> views;
      views.reserve(inputs.size());
      for (const Input& in : inputs) views.push_back(in.view);
      dets = det_->detect(views);
    }
    nb::list out;
    for (size_t i = 0; i < inputs.size(); ++i)
      out.append(result_tuple(dets[i], inputs[i].view.width, inputs[i].view.height));
    return out;
  }

  // val.py's metrics over image files and a folder of YOLO labels (LABELS/<stem>.txt).
  nb::dict evaluate(const std::vector<std::string>& paths, const std::string& labels_dir) {
    yolocu::MapResult m;
    std::vector<std::string> errors;
    {
      nb::gil_scoped_release release;
      yolocu::MapEvaluator evaluator;
      const size_t batch = static_cast<size_t>(det_->options().max_batch);
      for (size_t start = 0; start < paths.size(); start += batch) {
        std::vector<yolocu::Image> images;
        std::vector<std::string> names;
        for (size_t k = start; k < std::min(paths.size(), start + batch); ++k) {
          try {
            images.push_back(yolocu::decode_image_file(paths[k]));
            names.push_back(paths[k]);
          } catch (const yolocu::Error& e) {
            errors.push_back(paths[k] + ": " + e.what());
          }
        }
        std::vector<yolocu::ImageView> views;
        for (const auto& im : images) views.push_back(im.view());
        const std::vector<yolocu::Detections> dets = det_->detect(views);
        for (size_t k = 0; k < images.size(); ++k) {
          const std::string label = (fs::path(labels_dir) / (fs::path(names[k]).stem().string() + ".txt")).string();
          try {
            evaluator.add_image(dets[k], yolocu::load_yolo_labels(label, images[k].width(), images[k].height()));
          } catch (const yolocu::Error& e) {
            errors.push_back(names[k] + ": labels: " + e.what());
          }
        }
      }
      m = evaluator.compute();
    }
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
    d["errors"] = nb::cast(errors);
    return d;
  }

  std::vector<std::string> class_names() const { return det_->class_names(); }
  std::string device() const {
    if (det_->device() == yolocu::Device::kCuda) return "cuda:" + std::to_string(det_->options().cuda_device);
    return yolocu::device_name(det_->device());
  }
  nb::tuple imgsz() const { return nb::make_tuple(det_->input_height(), det_->input_width()); }
  int batch() const { return det_->options().max_batch; }
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
  std::unique_ptr<yolocu::Detector> det_;
};

// Decodes a JPEG/PNG (path or bytes) exactly as yolocu's CLI does (cv2.imread's pixels).
nb::ndarray<nb::numpy, uint8_t> decode(nb::handle src) {
  Input in;
  if (nb::isinstance<nb::bytes>(src)) {
    nb::bytes b = nb::borrow<nb::bytes>(src);
    if (b.size() == 0) throw nb::value_error("empty bytes");
    in.kind = Input::kBytes, in.bytes = b.c_str(), in.size = b.size();
  } else if (nb::isinstance<nb::str>(src)) {
    in.kind = Input::kPath, in.path = nb::cast<std::string>(src);
  } else {
    throw nb::type_error("decode: expected a path (str) or encoded bytes");
  }
  yolocu::Image im;
  {
    nb::gil_scoped_release release;
    std::vector<Input> one;
    one.push_back(std::move(in));
    materialise(one);
    im = std::move(one[0].owned);
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

  nb::class_<PyDetector>(m, "_Detector")
      .def(nb::init<const std::string&, const std::string&, const std::string&, float, float, int,
                    const std::vector<int>&, bool, bool, int, int, int, int, int, uint64_t, uint64_t,
                    const std::string&, float, bool>(),
           "model"_a, "device"_a, "precision"_a, "conf"_a, "iou"_a, "max_det"_a, "classes"_a, "agnostic"_a,
           "multi_label"_a, "batch"_a, "imgsz_h"_a, "imgsz_w"_a, "threads"_a, "contexts"_a, "max_memory"_a,
           "max_device_memory"_a, "decode"_a = "cpu", "decode_cpu_share"_a = 0.f, "engine_graphs"_a = true)
      .def("detect", &PyDetector::detect, "items"_a,
           "Detects objects in a flat list of images (arrays, bytes, paths); the GIL is released.")
      .def("evaluate", &PyDetector::evaluate, "paths"_a, "labels_dir"_a)
      .def_prop_ro("class_names", &PyDetector::class_names)
      .def_prop_ro("device", &PyDetector::device)
      .def_prop_ro("imgsz", &PyDetector::imgsz)
      .def_prop_ro("batch", &PyDetector::batch)
      .def("last_times", &PyDetector::last_times)
      .def("set_stage_profiling", &PyDetector::set_stage_profiling, "on"_a)
      .def("warm_up", &PyDetector::warm_up, "sizes"_a = std::vector<int>{},
           "Makes every context ready for these batch sizes (default: 1..batch); the GIL is released.");
  m.def("decode", &decode, "source"_a, "Decodes a JPEG/PNG (path or bytes) to an HxWx3 uint8 BGR array.");
  m.def("cuda_available", &cuda_available, "True when this build has CUDA and a GPU is usable.");
#if defined(YOLOCU_WITH_CUDA)
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif
}

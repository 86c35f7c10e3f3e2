// Detector front end: option and image validation (once, before a backend is chosen), the model
// loaded once and the family's post-processing defaults resolved from it, the backend choice, and
// the asynchronous form.
#include "yolocu/detector.hpp"

#include <algorithm>

#include <chrono>
#include <functional>
#include <memory>
#include <future>
#include <system_error>

#include "core/check.hpp"
#include "pipeline/detector_backends.hpp"
#include "yolocu/int8.hpp"

#ifdef YOLOCU_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace yolocu {

const char* device_name(Device d) noexcept {
  switch (d) {
    case Device::kAuto: return "auto";
    case Device::kCpu: return "cpu";
    case Device::kCuda: return "cuda";
  }
  return "unknown";
}

const char* decode_device_name(DecodeDevice d) noexcept {
  switch (d) {
    case DecodeDevice::kCpu: return "cpu";
    case DecodeDevice::kGpu: return "gpu";
  }
  return "unknown";
}

namespace detail {

bool cuda_device_usable(int index) noexcept {
#ifdef YOLOCU_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" / "no driver" status
    return false;
  }
  return index >= 0 && index < count;
#else
  (void)index;
  return false;
#endif
}

std::vector<std::string> padded_class_names(const Model& model, int num_classes) {
  std::vector<std::string> names = model.class_names();
  names.resize(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].empty()) names[i] = class_name({}, static_cast<int>(i));
  return names;
}

void validate_image(const ImageView& im, size_t i) {
  YOLOCU_CHECK(im.data != nullptr, kInvalidArgument, "detect: image ", i, " has null data");
  YOLOCU_CHECK(im.width > 0 && im.height > 0, kInvalidArgument, "detect: image ", i,
               " has size ", im.width, "x", im.height, " (both must be > 0)");
  YOLOCU_CHECK(im.pitch_bytes >= static_cast<size_t>(im.width) * 3, kInvalidArgument,
               "detect: image ", i, " has pitch ", im.pitch_bytes, " bytes < width * 3 = ",
               static_cast<size_t>(im.width) * 3);
}

void validate_device_image(const DeviceImage& im, size_t i) {
  const bool nv12 = im.format == PixelFormat::kNv12;
  YOLOCU_CHECK(nv12 || im.format == PixelFormat::kBgr || im.format == PixelFormat::kRgb, kInvalidArgument,
               "detect_device: image ", i, " has an unknown pixel format (", static_cast<int>(im.format), ")");
  YOLOCU_CHECK(im.data != nullptr, kInvalidArgument, "detect_device: image ", i, " has null data");
  YOLOCU_CHECK(im.width > 0 && im.height > 0, kInvalidArgument, "detect_device: image ", i, " has size ", im.width,
               "x", im.height, " (both must be > 0)");
  const size_t row = static_cast<size_t>(im.width) * (nv12 ? 1 : 3);
  YOLOCU_CHECK(im.pitch_bytes >= row, kInvalidArgument, "detect_device: image ", i, " has pitch ", im.pitch_bytes,
               " bytes < ", nv12 ? "width = " : "width * 3 = ", row);
  if (nv12) {
    YOLOCU_CHECK(im.chroma != nullptr, kInvalidArgument, "detect_device: nv12 image ", i, " has no chroma plane");
    const size_t cp = im.chroma_pitch_bytes ? im.chroma_pitch_bytes : im.pitch_bytes;
    YOLOCU_CHECK(cp >= 2 * static_cast<size_t>((im.width + 1) / 2), kInvalidArgument, "detect_device: nv12 image ",
                 i, " has chroma pitch ", cp, " bytes < 2 * ((width + 1) / 2) = ",
                 2 * static_cast<size_t>((im.width + 1) / 2));
    YOLOCU_CHECK(im.range == YuvRange::kLimited || im.range == YuvRange::kFull, kInvalidArgument,
                 "detect_device: nv12 image ", i, " has an unknown YUV range");
  }
}

namespace {

void validate_detector_options(const DetectorOptions& o) {
  YOLOCU_CHECK(o.max_batch >= 1, kInvalidArgument, "DetectorOptions: max_batch must be >= 1, got ", o.max_batch);
  YOLOCU_CHECK(o.input_width >= 0 && o.input_height >= 0, kInvalidArgument,
               "DetectorOptions: input size must be >= 0 (0 = the model's), got ", o.input_width, "x",
               o.input_height);
  YOLOCU_CHECK(o.contexts >= 1, kInvalidArgument, "DetectorOptions: contexts must be >= 1, got ", o.contexts);
  YOLOCU_CHECK(o.cpu_threads >= 0, kInvalidArgument, "DetectorOptions: cpu_threads must be >= 0, got ",
               o.cpu_threads);
  YOLOCU_CHECK(o.cuda_device >= 0, kInvalidArgument, "DetectorOptions: cuda_device must be >= 0, got ",
               o.cuda_device);
  // conf, iou and max_det left to the family are checked once resolved (create_detector)
  validate_options(resolve_family_defaults(o.postprocess, OutputLayout::kYolov5, o.postprocess_defaults));
  YOLOCU_CHECK(o.decode == DecodeDevice::kCpu || o.decode == DecodeDevice::kGpu, kInvalidArgument,
               "DetectorOptions: decode must be kCpu or kGpu");
  YOLOCU_CHECK(o.decode_cpu_share >= 0.f && o.decode_cpu_share <= 0.9f, kInvalidArgument,
               "DetectorOptions: decode_cpu_share must be in [0, 0.9], got ", o.decode_cpu_share);
  YOLOCU_CHECK(o.decode_cpu_share == 0.f || o.decode == DecodeDevice::kGpu, kInvalidArgument,
               "DetectorOptions: decode_cpu_share applies to decode kGpu (the share of each batch nvJPEG leaves to "
               "the CPU); with decode kCpu every image is decoded on the CPU already");
  YOLOCU_CHECK(o.decode_limits.max_width > 0 && o.decode_limits.max_height > 0 && o.decode_limits.max_pixels > 0,
               kInvalidArgument, "DetectorOptions: decode_limits must be > 0, got max_width ",
               o.decode_limits.max_width, ", max_height ", o.decode_limits.max_height, ", max_pixels ",
               o.decode_limits.max_pixels);
  YOLOCU_CHECK(o.precision != Precision::kInt8 || o.int8_calibration, kInvalidArgument,
               "DetectorOptions: precision kInt8 needs int8_calibration (yolocu calibrate makes one)");
#ifndef YOLOCU_WITH_NVJPEG
  YOLOCU_CHECK(o.decode != DecodeDevice::kGpu, kUnsupported,
               "DetectorOptions: decode kGpu (nvJPEG): this build of yolocu has no nvJPEG (a CUDA build finds it in the "
               "CUDA toolkit or through scripts/nvjpeg.sh; docs/preprocess.md); use decode kCpu");
#endif
}

}  // namespace
}  // namespace detail

PostprocessOptions family_postprocess_options() {
  PostprocessOptions o;
  o.conf_threshold = kFamilyDefault;
  o.iou_threshold = kFamilyDefault;
  o.max_det = kFamilyDefaultMaxDet;
  return o;
}

PostprocessOptions resolve_family_defaults(const PostprocessOptions& options, OutputLayout layout,
                                           PostprocessDefaults which) {
  const PostprocessOptions family = which == PostprocessDefaults::kVal ? val_options(layout) : detect_options(layout);
  PostprocessOptions o = options;
  if (o.conf_threshold == kFamilyDefault) o.conf_threshold = family.conf_threshold;
  if (o.iou_threshold == kFamilyDefault) o.iou_threshold = family.iou_threshold;
  if (o.max_det == kFamilyDefaultMaxDet) o.max_det = family.max_det;
  if (!family.clip_boxes) o.clip_boxes = false;  // (YOLOv8 / YOLO11's val matches its boxes unclipped)
  return o;
}

namespace detail {
namespace {

using ModelLoader = std::function<std::shared_ptr<const Model>()>;

// The options with the post-processing left to the family resolved from the parsed model.
DetectorOptions with_family_defaults(const Model& model, const DetectorOptions& options) {
  const OutputLayout layout =
      model_info(model).family == ModelFamily::kYolov8 ? OutputLayout::kYolov8 : OutputLayout::kYolov5;
  DetectorOptions o = options;
  o.postprocess = resolve_family_defaults(options.postprocess, layout, options.postprocess_defaults);
  validate_options(o.postprocess);
  return o;
}

// Validates the options, loads the model once (after the device checks, so that a missing GPU is
// reported first), resolves the family's defaults and builds the backend: the GPU, or the CPU.
std::unique_ptr<Detector> create_detector(const ModelLoader& load, const DetectorOptions& requested) {
  detail::validate_detector_options(requested);
  if (requested.device == Device::kCuda) {
    YOLOCU_CHECK(detail::cuda_detector_available(), kUnsupported,
                 "Device::kCuda: this build of yolocu has no CUDA (it was built without it, YOLOCU_CUDA=OFF); use Device::kCpu or kAuto");
    YOLOCU_CHECK(detail::cuda_device_usable(requested.cuda_device), kCuda, "Device::kCuda: CUDA device ",
                 requested.cuda_device, " is not usable (no GPU, no driver, or index out of range)");
  }
  const std::shared_ptr<const Model> model = load();
  const DetectorOptions options = with_family_defaults(*model, requested);
  if (options.precision == Precision::kInt8) check_int8_calibration(*options.int8_calibration, *model);
  // An already quantised (QDQ) export runs on the GPU in INT8 with its own scales (import_qdq_int8);
  // on the CPU, its graph runs as written.
  const auto cuda_detector = [&]() {
    if (options.int8_calibration || !has_qdq_nodes(*model)) return detail::create_cuda_detector(model, options);
    QdqImport imported = import_qdq_int8(*model, options.input_width, options.input_height);
    DetectorOptions o = options;
    o.precision = Precision::kInt8;
    o.int8_calibration = std::make_shared<const Int8Calibration>(std::move(imported.calibration));
    return detail::create_cuda_detector(imported.model, o);
  };
  if (options.device == Device::kCuda) {
    auto det = cuda_detector();
    YOLOCU_CHECK(det != nullptr, kInternal, "CUDA detector factory returned nothing");
    return det;
  }
  if (options.device == Device::kAuto && detail::cuda_detector_available() &&
      detail::cuda_device_usable(options.cuda_device)) {
    // Auto: the GPU when it runs this model; a model the GPU detector does not support (another
    // task, an unsupported op, a QDQ export in a scheme yolocu's INT8 does not take) runs on the
    // CPU instead.
    try {
      auto det = cuda_detector();
      if (det) return det;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kUnsupported) throw;
    }
  }
  return detail::create_cpu_detector(model, options);
}

std::unique_ptr<Detector> create_checked(const std::string& name, const ModelLoader& load,
                                         const DetectorOptions& options) {
  std::unique_ptr<Detector> det = detail::oom_as_error(name, [&] { return detail::create_detector(load, options); });
  // GPU decode writes into the CUDA detector's memory: a detector that runs on the CPU (asked for,
  // or Device::kAuto without a usable GPU) refuses it rather than decoding elsewhere silently.
  YOLOCU_CHECK(options.decode != DecodeDevice::kGpu || det->device() == Device::kCuda, kUnsupported,
               "DetectorOptions: decode kGpu (nvJPEG) needs the CUDA detector, and this detector runs on the ",
               device_name(det->device()), " (device ", device_name(options.device), "); use decode kCpu");
  return det;
}

}  // namespace
}  // namespace detail

std::unique_ptr<Detector> Detector::create(const std::string& onnx_path, const DetectorOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Detector> det = detail::create_checked(
      onnx_path,
      [&] {
        LoadOptions lo;
        lo.max_memory = options.max_memory;  // parsing under the same budget as planning and running
        return std::make_shared<const Model>(load_onnx(onnx_path, lo));
      },
      options);
  det->build_info_.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return det;
}

std::unique_ptr<Detector> Detector::create(std::shared_ptr<const Model> model, const DetectorOptions& options) {
  YOLOCU_CHECK(model != nullptr, kInvalidArgument, "Detector::create: no model");
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Detector> det = detail::create_checked("model", [&] { return model; }, options);
  det->build_info_.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return det;
}

const PostprocessOptions& Detector::call_postprocess(const PostprocessOptions* postprocess) const {
  if (postprocess == nullptr) return options().postprocess;
  validate_options(*postprocess);
  return *postprocess;
}

std::vector<Detections> Detector::detect(const std::vector<ImageView>& images, DetectionTrace* trace,
                                         const PostprocessOptions* postprocess) {
  for (size_t i = 0; i < images.size(); ++i) detail::validate_image(images[i], i);
  const PostprocessOptions& post = call_postprocess(postprocess);
  if (images.empty()) {
    if (trace) *trace = DetectionTrace{};
    return {};
  }
  return detail::oom_as_error("detect", [&] { return run_detect(images, trace, post); });
}

std::vector<Detections> Detector::detect_device(const std::vector<ImageView>& images,
                                                const PostprocessOptions* postprocess) {
  for (size_t i = 0; i < images.size(); ++i) detail::validate_image(images[i], i);
  const PostprocessOptions& post = call_postprocess(postprocess);
  if (images.empty()) return {};
  return run_detect_device(images, post);
}

std::vector<Detections> Detector::detect_device(const std::vector<DeviceImage>& images,
                                                const PostprocessOptions* postprocess) {
  for (size_t i = 0; i < images.size(); ++i) detail::validate_device_image(images[i], i);
  const PostprocessOptions& post = call_postprocess(postprocess);
  if (images.empty()) return {};
  return run_detect_device_images(images, post);
}

std::vector<Detections> Detector::run_detect_device_images(const std::vector<DeviceImage>& images,
                                                           const PostprocessOptions& /*post*/) {
  detail::fail(ErrorCode::kUnsupported, "detect_device: ", pixel_format_name(images.at(0).format),
               " images in device memory need a CUDA detector (this one runs on ", device_name(device()), ")");
}

void Detector::warm_up(const std::vector<int>& batch_sizes) {
  const int max_batch = options().max_batch;
  std::vector<int> sizes = batch_sizes;
  if (sizes.empty())
    for (int n = 1; n <= max_batch; ++n) sizes.push_back(n);
  for (int n : sizes)
    YOLOCU_CHECK(n >= 1 && n <= max_batch, kInvalidArgument, "warm_up: batch size ", n, " is outside 1..", max_batch,
                 " (max_batch)");
  run_warm_up(sizes);
}

std::vector<Detections> Detector::run_detect_device(const std::vector<ImageView>& /*images*/,
                                                    const PostprocessOptions& /*post*/) {
  detail::fail(ErrorCode::kUnsupported, "detect_device: images in device memory need a CUDA detector (this one runs on ",
               device_name(device()), ")");
}

std::vector<Detections> Detector::detect_encoded(const std::vector<EncodedImage>& images,
                                                 std::vector<DecodedSize>* sizes,
                                                 const PostprocessOptions* postprocess) {
  for (size_t i = 0; i < images.size(); ++i)
    YOLOCU_CHECK(images[i].data != nullptr || images[i].size == 0, kInvalidArgument, "detect_encoded: image ", i,
                 " (", images[i].name, ") has null data and size ", images[i].size);
  const PostprocessOptions& post = call_postprocess(postprocess);
  std::vector<DecodedSize> local(images.size());
  std::vector<Detections> out;
  if (!images.empty())
    out = detail::oom_as_error("detect_encoded", [&] { return run_detect_encoded(images, local, post); });
  if (sizes) *sizes = std::move(local);
  return out;
}

std::vector<Detections> Detector::run_detect_encoded(const std::vector<EncodedImage>& images,
                                                     std::vector<DecodedSize>& sizes, const PostprocessOptions& post) {
  const DecodeLimits& limits = options().decode_limits;
  std::vector<Image> decoded;
  decoded.reserve(images.size());
  std::vector<ImageView> views;
  for (size_t i = 0; i < images.size(); ++i) {
    decoded.push_back(decode_image(images[i].data, images[i].size, limits, images[i].name));
    views.push_back(decoded.back().view());
    sizes[i] = {decoded.back().width(), decoded.back().height()};
  }
  count_decoded(0, static_cast<int64_t>(images.size()), 0, "cpu");
  return detect(views, nullptr, &post);
}

void Detector::count_decoded(int64_t gpu, int64_t cpu, int64_t cpu_fallback, const std::string& backend) {
  std::lock_guard<std::mutex> lock(decode_stats_mutex_);
  decode_stats_.images += gpu + cpu;
  decode_stats_.gpu += gpu;
  decode_stats_.cpu += cpu;
  decode_stats_.cpu_fallback += cpu_fallback;
  decode_stats_.backend = backend;
}

DecodeStats Detector::decode_stats() const {
  std::lock_guard<std::mutex> lock(decode_stats_mutex_);
  DecodeStats s = decode_stats_;
  if (s.backend.empty()) s.backend = options().decode == DecodeDevice::kCpu ? "cpu" : "";
  return s;
}

std::future<std::vector<Detections>> Detector::detect_async(std::vector<ImageView> images) {
  // Validate on the caller's thread so that argument errors surface at the call, not at get().
  for (size_t i = 0; i < images.size(); ++i) detail::validate_image(images[i], i);
  try {
    return std::async(std::launch::async, [this, imgs = std::move(images)]() { return detect(imgs); });
  } catch (const std::system_error& e) {  // no thread could be started (a process or memory limit)
    detail::fail(ErrorCode::kOutOfMemory, "detect_async: cannot start a thread: ", e.what());
  }
}

StageTimes Detector::last_times() const {
  std::lock_guard<std::mutex> lock(times_mutex_);
  const std::thread::id me = std::this_thread::get_id();
  for (const auto& [id, t] : times_)
    if (id == me) return t;
  return times_.empty() ? StageTimes{} : times_.front().second;
}

void Detector::record_times(const StageTimes& times) {
  std::lock_guard<std::mutex> lock(times_mutex_);
  const std::thread::id me = std::this_thread::get_id();
  auto it = std::find_if(times_.begin(), times_.end(), [&](const auto& e) { return e.first == me; });
  if (it != times_.end()) times_.erase(it);
  else if (times_.size() >= kTimesThreads) times_.pop_back();  // the thread that called least recently
  times_.insert(times_.begin(), {me, times});
}

}  // namespace yolocu

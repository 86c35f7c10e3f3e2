// CpuDetector: the reference pipeline on the host. Exact letterbox -> one batched input tensor ->
// CpuEngine (oneDNN) -> CPU post-processing (YOLOv5: merged output or the three raw Detect heads;
// YOLOv8 / YOLO11: the anchor-free [batch, 4 + nc, anchors] output).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "core/check.hpp"
#include "pipeline/detector_backends.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"

namespace yolocu::detail {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr int kDefaultInputSize = 640;

// What the model's outputs look like.
enum class OutputKind { kMerged, kRawHeads };

class CpuDetector final : public Detector {
 public:
  CpuDetector(std::shared_ptr<const Model> model, const DetectorOptions& options);

  Device device() const override { return Device::kCpu; }
  const std::vector<std::string>& class_names() const override { return names_; }
  OutputLayout output_layout() const override { return layout_; }
  int input_width() const override { return width_; }
  int input_height() const override { return height_; }
  const DetectorOptions& options() const override { return options_; }

 protected:
  std::vector<Detections> run_detect(const std::vector<ImageView>& images, DetectionTrace* trace,
                                     const PostprocessOptions& post) override;

 private:
  // One execution context: an engine (with its own activation arena) used by one call at a time.
  struct Context {
    std::unique_ptr<CpuEngine> engine;
  };
  class Lease;

  void inspect_model();

  DetectorOptions options_;
  std::shared_ptr<const Model> model_;
  std::vector<std::string> names_;
  int width_ = 0, height_ = 0;
  int64_t static_batch_ = -1;  // the model's fixed batch size, -1 when symbolic
  int chunk_ = 1;              // images per engine run
  DType input_dtype_ = DType::kFloat32;
  OutputKind kind_ = OutputKind::kMerged;
  OutputLayout layout_ = OutputLayout::kYolov5;  // of a merged output
  int num_classes_ = 0;

  std::vector<Context> contexts_;
  std::vector<int> free_;
  std::mutex pool_mutex_;
  std::condition_variable pool_cv_;

};

// RAII hold on a free context; waits while all are busy.
class CpuDetector::Lease {
 public:
  explicit Lease(CpuDetector& d) : d_(d) {
    std::unique_lock<std::mutex> lock(d_.pool_mutex_);
    d_.pool_cv_.wait(lock, [&] { return !d_.free_.empty(); });
    index_ = d_.free_.back();
    d_.free_.pop_back();
  }
  ~Lease() {
    {
      std::lock_guard<std::mutex> lock(d_.pool_mutex_);
      d_.free_.push_back(index_);
    }
    d_.pool_cv_.notify_one();
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  CpuEngine& engine() { return *d_.contexts_[static_cast<size_t>(index_)].engine; }

 private:
  CpuDetector& d_;
  int index_ = 0;
};

CpuDetector::CpuDetector(std::shared_ptr<const Model> model, const DetectorOptions& options)
    : options_(options), model_(std::move(model)) {
  inspect_model();
  CpuEngineOptions eo;
  eo.num_threads = options_.cpu_threads;
  eo.max_memory = options_.max_memory;
  if (options_.precision == Precision::kInt8) eo.int8 = options_.int8_calibration;
  contexts_.resize(static_cast<size_t>(options_.contexts));
  for (size_t i = 0; i < contexts_.size(); ++i) {
    contexts_[i].engine = std::make_unique<CpuEngine>(model_, eo);
    contexts_[i].engine->prepare({{chunk_, 3, height_, width_}});
    free_.push_back(static_cast<int>(i));
  }
}

void CpuDetector::inspect_model() {
  const Graph& g = model_->graph;
  const ModelInfo info = model_info(*model_);
  check_detection_model(info);  // segment / pose / obb / classify / end-to-end: refused by name
  layout_ = info.family == ModelFamily::kYolov8 ? OutputLayout::kYolov8 : OutputLayout::kYolov5;
  YOLOCU_CHECK(g.inputs.size() == 1, kUnsupported, "detector: the model must have one input, it has ",
               g.inputs.size());
  const ValueInfo& in = g.inputs[0];
  YOLOCU_CHECK(in.dtype == DType::kFloat32 || in.dtype == DType::kFloat16, kUnsupported,
               "detector: input '", in.name, "' must be float32 or float16, it is ", dtype_name(in.dtype));
  input_dtype_ = in.dtype;
  YOLOCU_CHECK(!in.has_shape || in.dims.size() == 4, kUnsupported, "detector: input '", in.name,
               "' must be 4-D (batch, 3, height, width)");
  auto dim = [&](size_t i) -> int64_t { return in.has_shape && in.dims[i].is_static() ? in.dims[i].value : -1; };
  YOLOCU_CHECK(dim(1) == -1 || dim(1) == 3, kUnsupported, "detector: input '", in.name,
               "' must have 3 channels, it has ", dim(1));
  static_batch_ = dim(0);
  YOLOCU_CHECK(static_batch_ != 0, kUnsupported, "detector: the model's batch size is 0");
  chunk_ = static_batch_ > 0 ? static_cast<int>(static_batch_) : options_.max_batch;

  // Network input size: the model's static size; options may only repeat it. Symbolic: the
  // options' size, else 640.
  const int stride = model_->stride();
  auto pick = [&](int64_t model_dim, int requested, const char* what) {
    if (model_dim > 0) {
      YOLOCU_CHECK(requested == 0 || requested == model_dim, kInvalidArgument, "detector: input ", what, " ",
                   requested, " requested, but the model's input is fixed at ", model_dim,
                   " (export the model with --dynamic, or at that size)");
      return static_cast<int>(model_dim);
    }
    return requested > 0 ? requested : kDefaultInputSize;
  };
  width_ = pick(dim(3), options_.input_width, "width");
  height_ = pick(dim(2), options_.input_height, "height");
  YOLOCU_CHECK(stride > 0 && width_ % stride == 0 && height_ % stride == 0, kInvalidArgument,
               "detector: input size ", width_, "x", height_, " must be a multiple of the model stride ", stride);

  // Outputs: one merged [batch, rows, 5 + nc] tensor (the first output when the export added
  // more), or the three raw Detect convolutions [batch, na * (5 + nc), ny, nx]. A symbolic
  // channel count (dynamic exports) is read from the output of one forward pass on zeros.
  YOLOCU_CHECK(!g.outputs.empty(), kUnsupported, "detector: the model has no outputs");
  std::vector<Shape> shapes;
  bool known = true;
  for (const ValueInfo& v : g.outputs) {
    Shape s;
    known = known && v.has_shape;
    for (const Dim& d : v.dims) {
      s.push_back(d.value);
      known = known && d.is_static();
    }
    shapes.push_back(s);
  }
  if (!known) {
    CpuEngineOptions po;
    po.num_threads = options_.cpu_threads;
    po.max_memory = options_.max_memory;
    CpuEngine probe(model_, po);
    const std::vector<Tensor> outs = probe.run({Tensor(input_dtype_, {chunk_, 3, height_, width_})});
    shapes.clear();
    for (const Tensor& t : outs) shapes.push_back(t.shape());
  }
  const Shape& o0 = shapes[0];
  int64_t nc = 0;
  if (layout_ == OutputLayout::kYolov8) {
    kind_ = OutputKind::kMerged;
    YOLOCU_CHECK(o0.size() == 3, kUnsupported, "detector: output '", g.outputs[0].name, "' of this ", info.title,
                 " model is ", shape_str(o0), ": expected [batch, 4 + nc, anchors]");
    nc = o0[1] - 4;
    YOLOCU_CHECK(nc >= 1, kUnsupported, "detector: output '", g.outputs[0].name, "' has ", o0[1],
                 " channels: not a YOLOv8 detection output (4 + nc)");
  } else {
    const bool raw = shapes.size() == 3 && o0.size() == 4;
    kind_ = raw ? OutputKind::kRawHeads : OutputKind::kMerged;
    YOLOCU_CHECK(raw || o0.size() == 3, kUnsupported, "detector: output '", g.outputs[0].name, "' is ",
                 shape_str(o0), ": expected [batch, rows, 5 + nc] or three [batch, 3 * (5 + nc), ny, nx] heads");
    const int64_t channels = raw ? o0[1] : o0[2];
    nc = raw ? channels / 3 - 5 : channels - 5;
    YOLOCU_CHECK(nc >= 1 && (!raw || channels % 3 == 0), kUnsupported, "detector: output '", g.outputs[0].name,
                 "' has ", channels, " channels: not a YOLOv5 detection output");
  }
  num_classes_ = static_cast<int>(nc);
  for (int c : options_.postprocess.classes)
    YOLOCU_CHECK(c >= 0 && c < num_classes_, kInvalidArgument, "detector: class filter ", c,
                 " is outside the model's classes 0..", num_classes_ - 1);

  names_ = padded_class_names(*model_, num_classes_);
}

std::vector<Detections> CpuDetector::run_detect(const std::vector<ImageView>& images, DetectionTrace* trace,
                                                const PostprocessOptions& post) {
  const auto t_start = Clock::now();
  const size_t n = images.size();
  const size_t plane = static_cast<size_t>(width_) * static_cast<size_t>(height_);
  const size_t image_elems = 3 * plane;
  const size_t elem = dtype_size(input_dtype_);
  const PostprocessOptions& po = post;

  if (trace) {
    *trace = DetectionTrace{};
    trace->input = Tensor(input_dtype_, {static_cast<int64_t>(n), 3, height_, width_});
  }
  std::vector<Detections> results(n);
  StageTimes st;
  Lease lease(*this);
  for (size_t first = 0; first < n; first += static_cast<size_t>(chunk_)) {
    const size_t count = std::min(n - first, static_cast<size_t>(chunk_));
    ++st.batches;
    st.max_in_flight = 1;  // one batch after the other on this call's thread
    // a fixed-batch model runs full batches: the unused slots stay zero
    const int64_t batch = static_batch_ > 0 ? static_batch_ : static_cast<int64_t>(count);

    auto t0 = Clock::now();
    Tensor input(input_dtype_, {batch, 3, height_, width_});
    std::vector<LetterboxGeometry> geoms(count);
    for (size_t i = 0; i < count; ++i) {
      uint8_t* dst = static_cast<uint8_t*>(input.data()) + i * image_elems * elem;
      geoms[i] = letterbox_to_input(images[first + i], width_, height_, input_dtype_, dst);
      if (trace) {
        Tensor lb(DType::kUInt8, {height_, width_, 3});
        letterbox_bgr(images[first + i], width_, height_, lb.data_as<uint8_t>());
        trace->letterboxed.push_back(lb);
        trace->geometry.push_back(geoms[i]);
        std::memcpy(static_cast<uint8_t*>(trace->input.data()) + (first + i) * image_elems * elem, dst,
                    image_elems * elem);
      }
    }
    st.preprocess += ms_since(t0);

    t0 = Clock::now();
    std::vector<Tensor> outputs = lease.engine().run({input});
    st.inference += ms_since(t0);

    t0 = Clock::now();
    if (trace) {
      if (trace->outputs.empty()) {
        for (const Tensor& o : outputs) {
          Shape s = o.shape();
          YOLOCU_CHECK(!s.empty() && s[0] == batch, kInternal, "detector: output batch ", shape_str(s));
          s[0] = static_cast<int64_t>(n);
          trace->outputs.emplace_back(o.dtype(), s);
        }
      }
      for (size_t k = 0; k < outputs.size(); ++k) {
        const size_t per_image = outputs[k].nbytes() / static_cast<size_t>(batch);
        std::memcpy(static_cast<uint8_t*>(trace->outputs[k].data()) + first * per_image, outputs[k].data(),
                    count * per_image);
      }
    }
    // decode -> NMS -> back-projection per image (postprocess_cpu's steps, with the candidates
    // kept for the trace)
    auto finish = [&](auto decode) {
      for (size_t i = 0; i < count; ++i) {
        const Candidates c = decode(static_cast<int64_t>(i));
        if (trace) trace->candidates.push_back(candidates_tensor(c));
        results[first + i] = project_cpu(c, nms_cpu(c, po), geoms[i], box_scaling(layout_), po.clip_boxes);
      }
    };
    if (kind_ == OutputKind::kMerged) {
      const OutputView view = output_view(outputs[0], layout_);
      YOLOCU_CHECK(view.num_classes() == num_classes_, kInternal, "detector: output has ", view.num_classes(),
                   " classes, expected ", num_classes_);
      finish([&](int64_t i) { return decode_cpu(view, i, po); });
    } else {
      const RawHeadsView heads = raw_heads_view(outputs, num_classes_);
      finish([&](int64_t i) { return decode_raw_heads_cpu(heads, i, po); });
    }
    st.postprocess += ms_since(t0);
  }
  st.total = ms_since(t_start);
  record_times(st);
  return results;
}

}  // namespace

Tensor candidates_tensor(const Candidates& c) {
  Tensor t(DType::kFloat32, {static_cast<int64_t>(c.size()), 6});
  float* p = t.data_as<float>();
  for (const Candidate& k : c) {
    *p++ = k.box.x1;
    *p++ = k.box.y1;
    *p++ = k.box.x2;
    *p++ = k.box.y2;
    *p++ = k.score;
    *p++ = static_cast<float>(k.class_id);
  }
  return t;
}

std::unique_ptr<Detector> create_cpu_detector(std::shared_ptr<const Model> model, const DetectorOptions& options) {
  return std::make_unique<CpuDetector>(std::move(model), options);
}

}  // namespace yolocu::detail

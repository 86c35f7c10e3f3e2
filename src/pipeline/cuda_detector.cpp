// CudaDetector: the GPU hot path. Per batch: images copied once into pinned staging and uploaded
// in chunks as they are copied, letterboxed on the device (one launch for the batch), the engine's
// forward (a replayed CUDA graph), decode + NMS + back-projection on the device, one small copy back.
// Only the final result synchronises. A call with several batches keeps up to `contexts` of them
// in flight, each on its own context (stream, engine, staging): the host stages and enqueues batch
// k+1 while the GPU runs batch k, and results are collected in input order. When every context is
// busy, the host copies the next batch into a spare pinned buffer before it waits for one.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "core/device_budget.hpp"
#include "pipeline/cuda_context.hpp"
#include "pipeline/cuda_device_input.hpp"
#include "pipeline/cuda_engine_options.hpp"
#include "pipeline/detector_backends.hpp"
#include "pipeline/host_staging.hpp"
#include "pipeline/jpeg_decoder_pool.hpp"
#include "pipeline/stream_gate.hpp"
#include "yolocu/model.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/image_decode_cuda.hpp"
#include "yolocu/letterbox_cuda.hpp"
#include "yolocu/postprocess_cuda.hpp"

namespace yolocu {
namespace {

using detail::Context;
using detail::DeviceBuffer;
using detail::GateOpener;
using detail::PinnedBuffer;

bool same_postprocess(const PostprocessOptions& a, const PostprocessOptions& b) {
  return a.conf_threshold == b.conf_threshold && a.iou_threshold == b.iou_threshold && a.max_det == b.max_det &&
         a.max_nms == b.max_nms && a.agnostic == b.agnostic && a.multi_label == b.multi_label &&
         a.classes == b.classes && a.nms == b.nms;
}

// A batch enqueued on a context, not yet collected.
struct InFlight {
  Context* c = nullptr;
  int n = 0;
  std::vector<LetterboxGeometry> geoms;
  std::shared_ptr<void> held;  // what the batch's stage holds until it is collected (its decoder)
};

class CudaDetector final : public Detector {
 public:
  CudaDetector(std::shared_ptr<const Model> model, const DetectorOptions& options) : model_(std::move(model)) {
    const ModelInfo info = model_info(*model_);
    check_detection_model(info);  // other tasks and end-to-end exports: refused by name
    layout_ = info.family == ModelFamily::kYolov8 ? OutputLayout::kYolov8 : OutputLayout::kYolov5;
    options_ = options;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      (void)cudaGetLastError();
      detail::fail(ErrorCode::kCuda, "no usable CUDA device (device cuda requested)");
    }
    YOLOCU_CHECK(options.cuda_device >= 0 && options.cuda_device < count, kInvalidArgument, "cuda_device ",
                 options.cuda_device, " does not exist (", count, " device(s))");
    YOLOCU_CUDA_CHECK(cudaSetDevice(options.cuda_device));
    validate_options(options.postprocess);
    const CudaEngineOptions eo = detail::cuda_engine_options(options);
    const int contexts = std::max(1, options.contexts);
    for (int i = 0; i < contexts; ++i) {
      auto c = std::make_unique<Context>();
      c->index = i;
      YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
      for (cudaEvent_t& e : c->events) YOLOCU_CUDA_CHECK(cudaEventCreate(&e));
      if (options.blocking_sync)
        YOLOCU_CUDA_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventBlockingSync | cudaEventDisableTiming));
      c->engine = std::make_unique<CudaEngine>(model_, eo);
      const Shape in = c->engine->input_shape(options.max_batch);
      input_h_ = static_cast<int>(in[2]);
      input_w_ = static_cast<int>(in[3]);
      raw_heads_ = layout_ == OutputLayout::kYolov5 && c->engine->num_outputs() == 3;
      if (layout_ == OutputLayout::kYolov8) {
        YOLOCU_CHECK(c->engine->num_outputs() == 1, kUnsupported, "the ", info.title, " model has ",
                     c->engine->num_outputs(), " outputs: expected one [batch, 4 + nc, anchors]");
        const Shape o = c->engine->output_shape(0, 1);
        YOLOCU_CHECK(o.size() == 3 && o[1] > 4, kUnsupported, "the ", info.title, " model's output ", shape_str(o),
                     " is not [batch, 4 + nc, anchors]");
        nc_ = static_cast<int>(o[1] - 4);
        rows_ = o[2];
      } else if (raw_heads_) {
        const Shape o = c->engine->output_shape(0, 1);
        nc_ = static_cast<int>(o[1] / 3 - 5);
        rows_ = 0;
        for (int k = 0; k < 3; ++k) {
          const Shape s = c->engine->output_shape(k, 1);
          rows_ += 3 * s[2] * s[3];
        }
      } else {
        YOLOCU_CHECK(c->engine->num_outputs() == 1, kUnsupported, "the model has ", c->engine->num_outputs(),
                     " outputs: expected the merged output (1) or three raw heads");
        const Shape o = c->engine->output_shape(0, 1);
        YOLOCU_CHECK(o.size() == 3 && o[2] > 5, kUnsupported, "model output shape ", shape_str(o),
                     " is not N x rows x (5 + classes)");
        rows_ = o[1];
        nc_ = static_cast<int>(o[2] - 5);
      }
      if (options.max_device_memory > 0) {
        // The engine's share is spent; the rest is the context's (1 byte when none is left: every
        // charge then fails, 0 would mean no limit).
        const uint64_t used = c->engine->stats().device_bytes;
        c->budget.set_limit(options.max_device_memory > used ? options.max_device_memory - used : 1);
      }
      c->d_images.set_budget(&c->budget, "input images' upload buffer");
      c->d_descs.set_budget(&c->budget, "letterbox descriptors");
      c->d_input.set_budget(&c->budget, "network input");
      const PostprocessCudaPlan post_plan = plan_postprocess_cuda(options.max_batch, rows_, nc_, options.postprocess);
      c->budget.charge(post_plan.device_bytes, "the post-processing workspace");
      c->post = std::make_unique<PostprocessWorkspace>(options.max_batch, rows_, nc_, options.postprocess);
      const size_t in_bytes = static_cast<size_t>(shape_numel(in)) * dtype_size(c->engine->input_dtype());
      c->d_input.reserve(in_bytes);
      c->d_descs.reserve(sizeof(LetterboxCudaDesc) * static_cast<size_t>(options.max_batch));
      c->h_descs.reserve(sizeof(LetterboxCudaDesc) * static_cast<size_t>(options.max_batch));
      if (contexts_.empty()) {
        const CudaEngineStats st = c->engine->stats();
        build_info_.tune_ms = st.tune_ms;
        build_info_.tactic_layers = st.tactic_layers;
        build_info_.tactic_cache_hits = st.tactic_cache_hits;
        build_info_.tactic_plans_restored = st.tactic_plans_restored;
        build_info_.tactic_memo_hits = st.tactic_memo_hits;
        build_info_.tactics_tuned = st.tactics_tuned;
        build_info_.tactic_cache = st.tactic_cache_path;
        build_info_.tune_breakdown = st.tune_breakdown;
        build_info_.direct_stem_batches = st.direct_stem_batches;
        build_info_.engine_batches = st.anchors;
        build_info_.device_bytes = st.device_bytes + c->budget.used();
      }
      contexts_.push_back(std::move(c));
    }
    if (options.decode == DecodeDevice::kGpu) {
      CudaJpegDecoderOptions jo;
      jo.device = options.cuda_device;
      jo.limits = options.decode_limits;
      jo.cpu_share = options.decode_cpu_share;
      // The decoders are shared by the contexts, not owned by one: each decoder's output buffer has
      // a budget of its own of max_device_memory bytes (the per-context cap), 0: none.
      jo.max_device_memory = options.max_device_memory;
      // Diagnostics (bench_jpeg_decode compares the backends): YOLOCU_NVJPEG_BACKEND=hybrid keeps
      // nvJPEG off the hardware decoder.
      if (const char* b = std::getenv("YOLOCU_NVJPEG_BACKEND"); b && std::string(b) == "hybrid") jo.use_hardware = false;
      // ... and YOLOCU_NVJPEG_POW2_LISTS=1 turns CudaJpegDecoderOptions::power_of_two_lists on.
      if (const char* p = std::getenv("YOLOCU_NVJPEG_POW2_LISTS"); p && std::string(p) == "1") jo.power_of_two_lists = true;
      // Two per context: while every context computes, as many calls decode their next batches.
      decoders_ = std::make_unique<detail::JpegDecoderPool>(2 * contexts, jo);
    }
    names_ = detail::padded_class_names(*model_, nc_);
  }

  ~CudaDetector() override {
    if (timeline_zero_) cudaEventDestroy(timeline_zero_);
  }

  Device device() const override { return Device::kCuda; }
  const std::vector<std::string>& class_names() const override { return names_; }
  OutputLayout output_layout() const override { return layout_; }
  int input_width() const override { return input_w_; }
  int input_height() const override { return input_h_; }
  const DetectorOptions& options() const override { return options_; }
  void set_stage_profiling(bool on) override {
    if (on) {
      // the timeline's zero: an event every later batch event is measured from
      std::lock_guard<std::mutex> lock(timeline_mutex_);
      YOLOCU_CUDA_CHECK(cudaSetDevice(options_.cuda_device));
      if (!timeline_zero_) YOLOCU_CUDA_CHECK(cudaEventCreate(&timeline_zero_));
      YOLOCU_CUDA_CHECK(cudaEventRecord(timeline_zero_, 0));
      YOLOCU_CUDA_CHECK(cudaEventSynchronize(timeline_zero_));
      timeline_.clear();
    }
    profiling_.store(on);
  }
  // Every context taken (no call runs meanwhile), each given back with its stream synchronised.
  struct AllContexts {
    explicit AllContexts(CudaDetector& d) : self(d) {
      for (size_t i = 0; i < d.contexts_.size(); ++i) held.push_back(&d.acquire());
    }
    ~AllContexts() {
      for (Context* c : held) {
        if (cudaStreamSynchronize(c->stream) != cudaSuccess) (void)cudaGetLastError();
        self.release(*c);
      }
    }
    AllContexts(const AllContexts&) = delete;
    AllContexts& operator=(const AllContexts&) = delete;
    CudaDetector& self;
    std::vector<Context*> held;
  };
  // Every context's engine prepares all the sizes at once (tactics derived, plans built on the pool),
  // then runs each size twice on a zeroed input (the first run loads the kernels, the second
  // captures the size's CUDA graph: no later call pays either), with all the contexts taken so that
  // no call runs meanwhile.
  void run_warm_up(const std::vector<int>& sizes) override {
    YOLOCU_CUDA_CHECK(cudaSetDevice(options_.cuda_device));
    const AllContexts all(*this);
    const std::vector<Context*>& held = all.held;
    const size_t image_bytes = static_cast<size_t>(3) * static_cast<size_t>(input_w_) *
                               static_cast<size_t>(input_h_) * dtype_size(held.front()->engine->input_dtype());
    for (Context* c : held) {
      c->engine->prepare(sizes);
      for (int n : sizes) {
        YOLOCU_CUDA_CHECK(cudaMemsetAsync(c->d_input.get(), 0, image_bytes * static_cast<size_t>(n), c->stream));
        for (int pass = 0; pass < 2; ++pass) c->engine->run(c->d_input.get(), n, c->stream);
      }
      YOLOCU_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    }
    const CudaEngineStats st = contexts_.front()->engine->stats();
    build_info_.derived_batches = st.derived_batches;
    build_info_.derive_ms = st.derive_ms;
    build_info_.derive_pool_ms = st.derive_pool_ms;
    build_info_.derive_finish_ms = st.derive_finish_ms;
    build_info_.derived_plans_restored = st.derived_plans_restored;
    build_info_.derived_compiled = st.derived_compiled;
    build_info_.graphs_captured = 0;
    for (const auto& c : contexts_) build_info_.graphs_captured += c->engine->stats().graphs_captured;
  }
  std::vector<BatchSpan> take_timeline() override {
    std::lock_guard<std::mutex> lock(timeline_mutex_);
    return std::exchange(timeline_, {});
  }

 protected:
  std::vector<Detections> run_detect(const std::vector<ImageView>& images, DetectionTrace* trace,
                                     const PostprocessOptions& post) override {
    // Host images: staged in pinned memory and uploaded in chunks as the cores copy them
    // (host_staging.hpp), then letterboxed. When every context is busy, the next batch is staged
    // into a spare pinned buffer while the call waits for its oldest batch; the context it then
    // takes swaps that buffer in and uploads it at once.
    std::unique_ptr<PinnedBuffer> staged;  // the pre-staged batch, if any
    size_t staged_first = static_cast<size_t>(-1);
    std::vector<size_t> staged_offset;
    const auto prestage = [&](size_t first, int n) {
      if (!staged) staged = take_spare();
      staged_offset = detail::staged_offsets(&images[first], n);
      staged->reserve(staged_offset.back());
      detail::stage_images(&images[first], n, staged_offset, static_cast<uint8_t*>(staged->get()));
      staged_first = first;
    };
    std::vector<Detections> out =
        run_batches(images.size(), trace, post, [&](Context& c, size_t first, int n, std::vector<LetterboxGeometry>& geoms) {
          std::vector<size_t> offset;
          if (staged && staged_first == first) {
            c.h_images.swap(*staged);  // the context's old buffer is free: its batch was collected
            offset = std::move(staged_offset);
            staged_first = static_cast<size_t>(-1);
            hold_for_upload(c, offset.back());
            YOLOCU_CUDA_CHECK(cudaMemcpyAsync(c.d_images.get(), c.h_images.get(), offset.back(), cudaMemcpyHostToDevice,
                                              c.stream));
          } else {
            offset = detail::staged_offsets(&images[first], n);
            c.h_images.reserve(offset.back());
            hold_for_upload(c, offset.back());
            detail::stage_images(&images[first], n, offset, static_cast<uint8_t*>(c.h_images.get()),
                                 static_cast<uint8_t*>(c.d_images.get()), c.stream);
          }
          describe_uploaded(c, &images[first], n, offset, geoms);
          c.mark(1);
          letterbox_descs(c, n);
        }, prestage);
    if (staged) give_spare(std::move(staged));
    return out;
  }
  std::vector<Detections> run_detect_device(const std::vector<ImageView>& images,
                                            const PostprocessOptions& post) override {
    // The caller's device BGR images, read in place by the letterbox (any pitch).
    return run_batches(images.size(), nullptr, post, [&](Context& c, size_t first, int n, std::vector<LetterboxGeometry>& geoms) {
      auto* descs = static_cast<LetterboxCudaDesc*>(c.h_descs.get());
      for (int i = 0; i < n; ++i) {
        const ImageView& im = images[first + static_cast<size_t>(i)];
        cudaPointerAttributes attr{};
        YOLOCU_CUDA_CHECK(cudaPointerGetAttributes(&attr, im.data));
        YOLOCU_CHECK((attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) &&
                         attr.device == options_.cuda_device,
                     kInvalidArgument, "detect_device: image ", first + static_cast<size_t>(i),
                     " is not in memory of CUDA device ", options_.cuda_device);
        descs[i] = make_letterbox_cuda_desc(im, input_w_, input_h_, &geoms[static_cast<size_t>(i)]);
      }
      c.hold();
      c.mark(1);
      letterbox_descs(c, n);
    });
  }
  std::vector<Detections> run_detect_device_images(const std::vector<DeviceImage>& images,
                                                   const PostprocessOptions& post) override {
    // BGR / RGB / NV12 device images: the letterbox waits for each image's producer stream (an
    // event) and reads the images in place; no upload.
    return run_batches(images.size(), nullptr, post, [&](Context& c, size_t first, int n, std::vector<LetterboxGeometry>& geoms) {
      if (!c.device_input) c.device_input = std::make_unique<detail::DeviceImageInput>();
      c.device_input->reserve(n);
      c.hold();
      c.mark(1);
      c.device_input->letterbox(&images[first], n, options_.cuda_device, input_w_, input_h_, c.engine->input_dtype(),
                                options_.letterbox, c.d_input.get(), c.stream, geoms);
    });
  }
  std::vector<Detections> run_detect_encoded(const std::vector<EncodedImage>& images,
                                             std::vector<DecodedSize>& sizes, const PostprocessOptions& post) override {
    if (options_.decode != DecodeDevice::kGpu) return Detector::run_detect_encoded(images, sizes, post);
    return run_encoded(images, sizes, post);
  }

 private:
  // Enqueues one batch's input (images first .. first + n - 1 of the call) into c.d_input on
  // c.stream and fills one geometry per image; marks event 1 between the upload and the letterbox.
  using PrepareInput = std::function<void(Context& c, size_t first, int n, std::vector<LetterboxGeometry>& geoms)>;

  // The `count` images of a call in batches of max_batch. Batches go to free contexts without
  // waiting for the previous one; a batch is collected (its stream synchronised, its results
  // appended) when no context is free for the next, and at the end, always oldest first, so the
  // output keeps the input order.
  // `prestage(first, n)` (optional): the host's part of a batch's input, done while the call waits
  // for a context (it is then given to `prepare` for that batch).
  // `stage(first, n, may_wait)` (optional): the host's part of a batch done before it takes a
  // context, while this call's earlier batches compute (detect_encoded: the nvJPEG decode). It
  // returns what the batch holds until it is collected (its decoder), or null when that is not free
  // and may_wait is false: the oldest batch is collected (giving back what it held) and it is asked
  // again, with may_wait true once none of this call's batches is in flight.
  using Stage = std::function<std::shared_ptr<void>(size_t first, int n, bool may_wait)>;
  std::vector<Detections> run_batches(size_t count, DetectionTrace* trace, const PostprocessOptions& post,
                                      const PrepareInput& prepare,
                                      const std::function<void(size_t first, int n)>& prestage = nullptr,
                                      const Stage& stage = nullptr) {
    std::vector<Detections> out;
    out.reserve(count);
    if (trace) *trace = DetectionTrace{};
    const auto t0 = std::chrono::steady_clock::now();
    StageTimes times;
    std::deque<InFlight> pending;
    auto collect_oldest = [&] {
      InFlight f = std::move(pending.front());
      pending.pop_front();
      try {
        collect(*f.c, f.n, f.geoms, out, trace, times);
      } catch (...) {
        release(*f.c);
        throw;
      }
      release(*f.c);
    };
    try {
      for (size_t b = 0; b < count; b += static_cast<size_t>(options_.max_batch)) {
        const int n = static_cast<int>(std::min(count - b, static_cast<size_t>(options_.max_batch)));
        std::shared_ptr<void> held;
        if (stage) {
          const auto p0 = std::chrono::steady_clock::now();
          while (!(held = stage(b, n, pending.empty()))) collect_oldest();
          times.preprocess += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p0).count();
        }
        Context* c = try_acquire();
        if (!c && prestage) {  // the host's work on this batch while the in-flight ones compute
          const auto p0 = std::chrono::steady_clock::now();
          prestage(b, n);
          times.preprocess += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p0).count();
        }
        if (!c && pending.empty()) c = &acquire();  // the contexts are other calls': wait for one
        while (!c) {  // every context busy, some with this call's batches: collect the oldest first
          collect_oldest();
          c = pending.empty() ? &acquire() : try_acquire();
        }
        InFlight f{c, n, {}, std::move(held)};
        try {
          enqueue(*c, b, n, f.geoms, times, post, prepare);
        } catch (...) {
          // Copies already enqueued may still read this context's pinned staging: let them finish
          // before another call reuses (or regrows) the buffers.
          if (cudaStreamSynchronize(c->stream) != cudaSuccess) (void)cudaGetLastError();
          release(*c);
          throw;
        }
        pending.push_back(std::move(f));
        ++times.batches;
        times.max_in_flight = std::max(times.max_in_flight, static_cast<int>(pending.size()));
      }
      while (!pending.empty()) collect_oldest();
    } catch (...) {
      for (InFlight& f : pending) {
        if (cudaStreamSynchronize(f.c->stream) != cudaSuccess) (void)cudaGetLastError();
        release(*f.c);
      }
      throw;
    }
    times.total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    record_times(times);
    return out;
  }

  // Per batch of max_batch images, the nvJPEG decode (a decoder of the pool, on the decoder's stream)
  // is the batch's stage: it runs before the batch takes an execution context, while this call's
  // earlier batches compute (a call of several batches decodes batch k + 1 during batch k's forward;
  // with several calls at once, their decodes run while the contexts compute), and the decoder stays
  // with the batch until it is collected: the letterbox that read its images has run. The context's
  // stream waits for the decode on the device, then letterboxes the decoded images in place (no host
  // synchronisation between them). With profiling on, a batch's upload stage is the context's wait
  // for the decode; the host's decode time (waiting for a decoder included) counts as preprocess.
  std::vector<Detections> run_encoded(const std::vector<EncodedImage>& images, std::vector<DecodedSize>& sizes,
                                      const PostprocessOptions& post) {
    struct Decoded {
      detail::JpegDecoderPool::Lease lease;
      std::vector<ImageView> views;
    };
    // The batch being enqueued; not an owner: a batch's decoder must go back to the pool when the
    // batch is collected (an owner here kept the last one, and two calls that each held one and
    // waited for another deadlocked).
    const Decoded* current = nullptr;
    const auto stage = [&](size_t first, int n, bool may_wait) -> std::shared_ptr<void> {
      std::optional<detail::JpegDecoderPool::Lease> lease = decoders_->try_acquire();
      if (!lease) {
        if (!may_wait) return nullptr;  // the call's oldest batch gives its decoder back first
        lease.emplace(decoders_->acquire());
      }
      auto d = std::make_shared<Decoded>(Decoded{std::move(*lease), {}});
      detail::JpegDecoderPool::Slot& slot = *d->lease;
      const std::vector<EncodedImage> batch(images.begin() + static_cast<std::ptrdiff_t>(first),
                                            images.begin() + static_cast<std::ptrdiff_t>(first) + n);
      JpegDecodeCounts counts;
      try {
        YOLOCU_CUDA_CHECK(cudaSetDevice(options_.cuda_device));
        d->views = slot.jpeg->decode(batch, slot.stream, &counts);
        YOLOCU_CUDA_CHECK(cudaEventRecord(slot.done, slot.stream));
      } catch (...) {
        // whatever the decode enqueued finishes before another call reuses this decoder's buffer
        if (cudaStreamSynchronize(slot.stream) != cudaSuccess) (void)cudaGetLastError();
        throw;
      }
      count_decoded(counts.gpu(), counts.cpu(), counts.cpu() - counts.cpu_shared, "nvjpeg " + slot.jpeg->backend());
      for (int i = 0; i < n; ++i)
        sizes[first + static_cast<size_t>(i)] = {d->views[static_cast<size_t>(i)].width, d->views[static_cast<size_t>(i)].height};
      current = d.get();
      return d;
    };
    return run_batches(images.size(), nullptr, post, [&](Context& c, size_t, int n, std::vector<LetterboxGeometry>& geoms) {
      const Decoded& d = *current;
      c.mark(0);
      YOLOCU_CUDA_CHECK(cudaStreamWaitEvent(c.stream, d.lease->done, 0));
      auto* descs = static_cast<LetterboxCudaDesc*>(c.h_descs.get());
      for (int i = 0; i < n; ++i)
        descs[i] = make_letterbox_cuda_desc(d.views[static_cast<size_t>(i)], input_w_, input_h_,
                                            &geoms[static_cast<size_t>(i)]);
      c.hold(/*start=*/false);
      c.mark(1);
      letterbox_descs(c, n);
    }, nullptr, stage);
  }

  // Spare pinned staging buffers for pre-staged batches (run_detect), shared by the calls: one per
  // call that pre-stages at a time, each as large as the largest batch it held.
  std::unique_ptr<PinnedBuffer> take_spare() {
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (spares_.empty()) return std::make_unique<PinnedBuffer>();
    std::unique_ptr<PinnedBuffer> p = std::move(spares_.back());
    spares_.pop_back();
    return p;
  }
  void give_spare(std::unique_ptr<PinnedBuffer> p) {
    std::lock_guard<std::mutex> lock(spare_mutex_);
    spares_.push_back(std::move(p));
  }

  Context& acquire() {
    std::unique_lock<std::mutex> lock(pool_mutex_);
    for (;;) {
      if (Context* c = take_free()) return *c;
      pool_cv_.wait(lock);
    }
  }
  Context* try_acquire() {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    return take_free();
  }
  Context* take_free() {  // pool_mutex_ held
    for (auto& c : contexts_)
      if (!c->busy) {
        c->busy = true;
        return c.get();
      }
    return nullptr;
  }
  void release(Context& c) {
    {
      std::lock_guard<std::mutex> lock(pool_mutex_);
      c.busy = false;
    }
    pool_cv_.notify_one();
  }

  // The workspace for a call's post-processing options: the context's own for options().postprocess,
  // else its per-call one, made anew when the call's options differ from those it was made for.
  // Called before the batch's gate closes (a cudaFree would wait for it).
  PostprocessWorkspace& workspace_for(Context& c, const PostprocessOptions& p) {
    if (same_postprocess(p, options_.postprocess)) return *c.post;
    if (!c.post_call || !same_postprocess(p, c.post_call_options)) {
      if (c.post_call) c.budget.refund(c.post_call->device_bytes());
      c.post_call.reset();
      const PostprocessCudaPlan plan = plan_postprocess_cuda(options_.max_batch, rows_, nc_, p);
      c.budget.charge(plan.device_bytes, "the per-call post-processing workspace");
      try {
        c.post_call = std::make_unique<PostprocessWorkspace>(options_.max_batch, rows_, nc_, p);
      } catch (...) {
        c.budget.refund(plan.device_bytes);
        throw;
      }
      c.post_call_options = p;
    }
    return *c.post_call;
  }

  // Everything of one batch up to its results' copy back, enqueued on c.stream; no synchronisation.
  void enqueue(Context& c, size_t first, int n, std::vector<LetterboxGeometry>& geoms, StageTimes& times,
               const PostprocessOptions& post, const PrepareInput& prepare) {
    YOLOCU_CUDA_CHECK(cudaSetDevice(options_.cuda_device));
    const auto t0 = std::chrono::steady_clock::now();
    c.active_post = &workspace_for(c, post);
    c.profiled = profiling_.load();
    GateOpener opener{c};
    geoms.assign(static_cast<size_t>(n), LetterboxGeometry{});
    prepare(c, first, n, geoms);
    c.mark(2);
    const auto t1 = std::chrono::steady_clock::now();
    // Forward.
    c.engine->run(c.d_input.get(), n, c.stream);
    c.mark(3);
    const auto t2 = std::chrono::steady_clock::now();
    // Decode + NMS + back-projection on the device; one copy back.
    if (raw_heads_) {
      std::vector<Tensor> heads;
      for (int k = 0; k < 3; ++k)
        heads.push_back(Tensor::view(DType::kFloat32, c.engine->output_shape(k, n), const_cast<void*>(c.engine->output(k))));
      postprocess_raw_heads_cuda(raw_heads_view(heads, nc_), geoms, post, *c.active_post, c.stream);
    } else {
      OutputView view;
      view.data = c.engine->output(0);
      view.dtype = c.engine->output_dtype(0);
      view.batch = n;
      view.rows = rows_;
      view.layout = layout_;
      view.channels = nc_ + (layout_ == OutputLayout::kYolov8 ? 4 : 5);
      postprocess_cuda(view, geoms, post, *c.active_post, c.stream);
    }
    c.mark(4);
    const auto t3 = std::chrono::steady_clock::now();
    times.preprocess += std::chrono::duration<double, std::milli>(t1 - t0).count();
    times.inference += std::chrono::duration<double, std::milli>(t2 - t1).count();
    times.postprocess += std::chrono::duration<double, std::milli>(t3 - t2).count();
  }

  // Waits for the batch on c.stream (the only synchronisation) and appends its results.
  void collect(Context& c, int n, const std::vector<LetterboxGeometry>& geoms, std::vector<Detections>& out,
               DetectionTrace* trace, StageTimes& times) {
    YOLOCU_CUDA_CHECK(cudaSetDevice(options_.cuda_device));
    const auto t0 = std::chrono::steady_clock::now();
    if (c.done) {  // blocking_sync: asleep until the batch is done
      YOLOCU_CUDA_CHECK(cudaEventRecord(c.done, c.stream));
      YOLOCU_CUDA_CHECK(cudaEventSynchronize(c.done));
    } else {
      YOLOCU_CUDA_CHECK(cudaStreamSynchronize(c.stream));
    }
    times.postprocess += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<Detections> res = c.active_post->results();
    for (auto& d : res) out.push_back(std::move(d));
    if (trace) fill_trace(c, n, geoms, *trace);
    if (c.profiled && c.gate && c.gate->timed_out()) {
      ++times.gpu_untimed_batches;  // its gate gave up waiting: host time inside its stages
    } else if (c.profiled) {
      ++times.gpu_timed_batches;
      double* stage[] = {&times.gpu_upload, &times.gpu_letterbox, &times.gpu_engine, &times.gpu_postprocess};
      for (int i = 0; i + 1 < Context::kEvents; ++i) {
        float ms = 0;
        YOLOCU_CUDA_CHECK(cudaEventElapsedTime(&ms, c.events[i], c.events[i + 1]));
        *stage[i] += ms;
      }
      std::lock_guard<std::mutex> lock(timeline_mutex_);
      if (timeline_zero_ && timeline_.size() < 100000) {
        BatchSpan span;
        span.context = c.index;
        span.images = n;
        for (int i = 0; i < Context::kEvents; ++i) {
          float ms = 0;
          YOLOCU_CUDA_CHECK(cudaEventElapsedTime(&ms, timeline_zero_, c.events[i]));
          span.t[i] = ms;
        }
        timeline_.push_back(span);
      }
    }
  }

  // The descriptors in c.h_descs to the device, and the letterbox of the batch into c.d_input.
  void letterbox_descs(Context& c, int n) {
    YOLOCU_CUDA_CHECK(cudaMemcpyAsync(c.d_descs.get(), c.h_descs.get(), sizeof(LetterboxCudaDesc) * static_cast<size_t>(n),
                                   cudaMemcpyHostToDevice, c.stream));
    letterbox_to_input_cuda(static_cast<const LetterboxCudaDesc*>(c.d_descs.get()), n, input_w_, input_h_,
                            c.engine->input_dtype(), options_.letterbox, c.d_input.get(), c.stream);
  }

  // The device buffer of a batch of `bytes` staged bytes, then the stream held (profiling): from
  // here the batch only enqueues (the host copy included).
  static void hold_for_upload(Context& c, size_t bytes) {
    c.d_images.reserve(bytes);
    c.hold();
  }
  // Letterbox descriptors of the uploaded copies (host math, shared with the CPU reference), one
  // launch for the batch.
  void describe_uploaded(Context& c, const ImageView* images, int n, const std::vector<size_t>& offset,
                         std::vector<LetterboxGeometry>& geoms) {
    auto* descs = static_cast<LetterboxCudaDesc*>(c.h_descs.get());
    for (int i = 0; i < n; ++i) {
      const ImageView dev{static_cast<const uint8_t*>(c.d_images.get()) + offset[static_cast<size_t>(i)],
                          images[i].width, images[i].height, static_cast<size_t>(images[i].width) * 3};
      descs[i] = make_letterbox_cuda_desc(dev, input_w_, input_h_, &geoms[static_cast<size_t>(i)]);
    }
  }

  // Debug path (--dump): the device tensors of the batch copied back (slow, never on the hot path).
  void fill_trace(Context& c, int n, const std::vector<LetterboxGeometry>& geoms, DetectionTrace& t) {
    const Shape in = c.engine->input_shape(n);
    Tensor x(c.engine->input_dtype(), in);
    YOLOCU_CUDA_CHECK(cudaMemcpy(x.data(), c.d_input.get(), x.nbytes(), cudaMemcpyDeviceToHost));
    t.input = x.dtype() == DType::kFloat32 ? x : cast_tensor(x, DType::kFloat32);
    for (int k = 0; k < c.engine->num_outputs(); ++k) {
      Tensor o(DType::kFloat32, c.engine->output_shape(k, n));
      YOLOCU_CUDA_CHECK(cudaMemcpy(o.data(), c.engine->output(k), o.nbytes(), cudaMemcpyDeviceToHost));
      t.outputs.push_back(o);
    }
    t.geometry.insert(t.geometry.end(), geoms.begin(), geoms.end());
  }

  std::shared_ptr<const Model> model_;
  DetectorOptions options_;
  std::vector<std::string> names_;
  int input_w_ = 0, input_h_ = 0, nc_ = 0;
  int64_t rows_ = 0;
  bool raw_heads_ = false;
  OutputLayout layout_ = OutputLayout::kYolov5;  // of the merged output
  std::vector<std::unique_ptr<Context>> contexts_;
  std::unique_ptr<detail::JpegDecoderPool> decoders_;  // DecodeDevice::kGpu: detect_encoded's nvJPEG decoders
  std::mutex spare_mutex_;
  std::vector<std::unique_ptr<PinnedBuffer>> spares_;  // take_spare() / give_spare()
  std::mutex pool_mutex_;
  std::condition_variable pool_cv_;
  std::atomic<bool> profiling_{false};
  std::mutex timeline_mutex_;
  cudaEvent_t timeline_zero_ = nullptr;  // stage profiling's zero (take_timeline)
  std::vector<BatchSpan> timeline_;
};

}  // namespace

namespace detail {

bool cuda_detector_available() noexcept { return cuda_device_usable(0); }

std::unique_ptr<Detector> create_cuda_detector(std::shared_ptr<const Model> model, const DetectorOptions& options) {
  return std::make_unique<CudaDetector>(std::move(model), options);
}

}  // namespace detail

}  // namespace yolocu

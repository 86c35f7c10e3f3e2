// yolocu/detector.hpp - image in, boxes out: the API services and video pipelines deploy.
//
//   auto det = yolocu::Detector::create("yolov5n.onnx", options);   // loads the model, builds the engine
//   std::vector<yolocu::Detections> boxes = det->detect({view1, view2});
//
// A Detector owns the model, the engine (CPU: oneDNN; CUDA: cuDNN + yolocu kernels) and every
// buffer it needs; detect() takes caller-owned 8-bit BGR images (any size, any row pitch) and
// returns, per image, the detections in original-image pixels, exactly as ultralytics/yolov5's
// detect.py computes them (letterbox, model, non_max_suppression, scale_boxes; see
// docs/semantics.md).
//
// Threads: every public member function may be called from several threads at once on one
// Detector. Calls are queued to a fixed set of execution contexts (one per Detector by default,
// see DetectorOptions::contexts); results never depend on which thread or context ran a batch.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/device_image.hpp"
#include "yolocu/geometry.hpp"
#include "yolocu/image.hpp"
#include "yolocu/letterbox.hpp"
#include "yolocu/postprocess.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu {

enum class Device { kAuto, kCpu, kCuda };  // kAuto: the GPU when one is usable, else the CPU
// kInt8, with DetectorOptions::int8_calibration (docs/int8.md): on the GPU the calibration's
// convolutions run on INT8 kernels, the rest in FP16; on the CPU, simulated INT8.
enum class Precision { kFloat32, kFloat16, kInt8 };
// Where detect_encoded() decodes JPEGs: kCpu (libjpeg-turbo, pixel-identical to OpenCV's imread,
// so detections identical to ultralytics') or kGpu (nvJPEG on the CUDA detector's GPU, straight
// into device memory: faster, pixels within a few levels of kCpu, see docs/semantics.md).
enum class DecodeDevice { kCpu, kGpu };

const char* device_name(Device d) noexcept;
const char* decode_device_name(DecodeDevice d) noexcept;  // "cpu", "gpu"

struct Model;
struct Int8Calibration;  // yolocu/int8.hpp

// Post-processing options left to the model's family: conf_threshold and iou_threshold set to
// kFamilyDefault, max_det set to kFamilyDefaultMaxDet. create() replaces them with the family's
// default (DetectorOptions::postprocess_defaults says which set) from the model it parsed, so that a
// caller need not read the model first; explicit values are kept. options() reports the values used.
constexpr float kFamilyDefault = -1.f;
constexpr int kFamilyDefaultMaxDet = -1;
enum class PostprocessDefaults {
  kPredict,  // YOLOv5: detect.py's (conf 0.25, iou 0.45, max_det 1000); YOLOv8 / YOLO11: the
             // ultralytics package's predict (conf 0.25, iou 0.7, max_det 300)
  kVal,      // YOLOv5: val.py's (conf 0.001, iou 0.6, max_det 300); YOLOv8 / YOLO11: ultralytics'
             // val (conf 0.001, iou 0.7, max_det 300, and its boxes unclipped: clip_boxes false)
};
// PostprocessOptions{} with conf_threshold, iou_threshold and max_det left to the family.
PostprocessOptions family_postprocess_options();
// `options` with the fields left to the family set from detect_options(layout) (kPredict) or
// val_options(layout) (kVal); the other fields as given, but for clip_boxes, false with kVal where
// the family's val leaves its boxes unclipped.
PostprocessOptions resolve_family_defaults(const PostprocessOptions& options, OutputLayout layout,
                                           PostprocessDefaults which);

struct DetectorOptions {
  Device device = Device::kAuto;
  int cuda_device = 0;
  Precision precision = Precision::kFloat16;  // GPU engine precision; the CPU runs FP32, or
                                              // simulated INT8 with kInt8
  // kInt8: the calibration (load_int8_calibration, checked against the model's hash there; create()
  // checks that it names every convolution of the model).
  std::shared_ptr<const Int8Calibration> int8_calibration;
  int max_batch = 1;                          // images per detect() call are split into batches of this size
  int input_width = 0, input_height = 0;      // network input; 0 = the model's static size, else 640
  PostprocessOptions postprocess;             // conf, iou, max_det, classes, agnostic, multi-label, NMS mode;
                                              // conf, iou, max_det may be left to the model family
                                              // (kFamilyDefault, family_postprocess_options())
  PostprocessDefaults postprocess_defaults = PostprocessDefaults::kPredict;  // the family's set for those
  LetterboxMode letterbox = LetterboxMode::kExact;  // the CPU always runs kExact
  int cpu_threads = 0;                        // CPU engine threads; 0 = all cores
  uint64_t max_memory = 0;                    // CPU engine memory budget per context, bytes (0: the
                                              // default, CpuEngineOptions::max_memory)
  uint64_t max_device_memory = 0;             // GPU memory budget per context, bytes (0: none): the
                                              // engine's own buffers and the context's (upload,
                                              // input, post-processing); over it create() or the
                                              // detect() that needs more throws kOutOfMemory naming
                                              // the buffer, and the detector stays usable
  int contexts = 1;                           // concurrent execution contexts (GPU streams): one
                                              // detect() call with several batches keeps up to this
                                              // many in flight (batch k+1's upload and host staging
                                              // overlap batch k's compute); concurrent calls share them.
                                              // A call that waits for a context copies its next
                                              // batch into a spare pinned buffer meanwhile (one such
                                              // buffer per call waiting at once)
  // GPU: batch sizes whose convolution tactics are tuned when the engine is built (empty: {1,
  // max_batch}; others take the nearest tuned size's), and the tactic cache file ("": the default
  // path, see CudaEngineOptions::tactic_cache; "none": no file).
  std::vector<int> tune_batches;
  std::string tactic_cache;
  // GPU: run only the anchor batch sizes (the tuned ones, powers of two, max_batch), padding a
  // partial batch up to the next one (CudaEngineOptions::pad_batches): warm_up() of every size
  // derives about 2 log2(max_batch) sizes instead of max_batch, for up to twice the engine work in
  // a partial batch. The CPU path ignores it.
  bool pad_batches = false;
  // GPU: the quickest start of every batch size up to max_batch on a cold tactic cache (many video
  // streams): pad_batches on, only max_batch tuned (unless tune_batches names sizes), at most 4
  // cuDNN graph plans tried per layer (CudaEngineOptions::max_graph_plans), and the other sizes
  // derived without runtime compilation (CudaEngineOptions::derive_without_compiling). max_batch
  // runs at its tuned speed; smaller batches pad up to an anchor that runs tactics compiling
  // nothing (slower at those sizes), or restores its own plans where the tactic cache file keeps
  // them from an earlier start without fast_start. The CPU path ignores it.
  bool fast_start = false;
  // detect_encoded(): where JPEGs are decoded, and the largest image accepted. kGpu needs the CUDA
  // detector and nvJPEG in the build: create() refuses it otherwise (kUnsupported), also for
  // Device::kAuto on a machine without a GPU - ask for kCpu there.
  DecodeDevice decode = DecodeDevice::kCpu;
  DecodeLimits decode_limits;
  // decode kGpu: the share of each batch's JPEGs (0 to 0.9) decoded on CPU threads while nvJPEG
  // decodes the rest (CudaJpegDecoderOptions::cpu_share): more images/s where the nvJPEG call is
  // the limit and cores are idle; those images get the exact CPU pixels. 0: all on nvJPEG.
  float decode_cpu_share = 0;
  // GPU: replay the engine's forward as one CUDA graph per batch size (default). false: launch its
  // kernels one by one. Beside nvJPEG (decode kGpu) the graphs' back-to-back kernels slow the
  // decoder's own work by half, eager launches far less; files -> boxes ran faster eagerly in every
  // measured call (docs/performance.md section 10), and the CLI launches eagerly with --decode gpu
  // unless asked for graphs. The CPU path ignores it.
  bool engine_graphs = true;
  // With engine_graphs: the forward as this many graphs (1..64, CudaEngineOptions::graph_segments).
  // Beside nvJPEG, shorter graphs let the decoder's work in between (docs/performance.md section 10).
  int engine_graph_segments = 1;
  // GPU: how a call waits for its batches. false (default): cudaStreamSynchronize, which spins a
  // core for the whole wait (CUDA's default while a process has fewer contexts than the machine
  // has cores). true: an event made with cudaEventBlockingSync, the thread asleep until the device
  // is done: a core left to the other threads (a server's, other instances') for a wake-up of some
  // microseconds more. The CPU path ignores it.
  bool blocking_sync = false;
};

// How detect_encoded() decoded the images so far (all calls, all threads).
struct DecodeStats {
  int64_t images = 0;        // decoded successfully
  int64_t gpu = 0;           // ... by nvJPEG
  int64_t cpu = 0;           // ... by the CPU decoder: decode kCpu, a fallback of kGpu, or decode_cpu_share's part
  int64_t cpu_fallback = 0;  // ... of which fallbacks of kGpu (PNG, EXIF-rotated, CMYK, cut short)
  std::string backend;       // "cpu", or nvJPEG's backend: "nvjpeg hardware" / "nvjpeg hybrid"
};

// The size of an image detect_encoded() decoded (its detections are in these pixels).
struct DecodedSize {
  int width = 0, height = 0;
};

// Stage tensors of one detect() call, for diffing against PyTorch (yolocu detect --dump). The
// images of the call are concatenated along dim 0 even when they ran in several batches.
struct DetectionTrace {
  std::vector<Tensor> letterboxed;  // per image: dst_h x dst_w x 3 uint8 BGR
  Tensor input;                     // images x 3 x dst_h x dst_w model input (the model's input dtype)
  std::vector<Tensor> outputs;      // raw model outputs, one per model output, dim 0 = the call's images
  std::vector<Tensor> candidates;   // per image: k x 6 (x1, y1, x2, y2, score, class) before NMS, letterbox pixels
  std::vector<LetterboxGeometry> geometry;
};

// Times of the last detect() call, milliseconds, summed over its batches.
struct StageTimes {
  // Host wall time of each phase. CPU: the work itself. GPU: the time the host spent enqueuing
  // each phase (staging copies into pinned memory included), except `postprocess`, which also
  // holds the wait for the batch's results: the device work overlaps the host's, so these are not
  // the GPU's stage times — see the gpu_* fields.
  double preprocess = 0, inference = 0, postprocess = 0, total = 0;
  // GPU, only while Detector::set_stage_profiling(true) (else 0): device time of each stage from
  // CUDA events recorded on the batch's stream, which waits until the batch is enqueued so that
  // host time is not counted: the upload of host images (0 for device images; detect_encoded with
  // GPU decode: the wait for the nvJPEG decode, which runs before the batch takes a context), the letterbox (descriptor copy + one kernel), the
  // engine's forward (a CUDA graph replay), decode + NMS + back-projection including the results'
  // way back to the host.
  double gpu_upload = 0, gpu_letterbox = 0, gpu_engine = 0, gpu_postprocess = 0;
  // Profiled batches whose gpu_* times are summed above, and those left out: a batch's stream waits
  // for its enqueue at most 100 ms (a device-wide synchronisation by another thread could otherwise
  // wait for it forever), and a batch that waited that long has host time inside its stages.
  int gpu_timed_batches = 0, gpu_untimed_batches = 0;
  int batches = 0;        // batches the call ran
  int max_in_flight = 0;  // most of them enqueued at once (GPU: > 1 when batches overlap, contexts >= 2)
};

// One GPU batch on the device, from the CUDA events of stage profiling: milliseconds since stage
// profiling was turned on, for a timeline of overlapped batches (`yolocu bench --timeline`).
struct BatchSpan {
  int context = 0;   // the execution context that ran it
  int images = 0;
  double t[5] = {};  // starts of the upload, letterbox, engine and decode + NMS stages, then the end
};

// How create() built the detector (`yolocu bench`, `yolocu inspect --device`): its wall time and,
// on the GPU, where the convolution tactics came from: tuned now (a cold build) or loaded from the
// tactic cache file (a warm build). Figures of the first execution context's engine (the others
// reuse its choices).
struct BuildInfo {
  double build_ms = 0;             // Detector::create(), model load included (not for a model passed in loaded)
  double tune_ms = 0;              // GPU: host time choosing tactics (cache loads included)
  int tactic_layers = 0;           // GPU: (layer, batch) choices made
  int tactic_cache_hits = 0;       // ... loaded from the cache file (checked, not timed)
  int tactic_plans_restored = 0;   // ... of which restored from a serialised plan (no compile)
  int tactic_memo_hits = 0;        // ... taken from this process's earlier choices
  uint64_t device_bytes = 0;       // GPU: device memory of the first context (engine + buffers) after create()
  int tactics_tuned = 0;           // ... timed now
  std::string tactic_cache;        // GPU: the cache file ("" none)
  std::string tune_breakdown;      // GPU: where tune_ms went ("tune breakdown: ...", CudaEngineStats)
  std::vector<int> direct_stem_batches;  // GPU: tuned batch sizes whose first layer runs as the direct stem kernel
  std::vector<int> engine_batches;  // GPU with pad_batches: the only batch sizes the engine runs (else empty)
  // GPU, updated by warm_up(): the batch sizes derived so far (not tuned), the host time that took,
  // of it the plans built or restored on all cores and the rest on the engine's thread (plans
  // serialised for the cache file), and the derived plans restored from that file.
  int derived_batches = 0;
  double derive_ms = 0, derive_pool_ms = 0, derive_finish_ms = 0;
  int derived_plans_restored = 0;
  int derived_compiled = 0;  // derived tactics whose build compiled a kernel at runtime
  // GPU, updated by warm_up(): the (context, batch size) pairs whose CUDA graph is captured.
  int graphs_captured = 0;
};

class Detector {
 public:
  // Loads the ONNX file and builds the engine. Throws yolocu::Error naming the problem (file,
  // model, unsupported op, no GPU for Device::kCuda, invalid options).
  static std::unique_ptr<Detector> create(const std::string& onnx_path, const DetectorOptions& options = {});
  // The same for a model already loaded (load_onnx, yolocu/model.hpp): it is not parsed again, and
  // the detector shares it.
  static std::unique_ptr<Detector> create(std::shared_ptr<const Model> model, const DetectorOptions& options = {});
  virtual ~Detector() = default;

  // Detects objects in each image (caller-owned host memory, only read during the call). Returns
  // one Detections per image, in input order, boxes in that image's pixels. Thread-safe. The
  // images are validated here, once, before any backend sees them: kInvalidArgument for null data,
  // a zero size or a pitch below width * 3. `trace` (optional) receives the stage tensors.
  // `postprocess` (optional; every entry point below takes one): this call's post-processing
  // options in place of options().postprocess (conf, iou, max_det, classes, ...: complete options,
  // no family defaults left; validated, kInvalidArgument). The engine is the same; on the GPU a
  // context keeps one workspace for the last per-call set it saw (allocated when the set changes).
  std::vector<Detections> detect(const std::vector<ImageView>& images, DetectionTrace* trace = nullptr,
                                 const PostprocessOptions* postprocess = nullptr);
  Detections detect(const ImageView& image) { return detect(std::vector<ImageView>{image}).at(0); }

  // Images in device memory of this detector's GPU (options().cuda_device), e.g. a CUDA tensor:
  // the letterbox reads them in place (any row pitch), no host round trip. The work that wrote
  // them must be finished (synchronise its stream first). CUDA detectors only: kUnsupported on the
  // CPU detector. Same detections as detect() of the same pixels. Thread-safe like detect().
  std::vector<Detections> detect_device(const std::vector<ImageView>& device_images,
                                        const PostprocessOptions* postprocess = nullptr);

  // Images in device memory of this detector's GPU as BGR, RGB or NV12 (video decoders' frames,
  // e.g. NVDEC's; yolocu/device_image.hpp). The letterbox reads them in place (NV12 converted on
  // the fly, exactly as the CPU video path converts it), no host copy. No host synchronisation is
  // needed: the detector's stream waits (cudaStreamWaitEvent) for each image's DeviceImage::stream.
  // The pixels must stay valid until the call returns; it returns when the results are on the
  // host. CUDA detectors only: kUnsupported on the CPU detector; kInvalidArgument for a bad image
  // (checked before any backend runs). Thread-safe like detect().
  std::vector<Detections> detect_device(const std::vector<DeviceImage>& device_images,
                                        const PostprocessOptions* postprocess = nullptr);
  // Encoded images (JPEG / PNG bytes in host memory, read during the call): decoded as
  // options().decode says, then detected. kCpu: decode_image() on the calling thread, then
  // detect(): the same detections as decode_image() + detect(). kGpu (CUDA detector): nvJPEG
  // decodes each batch into device memory on the execution context's stream and the device path
  // reads it in place (no host round trip); PNG, EXIF-rotated and CMYK JPEGs are decoded on the CPU
  // and uploaded (counted in decode_stats()). Errors are decode_image()'s, naming
  // EncodedImage::name: kParse (corrupt, truncated, empty, not an image: kUnsupported for unknown
  // bytes), kOutOfMemory (over options().decode_limits, from the header, before allocating),
  // kInvalidArgument (null data with a size); the first failing image of the call throws. `sizes`
  // (optional) receives each image's decoded size. Thread-safe like detect().
  std::vector<Detections> detect_encoded(const std::vector<EncodedImage>& images,
                                         std::vector<DecodedSize>* sizes = nullptr,
                                         const PostprocessOptions* postprocess = nullptr);
  DecodeStats decode_stats() const;

  // Asynchronous form (runs detect() on another thread): the images must stay valid, and the
  // Detector alive, until the future is ready. Invalid images throw here, not from get().
  std::future<std::vector<Detections>> detect_async(std::vector<ImageView> images);

  virtual Device device() const = 0;
  virtual const std::vector<std::string>& class_names() const = 0;  // from the model metadata
  virtual OutputLayout output_layout() const = 0;  // the model's family: YOLOv5's or YOLOv8 / YOLO11's
  virtual int input_width() const = 0;
  virtual int input_height() const = 0;
  virtual const DetectorOptions& options() const = 0;
  // The times of the last call (detect, detect_device, detect_encoded) made from the calling thread,
  // so that concurrent callers each read their own; a thread that made none gets the last call of
  // any thread (detect_async's calls run on threads of their own: their caller reads them so only if
  // it made no call itself). Thread-safe.
  StageTimes last_times() const;
  // While on, each GPU batch records CUDA events between its stages and last_times() reports the
  // gpu_* fields (a few microseconds of host time per batch: benchmarks time with it off). The CPU
  // detector has no device stages and ignores it. Thread-safe.
  virtual void set_stage_profiling(bool on) { (void)on; }
  // GPU, with stage profiling on: the spans of the batches collected since it was turned on or
  // since the last call (at most 100,000 kept); the CPU detector has none.
  virtual std::vector<BatchSpan> take_timeline() { return {}; }
  // Makes every execution context ready for these batch sizes (each 1..max_batch; empty: all of
  // them), so that no later call pays a size's first run. GPU: a batch size the build did not tune
  // takes the nearest tuned size's tactics, and its first run builds their cuDNN plans and captures
  // its CUDA graph: seconds for a whole model. A server whose batcher forms any size (Triton's
  // dynamic batching) calls this before it takes requests. Waits for calls in flight to finish and
  // holds new ones until it returns. CPU: nothing to do. Throws kInvalidArgument for a size
  // outside 1..max_batch.
  void warm_up(const std::vector<int>& batch_sizes = {});
  const BuildInfo& build_info() const { return build_info_; }

 protected:
  BuildInfo build_info_;  // filled by the backend's constructor; build_ms by create()

  // The backends. `post`: the call's post-processing options (validated; options().postprocess
  // unless the call passed its own).
  // run_detect: `images` is non-empty and validated; same contract as detect().
  virtual std::vector<Detections> run_detect(const std::vector<ImageView>& images, DetectionTrace* trace,
                                             const PostprocessOptions& post) = 0;
  // detect_device()'s backend (`images` non-empty and validated); the default refuses (kUnsupported).
  virtual std::vector<Detections> run_detect_device(const std::vector<ImageView>& images,
                                                    const PostprocessOptions& post);
  // The DeviceImage form's backend (`images` non-empty and validated); the default refuses.
  virtual std::vector<Detections> run_detect_device_images(const std::vector<DeviceImage>& images,
                                                           const PostprocessOptions& post);
  // detect_encoded()'s backend (`images` non-empty, `sizes` sized to match); the default decodes
  // on the CPU (decode_image) and calls run_detect(). Backends report their decodes through
  // count_decoded().
  virtual std::vector<Detections> run_detect_encoded(const std::vector<EncodedImage>& images,
                                                     std::vector<DecodedSize>& sizes, const PostprocessOptions& post);
  // warm_up()'s backend (sizes validated, never empty); the default (CPU) does nothing.
  virtual void run_warm_up(const std::vector<int>& batch_sizes) { (void)batch_sizes; }
  void count_decoded(int64_t gpu, int64_t cpu, int64_t cpu_fallback, const std::string& backend);
  // The call's options: `postprocess` validated, or options().postprocess when null.
  const PostprocessOptions& call_postprocess(const PostprocessOptions* postprocess) const;
  // Backends: the times of the call that ends, recorded for the calling thread (last_times()).
  void record_times(const StageTimes& times);

 private:
  mutable std::mutex decode_stats_mutex_;
  DecodeStats decode_stats_;
  // last_times(): per calling thread, the most recent first; at most kTimesThreads threads kept.
  static constexpr size_t kTimesThreads = 64;
  mutable std::mutex times_mutex_;
  std::vector<std::pair<std::thread::id, StageTimes>> times_;
};

}  // namespace yolocu

// One execution of the yolocu backend: Triton's dynamic batcher hands over several requests; the
// images of all good requests run as one detect_encoded() (IMAGE) and one detect() (PIXELS) call,
// so that requests of one image still fill the detector's batches. A request whose input is
// malformed, over a limit or cannot be decoded gets an error response naming the problem; the
// others are answered as usual.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "triton/backend_state.hpp"
#include "triton/log.hpp"
#include "triton/metrics.hpp"
#include "triton/tensors.hpp"
#include "yolocu/error.hpp"

namespace yolocu::triton {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

[[noreturn]] void refuse(const std::string& msg) { throw Error(ErrorCode::kInvalidArgument, msg); }

// One request of the execution and what became of it.
struct Pending {
  TRITONBACKEND_Request* request = nullptr;
  std::string error;                    // non-empty: answered with this error
  bool refused_by_limit = false;        // for the metrics
  bool pixels = false;                  // PIXELS (else IMAGE)
  std::vector<uint8_t> owned;           // the input, when Triton handed it in several buffers
  std::vector<EncodedImage> encoded;    // IMAGE
  std::vector<ImageView> views;         // PIXELS
  std::vector<Detections> detections;
};

struct InputTensor {
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

// The named input of the request with its bytes in host memory (copied into `owned` when Triton
// holds them in several buffers); false when the request has no such input.
bool read_input(TRITONBACKEND_Request* request, const char* name, std::vector<uint8_t>& owned, InputTensor& t) {
  TRITONBACKEND_Input* input = nullptr;
  if (TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(request, name, &input)) {
    TRITONSERVER_ErrorDelete(err);
    return false;
  }
  const char* input_name = nullptr;
  const int64_t* shape = nullptr;
  uint32_t dims = 0, buffers = 0;
  if (TRITONSERVER_Error* err = TRITONBACKEND_InputProperties(input, &input_name, &t.dtype, &shape, &dims, &t.bytes, &buffers)) {
    const std::string msg = TRITONSERVER_ErrorMessage(err);
    TRITONSERVER_ErrorDelete(err);
    refuse(std::string(name) + ": " + msg);
  }
  t.shape.assign(shape, shape + dims);
  for (uint32_t b = 0; b < buffers; ++b) {
    const void* ptr = nullptr;
    uint64_t size = 0;
    TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
    int64_t mem_id = 0;
    if (TRITONSERVER_Error* err = TRITONBACKEND_InputBuffer(input, b, &ptr, &size, &mem, &mem_id)) {
      const std::string msg = TRITONSERVER_ErrorMessage(err);
      TRITONSERVER_ErrorDelete(err);
      refuse(std::string(name) + ": " + msg);
    }
    if (mem == TRITONSERVER_MEMORY_GPU) refuse(std::string(name) + ": inputs in GPU memory are not supported (send host memory)");
    if (buffers == 1) {
      t.data = static_cast<const uint8_t*>(ptr);
      return true;
    }
    const auto* p = static_cast<const uint8_t*>(ptr);
    owned.insert(owned.end(), p, p + size);
  }
  t.data = owned.data();
  return true;
}

void gather_image(Pending& r, const InputTensor& t, const BackendConfig& config) {
  if (t.dtype != TRITONSERVER_TYPE_BYTES) refuse("IMAGE must be BYTES (TYPE_STRING)");
  if (t.shape.size() != 2 || t.shape[1] != 1 || t.shape[0] < 1) refuse("IMAGE must have shape [batch, 1]");
  if (t.bytes > config.max_request_bytes) {
    r.refused_by_limit = true;
    refuse("IMAGE: " + std::to_string(t.bytes) + " bytes, over the limit of " + std::to_string(config.max_request_bytes) +
           " (parameter max_request_bytes)");
  }
  const std::vector<ByteItem> items = split_bytes_tensor(t.data, t.bytes, t.shape[0]);
  for (size_t i = 0; i < items.size(); ++i)
    r.encoded.push_back({items[i].data, items[i].size, "IMAGE[" + std::to_string(i) + "]"});
}

void gather_pixels(Pending& r, const InputTensor& t, const BackendConfig& config) {
  if (t.dtype != TRITONSERVER_TYPE_UINT8) refuse("PIXELS must be UINT8");
  if (t.shape.size() != 4 || t.shape[3] != 3 || t.shape[0] < 1 || t.shape[1] < 1 || t.shape[2] < 1)
    refuse("PIXELS must have shape [batch, height, width, 3] (BGR)");
  const int64_t n = t.shape[0], h = t.shape[1], w = t.shape[2];
  const DecodeLimits& lim = config.decode_limits;
  if (h > lim.max_height || w > lim.max_width || h * w > lim.max_pixels) {
    r.refused_by_limit = true;
    refuse("PIXELS: " + std::to_string(w) + "x" + std::to_string(h) + " is over the limit (" + std::to_string(lim.max_pixels) +
           " pixels, sides up to " + std::to_string(lim.max_width) + ")");
  }
  const uint64_t image_bytes = static_cast<uint64_t>(h * w * 3);
  if (t.bytes / image_bytes != static_cast<uint64_t>(n) || t.bytes % image_bytes != 0)
    refuse("PIXELS: " + std::to_string(t.bytes) + " bytes for shape [" + std::to_string(n) + ", " + std::to_string(h) + ", " +
           std::to_string(w) + ", 3]");
  r.pixels = true;
  for (int64_t i = 0; i < n; ++i)
    r.views.push_back({t.data + i * image_bytes, static_cast<int>(w), static_cast<int>(h), static_cast<size_t>(w * 3)});
}

void gather(Pending& r, const BackendConfig& config) {
  InputTensor image, pixels;
  std::vector<uint8_t> image_owned, pixels_owned;
  const bool has_image = read_input(r.request, "IMAGE", image_owned, image);
  const bool has_pixels = read_input(r.request, "PIXELS", pixels_owned, pixels);
  if (has_image == has_pixels) refuse("a request needs exactly one of the inputs IMAGE and PIXELS");
  if (has_image) {
    r.owned = std::move(image_owned);
    gather_image(r, image, config);
  } else {
    r.owned = std::move(pixels_owned);
    gather_pixels(r, pixels, config);
  }
}

void fail(Pending& r, const std::exception& e) {
  r.error = client_message(e.what());
  const auto* ye = dynamic_cast<const Error*>(&e);
  if (r.refused_by_limit || (ye && ye->code() == ErrorCode::kOutOfMemory)) {
    r.refused_by_limit = true;
  } else if (ye && !r.pixels && (ye->code() == ErrorCode::kParse || ye->code() == ErrorCode::kUnsupported)) {
    metrics_add(Counter::kDecodeFailures, 1);
  }
}

// Detects the images of every good request in one call per input kind; when that call fails, each
// request again alone, so that the error lands on the request that caused it.
void detect_all(Detector& det, std::vector<Pending>& pending, bool pixels) {
  std::vector<Pending*> group;
  std::vector<EncodedImage> encoded;
  std::vector<ImageView> views;
  for (Pending& r : pending) {
    if (!r.error.empty() || r.pixels != pixels) continue;
    group.push_back(&r);
    encoded.insert(encoded.end(), r.encoded.begin(), r.encoded.end());
    views.insert(views.end(), r.views.begin(), r.views.end());
  }
  if (group.empty()) return;
  auto run = [&](const std::vector<EncodedImage>& e, const std::vector<ImageView>& v) {
    return pixels ? det.detect(v) : det.detect_encoded(e);
  };
  try {
    std::vector<Detections> all = run(encoded, views);
    size_t k = 0;
    for (Pending* r : group) {
      const size_t n = pixels ? r->views.size() : r->encoded.size();
      r->detections.assign(std::make_move_iterator(all.begin() + k), std::make_move_iterator(all.begin() + k + n));
      k += n;
    }
    return;
  } catch (const std::exception& e) {
    if (group.size() == 1) return fail(*group[0], e);
  }
  for (Pending* r : group) {
    try {
      r->detections = run(r->encoded, r->views);
    } catch (const std::exception& e) {
      fail(*r, e);
    }
  }
}

// Creates the requested outputs of a good request; an error when one cannot be made.
TRITONSERVER_Error* fill_outputs(TRITONBACKEND_Response* response, TRITONBACKEND_Request* request, const RequestOutputs& o) {
  uint32_t count = 0;
  if (TRITONSERVER_Error* err = TRITONBACKEND_RequestOutputCount(request, &count)) return err;
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    if (TRITONSERVER_Error* err = TRITONBACKEND_RequestOutputName(request, i, &name)) return err;
    const std::string n = name;
    std::vector<int64_t> shape{o.images, o.k};
    const void* src = nullptr;
    size_t bytes = 0;
    TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_FP32;
    if (n == "BOXES") {
      shape.push_back(4), src = o.boxes.data(), bytes = o.boxes.size() * sizeof(float);
    } else if (n == "SCORES") {
      src = o.scores.data(), bytes = o.scores.size() * sizeof(float);
    } else if (n == "CLASSES") {
      dtype = TRITONSERVER_TYPE_INT32, src = o.classes.data(), bytes = o.classes.size() * sizeof(int32_t);
    } else if (n == "COUNT") {
      dtype = TRITONSERVER_TYPE_INT32, shape = {o.images, 1}, src = o.count.data(), bytes = o.count.size() * sizeof(int32_t);
    } else {
      return make_error(TRITONSERVER_ERROR_INVALID_ARG, "unknown output " + n);
    }
    TRITONBACKEND_Output* output = nullptr;
    if (TRITONSERVER_Error* err = TRITONBACKEND_ResponseOutput(response, &output, name, dtype, shape.data(), static_cast<uint32_t>(shape.size())))
      return err;
    void* dst = nullptr;
    TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
    int64_t mem_id = 0;
    if (TRITONSERVER_Error* err = TRITONBACKEND_OutputBuffer(output, &dst, bytes, &mem, &mem_id)) return err;
    if (mem == TRITONSERVER_MEMORY_GPU) return make_error(TRITONSERVER_ERROR_INTERNAL, "the server offered GPU memory for " + n);
    if (bytes) std::memcpy(dst, src, bytes);
  }
  return nullptr;
}

void respond(Pending& r) {
  TRITONBACKEND_Response* response = nullptr;
  if (!check(TRITONBACKEND_ResponseNew(&response, r.request), "creating a response")) return;
  TRITONSERVER_Error* err = nullptr;
  if (r.error.empty()) {
    try {  // (on the response thread an exception would end the server: it becomes this request's error)
      err = fill_outputs(response, r.request, pack_outputs(r.detections));
    } catch (const std::exception& e) {
      err = make_error(TRITONSERVER_ERROR_INTERNAL, std::string("packing the outputs: ") + e.what());
    }
    if (err) r.error = TRITONSERVER_ErrorMessage(err);
  } else {
    err = make_error(TRITONSERVER_ERROR_INVALID_ARG, r.error);
  }
  check(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err), "sending a response");
  if (err) TRITONSERVER_ErrorDelete(err);
}

// Parameter slow_execution_ms: every execution at least that long counts in the metric
// yolocu_slow_executions_total; one of them a second per instance is logged with its phases (the
// others of that second counted in the next line), so that the tail of the latency has a cause.
constexpr uint64_t kSlowLogGapNs = 1000000000ull;

void report_slow(InstanceState& state, const StageTimes& t, uint32_t requests, uint64_t images, int64_t cpu_decoded,
                 uint64_t start, uint64_t compute_start, uint64_t compute_end, uint64_t end) {
  const int limit_ms = state.model->config.slow_execution_ms;
  if (limit_ms <= 0 || end - start < static_cast<uint64_t>(limit_ms) * 1000000ull) return;
  metrics_add(Counter::kSlowExecutions, 1);
  if (state.slow_logged_ns != 0 && end - state.slow_logged_ns < kSlowLogGapNs) {
    ++state.slow_unlogged;
    return;
  }
  const PinnedAllocationCounts pinned = pinned_allocation_counts();
  auto ms = [](uint64_t a, uint64_t b) { return static_cast<double>(b - a) / 1e6; };
  char line[768];
  std::snprintf(line, sizeof(line),
                "instance %s: slow execution, %.2f ms for %u requests and %llu images (%lld decoded on the CPU): "
                "inputs %.2f ms, detection %.2f ms (decode and input %.2f, enqueue %.2f, results %.2f; %d batches), "
                "responses %.2f ms; "
                "%d more slow executions since the last line; nvJPEG pinned memory since then: %llu "
                "allocations, %llu frees",
                state.name.c_str(), ms(start, end), requests, static_cast<unsigned long long>(images),
                static_cast<long long>(cpu_decoded), ms(start, compute_start), ms(compute_start, compute_end),
                t.preprocess, t.inference, t.postprocess, t.batches, ms(compute_end, end), state.slow_unlogged,
                static_cast<unsigned long long>(pinned.allocations - state.slow_pinned.allocations),
                static_cast<unsigned long long>(pinned.frees - state.slow_pinned.frees));
  log_warn(line);
  state.slow_logged_ns = end;
  state.slow_unlogged = 0;
  state.slow_pinned = pinned;
}

}  // namespace

void execute(InstanceState& state, TRITONBACKEND_Request** requests, uint32_t count) {
  const uint64_t exec_start = now_ns();
  std::vector<Pending> pending(count);
  for (uint32_t i = 0; i < count; ++i) {
    pending[i].request = requests[i];
    try {
      gather(pending[i], state.model->config);
    } catch (const std::exception& e) {
      fail(pending[i], e);
    }
  }
  const uint64_t compute_start = now_ns();
  detect_all(*state.detector, pending, /*pixels=*/false);
  detect_all(*state.detector, pending, /*pixels=*/true);
  const uint64_t compute_end = now_ns();
  // the stages of this thread's call, for report_slow's line (read here, and only when it may log)
  const StageTimes times = state.model->config.slow_execution_ms > 0 ? state.detector->last_times() : StageTimes{};
  uint64_t images = 0, decoded = 0;
  for (Pending& r : pending) {
    if (r.error.empty()) {
      images += r.detections.size();
      if (!r.pixels) decoded += r.detections.size();
    } else if (r.refused_by_limit) {
      metrics_add(Counter::kImagesRefused, 1);
    }
  }
  int64_t cpu_decoded = 0;  // of this execution's images (those of failed requests included)
  if (decoded > 0) {
    metrics_add(Counter::kImagesDecoded, static_cast<double>(decoded));
    const int64_t cpu = state.detector->decode_stats().cpu;
    cpu_decoded = cpu - state.cpu_decoded_seen;
    state.cpu_decoded_seen = cpu;
    if (cpu_decoded > 0) metrics_add(Counter::kImagesDecodedCpu, static_cast<double>(cpu_decoded));
  }
  auto answer = [&state, times, count, images, cpu_decoded, exec_start, compute_start, compute_end,
                 batch = std::make_shared<std::vector<Pending>>(std::move(pending))] {
    for (Pending& r : *batch) respond(r);
    const uint64_t exec_end = now_ns();
    for (Pending& r : *batch) {
      check(TRITONBACKEND_ModelInstanceReportStatistics(state.instance, r.request, r.error.empty(), exec_start, compute_start,
                                                        compute_end, exec_end),
            "reporting statistics");
      check(TRITONBACKEND_RequestRelease(r.request, TRITONSERVER_REQUEST_RELEASE_ALL), "releasing a request");
    }
    if (images > 0)
      check(TRITONBACKEND_ModelInstanceReportBatchStatistics(state.instance, images, exec_start, compute_start, compute_end,
                                                             exec_end),
            "reporting batch statistics");
    report_slow(state, times, count, images, cpu_decoded, exec_start, compute_start, compute_end, exec_end);
  };
  if (state.responses)
    state.responses->post(std::move(answer));
  else
    answer();
}

}  // namespace yolocu::triton

// Internal: the CUDA detector's execution context (a stream, an engine, a post-processing
// workspace, staging buffers, profiling events and gate) and its grow-only buffers.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "core/device_budget.hpp"
#include "pipeline/cuda_device_input.hpp"
#include "pipeline/stream_gate.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/postprocess_cuda.hpp"

namespace yolocu::detail {

// Grow-only device / pinned host buffers: they reallocate only when a larger image than ever
// before arrives (never in the steady state of a video stream or a fixed dataset).
class DeviceBuffer {
 public:
  ~DeviceBuffer() {
    cudaFree(ptr_);
    if (budget_) budget_->refund(size_);
  }
  // Charges its allocations to `budget` (the context's share of max_device_memory) as `what`.
  void set_budget(detail::DeviceBudget* budget, const char* what) {
    budget_ = budget;
    what_ = what;
  }
  // Grows to `bytes`: over the budget, kOutOfMemory and the old buffer kept (the detector stays
  // usable for smaller images).
  void reserve(size_t bytes) {
    if (bytes <= size_) return;
    if (budget_) budget_->charge(bytes - size_, std::string("the ") + what_ + " (growing from " +
                                                    detail::format_bytes(size_) + " to " + detail::format_bytes(bytes) + ")");
    cudaFree(ptr_);
    ptr_ = nullptr;
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e != cudaSuccess) {
      if (budget_) budget_->refund(bytes);
      size_ = 0;
      ptr_ = nullptr;
      (void)cudaGetLastError();
      YOLOCU_CHECK(e != cudaErrorMemoryAllocation, kOutOfMemory, "cannot allocate ", bytes,
                   " bytes of device memory for the ", what_);
      YOLOCU_CUDA_CHECK(e);
    }
    size_ = bytes;
  }
  void* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
  detail::DeviceBudget* budget_ = nullptr;
  const char* what_ = "buffer";
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  void swap(PinnedBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
  }
  void reserve(size_t bytes) {
    if (bytes <= size_) return;
    cudaFreeHost(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    YOLOCU_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, cudaHostAllocDefault));
    size_ = bytes;
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// One execution context: a stream, an engine, a post-processing workspace and staging buffers,
// and the events that time its stages when profiling is on.
struct Context {
  static constexpr int kEvents = 5;  // before upload | letterbox | engine | post-processing | after
  // What max_device_memory leaves after the engine, for the context's own buffers; declared first:
  // the buffers below refund it when destroyed.
  detail::DeviceBudget budget{0, "max_device_memory"};
  cudaStream_t stream = nullptr;
  cudaEvent_t events[kEvents] = {};
  cudaEvent_t done = nullptr;  // DetectorOptions::blocking_sync: what collect() waits on (else null)
  std::unique_ptr<CudaEngine> engine;
  std::unique_ptr<PostprocessWorkspace> post;       // for the detector's post-processing options
  std::unique_ptr<PostprocessWorkspace> post_call;  // for the last other set a call passed (made on first use)
  PostprocessOptions post_call_options;
  PostprocessWorkspace* active_post = nullptr;      // the batch in flight's: post or post_call
  DeviceBuffer d_images, d_descs, d_input;
  PinnedBuffer h_images, h_descs;
  std::unique_ptr<detail::DeviceImageInput> device_input;  // detect_device(DeviceImage): made on first use
  int index = 0;  // in the detector's list (BatchSpan::context)
  bool busy = false;
  bool profiled = false;  // the batch in flight recorded its events
  // Profiling only: the stream waits at a gate until the whole batch is enqueued, so that its
  // stages run back to back and the events measure device time, not the host's enqueue gaps.
  std::unique_ptr<detail::StreamGate> gate;
  ~Context() {
    for (cudaEvent_t e : events)
      if (e) cudaEventDestroy(e);
    if (done) cudaEventDestroy(done);
    if (stream) cudaStreamDestroy(stream);
  }
  void mark(int i) {
    if (profiled) YOLOCU_CUDA_CHECK(cudaEventRecord(events[i], stream));
  }
  // Profiling: the stream waits here until the batch is enqueued (the enqueue opens the gate when
  // it ends, however it ends), then event 0 (`start`). Called after the batch's last allocation or
  // buffer growth: cudaFree synchronises the device, which would wait for this closed gate (until
  // the gate's time limit; the batch's times are then left out).
  void hold(bool start = true) {
    if (!profiled) return;
    if (!gate) gate = std::make_unique<detail::StreamGate>();
    gate->close(stream);
    if (start) mark(0);
  }
  void open_gate() noexcept {
    if (gate) gate->open();
  }
};

// Opens a context's gate when its enqueue ends, however it ends (a closed gate would hang the
// stream and every synchronisation of the device).
struct GateOpener {
  Context& c;
  ~GateOpener() { c.open_gate(); }
};

}  // namespace yolocu::detail

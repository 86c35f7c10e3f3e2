// RAII for the GPU engine's device resources: memory charged to the engine's budget, handles,
// streams, events, graphs, and a scoped current device.
#pragma once

#include <cudnn.h>

#include <memory>
#include <string>
#include <type_traits>

#include "core/cuda_check.hpp"
#include "core/device_budget.hpp"

namespace yolocu::cuda_engine_internal {

// Frees, and refunds the budget the bytes were charged to (if any).
struct CudaFree {
  detail::DeviceBudget* budget = nullptr;
  size_t bytes = 0;
  void operator()(void* p) const noexcept {
    cudaFree(p);
    if (budget) budget->refund(bytes);
  }
};
using DeviceMem = std::unique_ptr<void, CudaFree>;

// `bytes` charged to `budget` first (kOutOfMemory over max_device_memory, nothing allocated), then
// allocated (kOutOfMemory when the device has no room).
inline DeviceMem device_alloc(size_t bytes, const char* what, detail::DeviceBudget* budget) {
  if (bytes == 0) return DeviceMem();
  if (budget) budget->charge(bytes, std::string("the engine's ") + what);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess && budget) budget->refund(bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    detail::fail(ErrorCode::kOutOfMemory, "cannot allocate ", bytes, " bytes of device memory for ", what);
  }
  YOLOCU_CUDA_CHECK(e);
  return DeviceMem(p, CudaFree{budget, bytes});
}

template <typename T, void (*Destroy)(T)>
struct Deleter {
  void operator()(std::remove_pointer_t<T>* p) const noexcept { Destroy(p); }
};
template <typename T, void (*Destroy)(T)>
using Handle = std::unique_ptr<std::remove_pointer_t<T>, Deleter<T, Destroy>>;

inline void destroy_cudnn(cudnnHandle_t h) { cudnnDestroy(h); }
inline void destroy_stream(cudaStream_t s) { cudaStreamDestroy(s); }
inline void destroy_event(cudaEvent_t e) { cudaEventDestroy(e); }
inline void destroy_graph(cudaGraph_t g) { cudaGraphDestroy(g); }
inline void destroy_graph_exec(cudaGraphExec_t g) { cudaGraphExecDestroy(g); }

using CudnnHandle = Handle<cudnnHandle_t, destroy_cudnn>;
using Stream = Handle<cudaStream_t, destroy_stream>;
using Event = Handle<cudaEvent_t, destroy_event>;
using CudaGraph = Handle<cudaGraph_t, destroy_graph>;
using GraphExec = Handle<cudaGraphExec_t, destroy_graph_exec>;

inline Event make_event(unsigned flags) {
  cudaEvent_t e = nullptr;
  YOLOCU_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags));
  return Event(e);
}

// Makes `device` current for a scope and restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    YOLOCU_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) YOLOCU_CUDA_CHECK(cudaSetDevice(device));
    else prev_ = -1;
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

}  // namespace yolocu::cuda_engine_internal

// The states the yolocu backend keeps per model and per model instance.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "triton/backend_config.hpp"
#include "triton/response_queue.hpp"
#include "triton/triton_api.hpp"
#include "yolocu/detector.hpp"
#if defined(YOLOCU_WITH_CUDA)
#include "yolocu/image_decode_cuda.hpp"  // (CUDA's headers: CUDA builds only)
#endif
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"

namespace yolocu::triton {

#if !defined(YOLOCU_WITH_CUDA)
struct PinnedAllocationCounts {  // yolocu::PinnedAllocationCounts of CUDA builds, always zero here
  uint64_t allocations = 0, frees = 0;
};
#endif

// One loaded model: its configuration and the ONNX model of its version, parsed once and shared by
// the instances' detectors.
struct ModelState {
  std::string name;
  std::string onnx_path;  // <repository>/<model>/<version>/<model_file>
  BackendConfig config;   // iou kFamilyDefault unless the config names one
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Int8Calibration> calibration;  // precision int8: bound to the model file's bytes
};

// One model instance: its own Detector on its device (KIND_GPU: the instance's GPU; KIND_CPU: the
// CPU engine). Triton calls an instance's execute from one thread at a time.
struct InstanceState {
  std::string name;
  ModelState* model = nullptr;
  TRITONBACKEND_ModelInstance* instance = nullptr;
  std::unique_ptr<Detector> detector;
  // slow_execution_ms: when the last slow execution was logged, those not logged since, and the
  // process's nvJPEG pinned allocation counts then (from the end of the instance's warm-up)
  uint64_t slow_logged_ns = 0;
  int slow_unlogged = 0;
  PinnedAllocationCounts slow_pinned;
  // the detector's count of CPU-decoded images at the last execution (for yolocu_images_decoded_cpu_total)
  int64_t cpu_decoded_seen = 0;
  // response_thread: the thread that answers the executions (declared last: destroyed first, after
  // answering what it holds, while the rest of the state is still there)
  std::unique_ptr<ResponseQueue> responses;
};

// nvjpeg_pinned_allocation_counts(), zeros in a build without CUDA.
inline PinnedAllocationCounts pinned_allocation_counts() {
#if defined(YOLOCU_WITH_CUDA)
  return nvjpeg_pinned_allocation_counts();
#else
  return {};
#endif
}

// Runs one execution: the requests' inputs checked one request at a time, the images of every good
// request detected in one call, each request answered (its outputs, or an error for it alone) and
// released, by state.responses' thread when there is one (execute then returns once the detector
// is done with the execution).
void execute(InstanceState& state, TRITONBACKEND_Request** requests, uint32_t count);

}  // namespace yolocu::triton

// The CUDA detector's entry point. No CUDA implementation exists yet: Device::kAuto therefore runs
// on the CPU and Device::kCuda is refused. The CUDA detector replaces these two definitions.
#include "pipeline/detector_backends.hpp"

namespace yolocu::detail {

bool cuda_detector_available() noexcept { return false; }

std::unique_ptr<Detector> create_cuda_detector(const std::string& /*onnx_path*/,
                                               const DetectorOptions& /*options*/) {
  return nullptr;
}

}  // namespace yolocu::detail

// The CUDA detector's entry point in builds without CUDA (YOLOCU_CUDA=OFF): Device::kAuto runs on
// the CPU and Device::kCuda is refused. CUDA builds link cuda_detector.cpp instead.
#include "pipeline/detector_backends.hpp"

namespace yolocu::detail {

bool cuda_detector_available() noexcept { return false; }

std::unique_ptr<Detector> create_cuda_detector(std::shared_ptr<const Model> /*model*/,
                                               const DetectorOptions& /*options*/) {
  return nullptr;
}

}  // namespace yolocu::detail

// Internal: the detector implementations behind Detector::create, and the hook through which the
// CUDA implementation plugs in.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "yolocu/detector.hpp"
#include "yolocu/model.hpp"

namespace yolocu::detail {

// The CPU reference implementation (oneDNN engine, exact letterbox, CPU post-processing).
// `options` are already validated by the front end, the family's defaults resolved; `model` is the
// parsed model, shared with the detector.
std::unique_ptr<Detector> create_cpu_detector(std::shared_ptr<const Model> model, const DetectorOptions& options);

// The CUDA implementation, when this build has one: returns nullptr while none is linked in
// (cuda_detector_hook.cpp; replace that file's definitions with the real CudaDetector).
bool cuda_detector_available() noexcept;
std::unique_ptr<Detector> create_cuda_detector(std::shared_ptr<const Model> model, const DetectorOptions& options);

// True when CUDA device `index` exists and the driver answers (always false without CUDA).
bool cuda_device_usable(int index) noexcept;

// The model's class names padded (or cut) to `num_classes`, "class<i>" for a missing or empty one.
std::vector<std::string> padded_class_names(const Model& model, int num_classes);

// Candidates as a k x 6 float32 tensor (x1, y1, x2, y2, score, class), for DetectionTrace.
Tensor candidates_tensor(const Candidates& candidates);

// The front-end checks of one image (host view): kInvalidArgument naming image `index`.
void validate_image(const ImageView& image, size_t index);
// The same for a DeviceImage (host-side checks only: formats, sizes, pitches, planes).
void validate_device_image(const DeviceImage& image, size_t index);

}  // namespace yolocu::detail

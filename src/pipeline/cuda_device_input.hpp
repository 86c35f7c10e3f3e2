// Internal: the CUDA detector's DeviceImage input (Detector::detect_device of BGR / RGB / NV12
// device images): ordering after the images' producer streams, the descriptors, the letterbox.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "yolocu/device_image.hpp"
#include "yolocu/geometry.hpp"
#include "yolocu/letterbox.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu::detail {

// One per execution context (its event and descriptor buffers are reused batch after batch).
// Not thread-safe: the context's owner uses it.
class DeviceImageInput {
 public:
  DeviceImageInput();
  ~DeviceImageInput();
  DeviceImageInput(const DeviceImageInput&) = delete;
  DeviceImageInput& operator=(const DeviceImageInput&) = delete;

  // Enqueues on `stream`, without synchronising the host: for each distinct DeviceImage::stream of
  // the batch an event recorded there and waited for on `stream`; the descriptors' upload; one
  // letterbox launch writing d_input (n x 3 x dst_h x dst_w of dtype). kInvalidArgument for an image
  // that is not in memory of `cuda_device`. geoms receives one geometry per image. The previous
  // call's work on `stream` must be finished (the descriptors' pinned staging is reused).
  // Descriptor buffers for n images (grown here, outside letterbox(): growing frees, and cudaFree
  // synchronises the device).
  void reserve(int n);

  void letterbox(const DeviceImage* images, int n, int cuda_device, int dst_w, int dst_h, DType dtype,
                 LetterboxMode mode, void* d_input, cudaStream_t stream, std::vector<LetterboxGeometry>& geoms);

 private:
  cudaEvent_t ready_ = nullptr;
  void* h_descs_ = nullptr;  // pinned
  void* d_descs_ = nullptr;
  size_t capacity_ = 0;      // descriptors
};

}  // namespace yolocu::detail

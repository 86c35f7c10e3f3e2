// yolocu/letterbox_image_cuda.hpp - the GPU letterbox of DeviceImages (BGR, RGB or NV12 in device
// memory), a batch of differently sized images and formats in one launch (CUDA builds only).
//
// The NV12 path converts each source pixel it reads (the 2x2 neighbourhood of the resize) from
// YUV to BGR in registers, with libswscale's arithmetic (yolocu/device_image.hpp), then resizes
// exactly like letterbox_cuda.hpp: there is no intermediate BGR image. Definitions:
//   kExact: bit-identical to  letterbox_to_input(nv12_to_bgr(image))  on the CPU (for kBgr: to
//           letterbox_to_input(image); kRgb: the same with the channels swapped on reading);
//   kFast:  float bilinear of the converted pixels (letterbox_cuda.hpp's kFast).
//
// Usage, once per batch (Detector::detect_device() does this):
//   1. make_device_letterbox_desc() per image on the host (validates, returns the geometry);
//   2. copy the descriptors to a device array on the stream that will run the letterbox;
//   3. letterbox_images_cuda(d_descs, batch, ...) writes batch x 3 x dst_h x dst_w planar RGB,
//      value / 255, float32 or float16.
// Asynchronous on `stream`, allocates nothing, never synchronises (graph-capturable). Ordering
// against the images' producers (DeviceImage::stream) is the caller's: letterbox_images_cuda reads
// the pixels when it runs on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "yolocu/device_image.hpp"
#include "yolocu/geometry.hpp"
#include "yolocu/letterbox.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu {

// One image of a batch (plain data, copied to the device as is).
struct DeviceLetterboxDesc {
  const uint8_t* plane0 = nullptr;  // BGR / RGB pixels, or the NV12 luma plane
  const uint8_t* plane1 = nullptr;  // NV12 interleaved U, V plane (else null)
  uint64_t pitch0 = 0, pitch1 = 0;
  int32_t src_w = 0, src_h = 0;
  int32_t new_w = 0, new_h = 0;     // resized size inside the letterbox
  int32_t left = 0, top = 0;        // integer padding
  int32_t resize_mode = 0;          // internal: copy / 2x area / linear
  int32_t format = 0;               // PixelFormat
  int32_t full_range = 0;           // NV12: YuvRange::kFull
  int32_t reserved = 0;
  double scale_x = 1, scale_y = 1;  // OpenCV's 1 / (new / src)
};

// Validates one DeviceImage (null planes, sizes, pitches, format, an aspect ratio that would
// resize to 0 pixels: kInvalidArgument naming `what`) and describes where it lands in a
// dst_w x dst_h letterbox. Host only; does not touch the device memory.
DeviceLetterboxDesc make_device_letterbox_desc(const DeviceImage& image, int dst_w, int dst_h,
                                               LetterboxGeometry* geometry = nullptr,
                                               const char* what = "make_device_letterbox_desc");

// d_descs: device array of `batch` descriptors made for dst_w x dst_h; d_dst: batch * 3 * dst_h *
// dst_w elements of dtype (kFloat32 or kFloat16). batch == 0 is a no-op. Errors: kInvalidArgument
// (arguments), kCuda (the launch failed).
void letterbox_images_cuda(const DeviceLetterboxDesc* d_descs, int batch, int dst_w, int dst_h, DType dtype,
                           LetterboxMode mode, void* d_dst, cudaStream_t stream);

}  // namespace yolocu

// yolocu/letterbox_cuda.hpp - the letterbox on the GPU, for a whole batch of images of different
// sizes in one kernel launch (CUDA builds only: YOLOCU_WITH_CUDA).
//
// Usage, once per batch:
//   1. for each image (device memory, BGR, any row pitch) build a descriptor on the host with
//      make_letterbox_cuda_desc(); it validates the image and returns the geometry for
//      post-processing;
//   2. copy the descriptors to a device array (e.g. cudaMemcpyAsync on the same stream);
//   3. letterbox_to_input_cuda(d_descs, batch, ...) writes batch x 3 x dst_h x dst_w planar RGB,
//      value / 255 (float32, or float16 = that float rounded to nearest even).
// The launch is asynchronous on `stream`, allocates nothing and never synchronises, so it can be
// captured in a CUDA graph. The source images and d_descs must stay valid until it completes.
//
// Modes: kExact is bit-identical to the CPU reference letterbox_to_input() (OpenCV 4.6
// fixed-point arithmetic, the 2x2 area path, copies); kFast is plain float bilinear with pixel
// centres aligned ((x + 0.5) * scale - 0.5, clamped), rounded to the nearest 8-bit level: within
// one or two levels of kExact, somewhat cheaper.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "yolocu/geometry.hpp"
#include "yolocu/image.hpp"
#include "yolocu/letterbox.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu {

// One image of a batch (plain data, copied to the device as is). Built by make_letterbox_cuda_desc.
struct LetterboxCudaDesc {
  const uint8_t* src = nullptr;  // device pointer, interleaved BGR
  uint64_t pitch_bytes = 0;
  int32_t src_w = 0, src_h = 0;
  int32_t new_w = 0, new_h = 0;  // resized size inside the letterbox
  int32_t left = 0, top = 0;     // integer padding
  int32_t resize_mode = 0;       // internal: copy / 2x area / linear
  int32_t reserved = 0;
  double scale_x = 1, scale_y = 1;  // OpenCV's 1 / (new / src)
};

// Validates one device image (null data, sizes, pitch, an aspect ratio that would resize to 0
// pixels: kInvalidArgument) and describes where it lands in a dst_w x dst_h letterbox. Host only;
// does not touch the device memory. *geometry (optional) receives the letterbox geometry.
LetterboxCudaDesc make_letterbox_cuda_desc(const ImageView& d_src, int dst_w, int dst_h,
                                           LetterboxGeometry* geometry = nullptr);

// d_descs: device array of `batch` descriptors made for the same dst_w x dst_h. d_dst: device
// buffer of batch * 3 * dst_h * dst_w elements of dtype (kFloat32 or kFloat16). batch == 0 is a
// no-op. Errors: kInvalidArgument (arguments), kCuda (the launch failed).
void letterbox_to_input_cuda(const LetterboxCudaDesc* d_descs, int batch, int dst_w, int dst_h,
                             DType dtype, LetterboxMode mode, void* d_dst, cudaStream_t stream);

}  // namespace yolocu

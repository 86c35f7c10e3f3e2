// yolocu's direct stem convolution (stem_conv_kernel.cu): the network's first convolution read
// straight from the engine's NCHW fp16 input, so that the input conversion (NCHW -> NHWC, or the
// space-to-depth copy of YOLOv5's 6x6 stride-2 stem) and the convolution are one pass over the
// image: the input is read once from memory and the output written once. Stride 2, few input
// channels (c * r * s small): YOLOv5's 6x6 pad-2 stem and YOLOv8 / YOLO11's 3x3 pad-1 stem.
// Tensor cores (mma.sync m16n8k16, fp16 in, fp32 accumulation); epilogue + bias, SiLU in float32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace yolocu::engine {

struct StemConvArgs {
  const void* x = nullptr;      // NCHW fp16 [n, c, h, w]
  const void* w = nullptr;      // the packed weights (stem_conv_pack), on the device
  const float* bias = nullptr;  // [k] or null
  void* y = nullptr;            // NHWC fp16 [n, p, q, k], pixels y_pitch elements apart
  int n = 0, c = 0, h = 0, w_ = 0, k = 0, r = 0, s = 0, p = 0, q = 0;
  int y_pitch = 0;              // 0: k (packed); else an even number >= k
  int pad_h = 0, pad_w = 0;     // stride 2, dilation 1
  bool silu = false;
};

// "" if the kernel runs this shape, else why not: c * r * (s rounded up to even after an odd pad)
// <= 112, k 16 or 32, r and s <= 7, pads <= 3, w a multiple of 8, p and q the stride-2 output sizes.
std::string stem_conv_unsupported(const StemConvArgs& a);
// The weights OIHW float32 [k, c, r, s] in the kernel's order (fp16 bits, zeros where the
// fragments pad), for a.w.
std::vector<uint16_t> stem_conv_pack(const StemConvArgs& a, const float* oihw);
// What a launch needs that does not change from call to call, found once on the current device:
// the kernel for the shape, its shared memory (its limit raised), how many blocks stay resident.
// For the shape of `a` (any batch up to 65535); throws if unsupported.
struct StemConvLaunch {
  const void* kernel = nullptr;
  int blocks = 0;
  size_t smem = 0;
  int k = 0, c = 0, h = 0, w = 0, r = 0, s = 0, pad_h = 0, pad_w = 0;  // the shape it was prepared for
};
StemConvLaunch stem_conv_prepare(const StemConvArgs& a);
// Enqueues one launch on `stream` (on the device `l` was prepared on); throws yolocu::Error if it
// fails, `a` is not the prepared shape or its input (a.x) is not 16-byte aligned.
void stem_conv_run(const StemConvLaunch& l, const StemConvArgs& a, cudaStream_t stream);
// Prepares and runs (tests, one-off launches).
void stem_conv_run(const StemConvArgs& a, cudaStream_t stream);

}  // namespace yolocu::engine

// yolocu's convolution for thin 3x3 layers (thin_conv_kernel.cu), the "own:thin" tactics: fp16 NHWC,
// 8, 16 or 32 input channels, 8 to 64 output channels, stride 1 or 2 (YOLOv8's and YOLO11's C2f /
// C3k2 bottlenecks at 160x160 and 80x80, the 16 -> 32 stride-2 layer after the stem), where cuDNN's
// tiles are mostly padding (docs/gpu-engine.md has what it measured). Epilogue fused:
// y = act(conv + bias) (+ residual); input, output and residual may be channel views of wider
// buffers (pixel pitches).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace yolocu::engine {

struct ThinConvArgs {
  const void* x = nullptr;         // NHWC fp16 [n, h, w, c], pixels x_pitch elements apart
  const void* w = nullptr;         // KRSC fp16 [k, 3, 3, c]
  const float* bias = nullptr;     // [k] or null
  const void* residual = nullptr;  // NHWC fp16 [n, p, q, k], pixels r_pitch apart, or null
  void* y = nullptr;               // NHWC fp16 [n, p, q, k], pixels y_pitch apart
  int n = 0, c = 0, h = 0, w_ = 0, k = 0, p = 0, q = 0;
  int pad_h = 0, pad_w = 0, stride = 1;  // the same stride in both dims
  int x_pitch = 0, y_pitch = 0, r_pitch = 0;  // 0: packed (c, k, k)
  bool silu = false;
};

// The output tile widths a candidate may take (a block computes 128 output pixels: 128 / width
// rows of `width` pixels).
constexpr int kThinTileWidths[] = {16, 32, 64};

// "" if the kernel runs this layer, else why not (c in {8, 16, 32}, k in {8, 16, 32, 64}, stride 1
// or 2, x_pitch a multiple of 8, y_pitch and r_pitch even, n * p * q < 2^31).
std::string thin_conv_unsupported(const ThinConvArgs& a);
// Dynamic shared memory of one block for tile width `tw`.
size_t thin_conv_smem(const ThinConvArgs& a, int tw);
// Raises the kernel's shared-memory limit and returns the grid the launches take (blocks that fit
// the device at once; the blocks loop over the tiles). Host call, outside any capture.
int thin_conv_prepare(const ThinConvArgs& a, int tw);
// Enqueues one launch of `blocks` blocks (thin_conv_prepare's result) on `stream`.
void thin_conv_run(const ThinConvArgs& a, int tw, int blocks, cudaStream_t stream);

}  // namespace yolocu::engine

// yolocu's depthwise convolution kernel (own_dwconv_kernel.cu), the "own:dw" tactic family: every
// output channel reads only its own input channel (group == c == k), so the layer is a stencil per
// channel and bound by memory, not by arithmetic. NHWC, fp16 or fp32, fp32 accumulation, any
// r x s up to kDwMaxFilter, any stride, padding and dilation; epilogue fused:
// y = act(conv + bias) (+ residual), rounded once to the activation dtype.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace yolocu::engine {

constexpr int kDwMaxFilter = 9;  // r and s <= 9 (the block's weights live in shared memory)

struct DwConvArgs {
  const void* x = nullptr;         // NHWC [n, h, w, c] (fp16 or fp32)
  const void* w = nullptr;         // [c, r, s] (KRSC with one input channel per group), same dtype
  const float* bias = nullptr;     // [c] or null
  const void* residual = nullptr;  // NHWC [n, p, q, c] (packed), or null
  void* y = nullptr;               // NHWC [n, p, q, c], pixels y_pitch elements apart
  int n = 0, c = 0, h = 0, w_ = 0, r = 0, s = 0, p = 0, q = 0;
  int y_pitch = 0;                 // 0: c (packed); else >= c
  int pad_h = 0, pad_w = 0, str_h = 1, str_w = 1, dil_h = 1, dil_w = 1;
  bool half = true, silu = false;
};

// A tile shape (a tactic candidate): each thread computes `cols` output pixels of one row (1, 2 or
// 4; interleaved with its neighbours': adjacent threads read adjacent pixels) for a vector of
// channels; a block of about 256 threads stacks up to `rows` output rows (more when the image is
// narrow). window: the thread's 4 pixels adjacent instead, each filter row's 6 input pixels loaded
// once into registers (3x3, stride and dilation 1 only: dwconv_window_ok).
struct DwTile {
  int cols = 1, rows = 1;
  bool window = false;
};

// "" if the kernel runs this shape, else why not.
std::string dwconv_unsupported(const DwConvArgs& a);
// True if a window tile runs this shape: a 3x3 filter, stride and dilation 1.
bool dwconv_window_ok(const DwConvArgs& a);
// Channels per thread the launch will use for these buffers: the widest vector (16 bytes at most)
// that divides c and the output pitch and to which x, y and the residual are aligned.
int dwconv_vector(const DwConvArgs& a);
// Enqueues one launch on `stream` (capturable); throws yolocu::Error if the shape is unsupported
// (kUnsupported) or the launch fails (kCuda). Host-side cost: a few integer divisions.
void dwconv_run(const DwConvArgs& a, const DwTile& tile, cudaStream_t stream);

}  // namespace yolocu::engine

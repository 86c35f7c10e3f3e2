// yolocu's own convolution kernel (own_conv_kernel.cu), the "own" tactic family: an implicit GEMM
// on tensor cores (WMMA 16x16x16, fp16 in, fp32 accumulation) for layers whose whole reduction
// (r * s * c <= kOwnMaxReduction) fits in shared memory at once and whose output has at most 64
// channels: the small-channel early layers (the space-to-depth stem, 16 -> 32 stride 2) where
// cuDNN's tiles are mostly padding. Epilogue fused: y = act(conv + bias) (+ residual).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace yolocu::engine {

constexpr int kOwnMaxReduction = 320;  // r * s * c
constexpr int kOwnMaxChannelsOut = 64;

struct OwnConvArgs {
  const void* x = nullptr;       // NHWC fp16 [n, h, w, c]
  const void* w = nullptr;       // KRSC fp16 [k, r, s, c]
  const float* bias = nullptr;   // [k] or null
  const void* residual = nullptr;  // NHWC fp16 like y, or null
  void* y = nullptr;             // NHWC fp16 [n, p, q, k], pixels y_pitch elements apart
  int n = 0, c = 0, h = 0, w_ = 0, k = 0, r = 0, s = 0, p = 0, q = 0;
  int y_pitch = 0;               // 0: k (packed); a multiple of 8 >= k otherwise
  int pad_h = 0, pad_w = 0, str_h = 1, str_w = 1, dil_h = 1, dil_w = 1;
  bool silu = false;
};

// True if the kernel runs this shape: c % 8 == 0, k % 16 == 0, k <= 64, r * s * c <= 320, n * p * q < 2^31,
// y_pitch 0 or a multiple of 8 >= k.
bool own_conv_supports(const OwnConvArgs& a);
// Dynamic shared memory of one block (bytes) for a block of `bm` output pixels (64 or 128).
size_t own_conv_smem(const OwnConvArgs& a, int bm);
// Raises the kernel's dynamic shared-memory limit for this shape (host call, outside any capture).
void own_conv_prepare(const OwnConvArgs& a, int bm);
// Enqueues one launch on `stream`; throws yolocu::Error(kCuda) if it fails.
void own_conv_run(const OwnConvArgs& a, int bm, cudaStream_t stream);

}  // namespace yolocu::engine

// The launcher of the V8Tail step's kernel (steps/v8_tail_kernel.cu), callable from host C++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/v8_tail.hpp"

namespace yolocu::cuda_kernels {

// The levels of one fused YOLOv8 / YOLO11 tail: per level its box (64 channels) and class (nc
// channels) NHWC sources, fp16 or fp32 as the activations, with the pitches in `level`.
struct V8TailLevels {
  int count = 0;
  const void* box[engine::v8tail::kMaxLevels] = {};
  const void* cls[engine::v8tail::kMaxLevels] = {};
  engine::v8tail::Level level[engine::v8tail::kMaxLevels];
  int block_begin[engine::v8tail::kMaxLevels + 1] = {};  // set by the launcher
};

// Enqueues the tail of `batch` images on `stream`: out [batch, 4 + nc, anchors] plain float32,
// every element written. One launch; no synchronisation.
void v8_tail(const V8TailLevels& levels, bool half, float* out, int64_t nc, int64_t anchors, int batch,
             cudaStream_t stream);

}  // namespace yolocu::cuda_kernels

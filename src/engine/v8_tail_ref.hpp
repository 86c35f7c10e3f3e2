// The fused YOLOv8 / YOLO11 Detect tail (engine::V8Head) on the host, with the kernel's own math,
// tiling and thread mapping (engine/v8_tail.hpp): the reference the CPU tests compare with the
// node-by-node graph.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/v8_head.hpp"

namespace yolocu::engine {

// One level's sources: the box and class convolutions' outputs as NHWC float32 [N, ny, nx, pitch]
// (pitch >= the channels; channels beyond them are never read).
struct V8TailSource {
  const float* box = nullptr;
  const float* cls = nullptr;
  int64_t box_pitch = 0, cls_pitch = 0;
};

// Writes the head's output [batch, 4 + nc, anchors] to `out`, block by block as the kernel's
// tiles of `tile` pixels (a power of two <= 32; 0: v8tail::tile_pixels_for(nc)) cover it, each
// block's 256 threads phase by phase. Returns the number of stores (each element once:
// batch * (4 + nc) * anchors when the tiling is right).
int64_t v8_tail_reference(const V8Head& head, const std::vector<V8TailSource>& sources, int64_t batch, float* out,
                          int tile = 0);

}  // namespace yolocu::engine

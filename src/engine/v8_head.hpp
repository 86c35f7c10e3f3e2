// The tail of the ultralytics package's Detect head (YOLOv8, YOLO11: `Detect` exported to ONNX by
// ultralytics 8.x), recognised in a Plan so that the GPU engine can run it as one step. Per level l
// a box convolution (4 * 16 channels: the DFL logits of the left, top, right, bottom distances)
// and a class convolution (nc channels), outputs [N, C, h_l, w_l]; then
//   box_l -> Reshape [N, 64, h_l * w_l]    cls_l -> Reshape [N, nc, h_l * w_l]
//   Concat(box_*, axis 2) -> Reshape [N, 4, 16, A] -> Transpose [0, 2, 1, 3] -> Softmax(axis 1)
//     -> Conv 1x1 with weights 0, 1, ..., 15 and no bias -> Reshape [N, 4, A]        (DFL)
//     -> lt = channels 0..1, rb = channels 2..3 (two Slices, or a Split [2, 2])
//   x1y1 = anchors - lt;  x2y2 = anchors + rb
//   Concat((x1y1 + x2y2) / 2, x2y2 - x1y1, axis 1) * strides                        (box decode)
//   Concat(cls_*, axis 2) -> Sigmoid
//   Concat(decoded boxes, class scores, axis 1): the output [N, 4 + nc, A]
// where the constant anchors [1, 2, A] hold (x + 0.5, y + 0.5) of every level cell and the
// constant strides [1, A] one value per level (ultralytics' make_anchors). The matcher checks all
// of it, constants included; anything else is left to the node-by-node path.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/plan.hpp"

namespace yolocu::engine {

constexpr int64_t kV8RegMax = 16;         // DFL bins per distance (the projection's weights 0..15)
constexpr float kV8AnchorOffset = 0.5f;   // the anchor of cell (x, y) is (x + 0.5, y + 0.5)

struct V8Level {
  int box_conv = -1, cls_conv = -1;  // node indices of the level's last head convolutions
  int64_t ny = 0, nx = 0;
  int64_t anchor_begin = 0;  // the level's first anchor in the output (cell y * nx + x follows)
  float stride = 0;          // pixels per cell
};

struct V8Head {
  int concat = -1;  // node index of the final Concat (its output is the step's output)
  int64_t nc = 0;       // classes
  int64_t anchors = 0;  // A: the cells of all levels
  std::vector<V8Level> levels;
  std::vector<int> absorbed;  // node indices the fused step replaces, the final Concat included
};

// Matches the tail above ending at node `concat_idx`: every intermediate value is fp32, no graph
// output, and read only by the pattern; every level's convolution outputs are read only by their
// Reshape. Returns false (head untouched) on anything else.
bool match_v8_head(const Plan& plan, int concat_idx, V8Head* head);

// Every such head of the plan, in node order.
std::vector<V8Head> find_v8_heads(const Plan& plan);

}  // namespace yolocu::engine

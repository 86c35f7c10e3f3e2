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
// constant strides [1, A] one value per level (ultralytics' make_anchors). Older exports of the
// package concatenate each level's two convolutions first (one [N, 64 + nc, h_l, w_l] value per
// level), reshape and concatenate those, and split the result into box and class channels:
//   Concat(Reshape(level_l) [N, 64 + nc, h_l * w_l] ..., axis 2) -> Split [64, nc] on axis 1
// (the rest as above); that form is matched too, with the level's value as both sources. The
// matcher checks all of it, constants included; anything else is left to the node-by-node path.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/plan.hpp"

namespace yolocu::engine {

constexpr int64_t kV8RegMax = 16;         // DFL bins per distance (the projection's weights 0..15)
constexpr float kV8AnchorOffset = 0.5f;   // the anchor of cell (x, y) is (x + 0.5, y + 0.5)

struct V8Level {
  // Value ids of the level's sources [N, C, h, w]: the box logits are channels 0..63 of `box`, the
  // class logits channels cls_channel.. cls_channel + nc - 1 of `cls` (the same value, from channel
  // 64, in the concatenated form).
  int box = -1, cls = -1;
  int64_t cls_channel = 0;
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
// output, and read only by the pattern; every level's sources are runtime values made by a node and
// read only by their Reshape. Returns false (head untouched) on anything else.
bool match_v8_head(const Plan& plan, int concat_idx, V8Head* head);

// Every such head of the plan, in node order.
std::vector<V8Head> find_v8_heads(const Plan& plan);

}  // namespace yolocu::engine

// Shape inference and constant folding for concrete input shapes: turns a Model into the list of
// nodes that must run at inference time, every value with a static dtype and shape. Shared by the
// CPU executor and the GPU engine; the dynamic export's Shape/Gather/Range/Expand/Where grid
// subgraph folds away here once batch, height and width are known.
#pragma once

#include <string>
#include <vector>

#include "engine/ops.hpp"
#include "yolocu/model.hpp"

namespace yolocu::engine {

struct PlanValue {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;
  bool constant = false;
  Tensor value;  // when constant
  int producer = -1;           // index into Plan::nodes, -1 for inputs/constants
  std::vector<int> consumers;  // indices into Plan::nodes
  bool graph_input = false;
  bool graph_output = false;
};

struct PlanNode {
  Node node;
  const ops::OpDef* op = nullptr;
  std::vector<int> in;   // value ids (-1 for an omitted optional input)
  std::vector<int> out;  // value ids (-1 for an unused optional output)
};

struct Plan {
  int64_t opset = 0;
  std::vector<PlanValue> values;
  std::vector<PlanNode> nodes;  // runtime nodes only, topological order
  std::vector<int> inputs, outputs;
  std::vector<DType> input_dtypes, output_dtypes;  // as declared by the model (I/O conversion)
  int folded_nodes = 0;
};

struct PlanOptions {
  bool fp16_as_fp32 = true;  // compute fp16 models in fp32 (CPU): weights, constants, casts
  // Memory budget in bytes (0: default_max_memory()). Every value the model declares or folds must
  // fit in it, and so must all folded constants together; checked from the inferred shapes before
  // anything is allocated (kOutOfMemory naming the node, its output and the budget).
  uint64_t max_memory = 0;
};

// Largest element count of one tensor (2^31 - 1): the GPU kernels index with 32-bit ints, and no
// YOLO export comes near it. A value above it is kUnsupported, named with its node and shape.
constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;

// Resolves the model's declared input dims against `shapes` (symbolic dims bind consistently).
// kInvalidArgument names the input and the dim that does not fit.
void check_input_shapes(const Model& model, const std::vector<Shape>& shapes);

Plan build_plan(const Model& model, const std::vector<Shape>& input_shapes, const PlanOptions& options = {});

// One spatial dim of the network input as the GPU engine plans it (and what plans as it does):
// the requested size where > 0, else the model's static size, else 640.
inline int planned_input_dim(const Dim& d, int requested) {
  return requested > 0 ? requested : d.is_static() ? static_cast<int>(d.value) : 640;
}

// Conv -> Sigmoid -> Mul(conv, sigmoid) with no other consumers (SiLU): the pattern both engines
// fuse into the convolution. On a match sets the Sigmoid's and the Mul's node indices.
bool is_silu_pair(const Plan& plan, int conv_idx, int* sig_idx, int* mul_idx);

// ops::resize_source_indices of a nearest Resize / Upsample node of the plan (its scales / sizes
// inputs are constants by then): the source index along every axis of each output position.
std::vector<std::vector<int64_t>> resize_indices(const Plan& plan, const PlanNode& node);

// The residual Add both engines fuse into a convolution: value `y` (the output of convolution node
// `conv_idx`, activation included) has exactly one consumer, an fp32 Add(y, x) of the same shape
// whose other input x is a runtime value ready before the convolution runs (a graph input or
// produced by an earlier node). Returns the Add's node index and sets *x, else -1. ready_before
// false: the caller knows x is ready by other means (the GPU lowering: x already has its step,
// e.g. the output of a fused block that runs at the block's first node) and the node order of
// x's producer is not checked.
int residual_add(const Plan& plan, int conv_idx, int y, int* x, bool ready_before = true);

// The tail of ultralytics' Detect head as export.py writes it (models/yolo.py, v6.2-v7.0), one
// level per head convolution:
//   Conv -> Reshape [N, na, no, ny, nx] -> Transpose [0,1,3,4,2] -> Sigmoid -> Split [2, 2, no-4]
//   xy = (s0 * xy_scale + grid) * stride;  wh = (s1 * wh_scale) ^ wh_pow * anchor_grid
//   Concat(xy, wh, s2) on the last axis -> Reshape [N, na*ny*nx, no]
// and the Concat of the levels on axis 1 (the merged output). Engines replace all of it with one
// step that reads the convolutions' sigmoid outputs and writes the merged rows (the transposed
// 25200 x 85 tensor is never built piece by piece). The constants are broadcast here to
// [na, ny, nx, 2] (batch 1), so the fused step repeats the graph's float operations one by one,
// in the graph's order.
struct DetectLevel {
  int conv = -1;  // node index of the head convolution (its output feeds only this tail)
  int64_t na = 0, no = 0, ny = 0, nx = 0;
  int64_t row_begin = 0;  // first row of the level in the merged output
  std::vector<float> xy_scale, grid, stride, wh_scale, anchor_grid;  // [na][ny][nx][2] each
  float wh_pow = 2.f;
};

struct DetectHead {
  int concat = -1;  // node index of the Concat that merges the levels (the step's output)
  int64_t rows = 0;  // rows of the merged output
  std::vector<DetectLevel> levels;
  std::vector<int> absorbed;  // node indices the fused step replaces (tails and the Concat)
};

// Matches the pattern above ending at node `concat_idx`; every intermediate value has exactly the
// one consumer of the pattern, all values are fp32. Returns false (head untouched) otherwise.
bool match_detect_head(const Plan& plan, int concat_idx, DetectHead* head);

// Every Detect head of the plan (match_detect_head at each node), in node order.
std::vector<DetectHead> find_detect_heads(const Plan& plan);

// A copy of a static-batch-1 export (export.py's default) that accepts any batch: the input's and
// outputs' dim 0 become symbolic, and every Reshape target whose first entry is the static batch
// 1 gets 0 ("copy dim 0 from the input", ONNX Reshape semantics), following Identity chains to the
// initializer or Constant that holds it. Engines verify afterwards that every value scales with
// the batch (the YOLOv5 Detect head does). Returns the model unchanged if its batch is dynamic.
Model make_batch_dynamic(const Model& model);

}  // namespace yolocu::engine

// Host-side planning of the CPU engine (the mirror of cuda/gpu_steps.hpp): turns an engine::Plan
// into CPU steps, fuses Conv -> Sigmoid -> Mul (SiLU), a following residual Add and the Detect
// head's tail, decides each activation's layout, and plans the activation arena. Plain data: the
// step objects of cpu/steps/ are made from it (steps/cpu_step.hpp).
//
// Layouts: activations of convolution chains stay in oneDNN's blocked layout nChw{B}c (B =
// block_size()) when the channel count is a multiple of B; elementwise ops, channel Concat,
// MaxPool, nearest Resize and channel Split run on that layout directly; a convolution whose
// channel count is not a multiple of B after a blocked input writes the padded blocked layout.
// Anything else reads a plain (NCHW) copy made by a reorder step, and a convolution reading a
// plain activation with many channels reads a blocked copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/plan.hpp"

namespace yolocu::engine::cpu {

enum class CpuStepKind {
  kNode,            // the node's reference op (engine/ops.hpp) on plain values
  kConv,            // oneDNN convolution, SiLU / sigmoid / residual Add as post-ops, either layout
  kReorder,         // oneDNN reorder between the blocked and the plain layout (a layout twin)
  kMaxPoolBlocked,  // MaxPool on nChw{B}c
  kResizeBlocked,   // nearest Resize on nChw{B}c
  kSplitBlocked,    // channel Split on nChw{B}c into parts that are multiples of B
  kEltwise,         // Sigmoid as oneDNN's logistic over the whole buffer, either layout
  kMatMul,          // float MatMul of plain values with equal batch axes: oneDNN's matmul
  kSoftmax,         // float Softmax over the last axis of a plain value: oneDNN's softmax
  kDetectHead,      // the fused Detect tail (engine::DetectHead): head convolutions -> merged rows
  kNoop,            // a channel Concat whose inputs were written in place: no work
};

const char* cpu_step_kind_name(CpuStepKind k) noexcept;

struct CpuStepSpec {
  CpuStepKind kind = CpuStepKind::kNode;
  int node = -1;                // index into plan.nodes (-1 for reorders)
  bool fused_silu = false;
  bool fused_logistic = false;  // a Detect head convolution: its sigmoid runs in the convolution
  int head = -1;                // kDetectHead: index into CpuStepPlan::heads
  int residual = -1;            // kConv: value added to the (activated) output, an absorbed Add
  std::vector<int> in;          // per node input: value id actually read (-1 omitted)
  std::vector<int> out;         // per node output
  // kConv, simulated INT8 (quant/fake_quant.hpp): the input's scale (0: FP32) and the weights'
  // per output channel.
  float int8_x_scale = 0;
  std::vector<float> int8_w_scales;
};

struct CpuStepOptions {
  int block = 16;                 // B of nChw{B}c: block_size()
  bool fuse_detect_head = true;   // CpuEngineOptions::fuse_detect_head
};

struct CpuStepPlan {
  Plan plan;                      // values may be appended (layout twins)
  int block = 16;                 // B of nChw{B}c
  std::vector<DetectHead> heads;  // fused Detect tails
  std::vector<CpuStepSpec> steps;
  // Per value: 0 plain, 1 blocked nChw{B}c (B | C), 2 padded blocked (C not a multiple of B).
  std::vector<char> blocked;
  std::vector<int64_t> offset;    // per value: arena offset, -1 if none (constant / unused)
  size_t arena_bytes = 0, naive_bytes = 0;
  int fused_nodes = 0;            // nodes merged into another step
};

// Plans the steps, layouts and arena of `plan` (kUnsupported naming the node for a convolution
// whose weights are computed at run time).
CpuStepPlan plan_cpu_steps(Plan plan, const CpuStepOptions& options);

// Bytes of a value's buffer in its layout (a blocked buffer with its channel padding).
size_t cpu_value_bytes(const CpuStepPlan& sp, int value);

}  // namespace yolocu::engine::cpu

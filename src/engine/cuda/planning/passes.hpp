// The passes of plan_gpu_steps (gpu_steps.cpp), in the order it runs them. Host-only, private to
// the planning files.
//   fusion.cpp    which nodes fuse: Detect tails, SPPF blocks (Conv + SiLU + residual fuse while lowering)
//   lowering.cpp  nodes -> steps, each value's layout, reorder steps between layouts
//   buffers.cpp   channel pitches, buffer roots (views alias), copy-free Concat placement, the arena
//   channel_views.cpp  C2f / C3k2 without copies: Split outputs as channel views of the Concat's buffer
//   int8_lowering.cpp  INT8 convolutions and the int8 copies they read
#pragma once

#include <vector>

#include "engine/cuda/gpu_steps.hpp"

namespace yolocu::engine::planning {

// The nodes the fused steps absorb or stand for (per node of sp.plan).
struct Fusions {
  std::vector<bool> absorbed;  // computed by another node's step (no step of its own)
  std::vector<int> head_at;    // the merging Concat of a fused Detect tail: index into sp.heads, else -1
  std::vector<int> v8_head_at; // the final Concat of a fused YOLOv8 / YOLO11 tail: index into sp.v8_heads, else -1
  std::vector<int> sppf_at;    // the Concat of a fused SPPF: the pools' kernel size, else 0
  std::vector<int> attention_at;  // the first Reshape of a fused attention: index into sp.attention, else -1
};

// Fused Detect tails (options.fuse_detect_tail, options.fuse_v8_tail), SPPF blocks
// (options.fuse_sppf) and attention blocks (options.fuse_attention); fills sp.heads, sp.v8_heads,
// sp.fused_tail_nodes, sp.fused_sppf, sp.attention and sp.fused_attention_nodes.
Fusions find_fusions(GpuStepPlan& sp, const GpuStepOptions& options);

// One step (or one per output) for every node not absorbed, in node order, with a reorder step
// before it wherever an input is in the other layout; the graph outputs made plain. Fills
// sp.steps, sp.layout (values appended for layout twins), sp.convs and the SiLU / residual counts;
// marks the nodes the convolutions absorb in f.absorbed. Throws kUnsupported naming the node.
void lower_nodes(GpuStepPlan& sp, Fusions& f, const GpuStepOptions& options);

// sp.channel_pitch: NHWC values store their channels, padded to a multiple of 8 for head
// convolutions that only the fused Detect tail reads (options.pad_tail_channels).
void plan_channel_pitches(GpuStepPlan& sp, const GpuStepOptions& options);

// sp.root (views alias their input) and sp.channel_offset (copy-free Concat, options.copy_free_concat;
// then channel views, options.channel_views).
void plan_buffer_roots(GpuStepPlan& sp, const GpuStepOptions& options);

// Channel views (GpuStepOptions::channel_views): more Concat inputs in place, Split outputs as views
// of the Concat's buffer; removes the Split and Concat steps that no longer copy anything. Fills
// sp.channel_views and sp.copy_steps_removed, updates the Concat placement counts.
void plan_channel_views(GpuStepPlan& sp, const GpuStepOptions& options);

// INT8 (options.int8, int8_lowering.cpp): engine::plan_int8_regions with the GPU plan's limits
// (no int8 MaxPool / Resize / Concat / Split yet); its convolutions become kConvInt8 steps, each
// int8 copy a kNhwcInt8 value, written by its INT8 convolution or by a kQuantize step from the fp16
// value just before its first reader. Fills sp.int8_convs, sp.int8_float_convs, sp.quantize_steps.
void plan_int8(GpuStepPlan& sp, const GpuStepOptions& options);

// sp.offset, sp.arena_bytes, sp.naive_bytes: the liveness-planned arena of the roots.
void plan_arena(GpuStepPlan& sp, const GpuStepOptions& options);

}  // namespace yolocu::engine::planning

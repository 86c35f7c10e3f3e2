// Host-side planning of the GPU engine (no CUDA needed, unit-tested on the CPU): turns an
// engine::Plan into GPU steps, decides each activation's layout, fuses Conv -> Sigmoid -> Mul
// (SiLU) and a following residual Add into the convolution, and plans the activation arena.
//
// Layouts: rank-4 activations of convolution chains are channels-last (NHWC) in the engine's
// activation dtype (fp16 or fp32); Conv, channel Concat, MaxPool, nearest Resize and same-shape
// elementwise ops run on that layout. Every other value is "plain": dense row-major float32, the
// layout of the ONNX graph, where generic kernels run the remaining ops (the Detect tail:
// Reshape / Transpose / Split / broadcast arithmetic). Explicit reorder steps convert between the
// two, exactly like the CPU executor's reorders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "engine/attention_block.hpp"
#include "engine/quant/int8_regions.hpp"
#include "engine/v8_head.hpp"
#include "yolocu/int8.hpp"

namespace yolocu::engine {

// kNhwcInt8: an int8 copy of an NHWC value (INT8 engines, planning/int8_lowering.cpp), packed.
enum class Layout : uint8_t { kNone, kPlain, kNhwc, kNhwcInt8 };

// The kinds, with what each does: step_kinds.def.
enum class GpuStepKind {
#define YOLOCU_GPU_STEP(kind, name, factory) kind,
#include "engine/cuda/step_kinds.def"
#undef YOLOCU_GPU_STEP
};

const char* gpu_step_kind_name(GpuStepKind k) noexcept;

struct GpuStep {
  GpuStepKind kind = GpuStepKind::kView;
  int node = -1;          // index into plan.nodes (-1 for reorders)
  std::vector<int> in;    // value ids read (after layout twins; -1 omitted)
  std::vector<int> out;   // value ids written
  bool silu = false;      // kConv: SiLU fused
  int residual = -1;      // kConv: value added after the activation (fused Add), -1 none
  int out_index = 0;      // kGather for Split: which output of the node
  int head = -1;          // kDetectTail: index into GpuStepPlan::heads (in = the levels' conv outputs);
                          // kV8Tail: into GpuStepPlan::v8_heads (in = box, class conv output per level);
                          // kAttention: into GpuStepPlan::attention (in = qkv, out = x [, Reshape(v)])
  int pool = 0;           // kSppf: the max pools' kernel size (odd; padding pool / 2)
  int int8 = -1;          // kConvInt8: index into GpuStepPlan::int8_convs
  float scale = 0.f;      // kQuantize: the int8 copy's scale
  std::string label;      // node name (or "reorder") for profiles
};

// An INT8 convolution step (GpuStepKind::kConvInt8): in = {x's int8 copy, weights, bias, residual},
// out = the forms of its output it writes (one or two: the kernels' outputs).
struct GpuInt8Conv {
  float x_scale = 0.f;            // the scale of the int8 copy it reads
  float residual_scale = 0.f;     // the residual read as an int8 copy at this scale; 0: as the fp16 value
  std::vector<float> out_scales;  // per output: the int8 copy's scale; 0: the fp16 value
  std::vector<float> w_scales;    // per output channel (the calibration's)
};

struct GpuStepPlan {
  Plan plan;                    // values may be appended (layout twins)
  std::vector<GpuStep> steps;
  std::vector<Layout> layout;   // per value
  std::vector<int> root;        // per value: the value whose buffer it uses (views alias)
  std::vector<int64_t> offset;  // per value: arena offset of its root, -1 if none
  size_t arena_bytes = 0, naive_bytes = 0;
  int fused_silu = 0, fused_residual = 0, convs = 0;
  std::vector<DetectHead> heads;  // fused Detect tails
  std::vector<V8Head> v8_heads;   // fused YOLOv8 / YOLO11 Detect tails
  int fused_tail_nodes = 0;       // nodes both kinds of fused tails replace
  int fused_sppf = 0;             // kSppf steps (each replaces three MaxPools and a Concat)
  std::vector<AttentionBlock> attention;  // fused C2PSA attention blocks (one kAttention step each)
  int fused_attention_nodes = 0;          // nodes they replace
  // Per value: channels as stored in its NHWC buffer (the pixel pitch), >= its shape[1]; 0 = not
  // NHWC. Larger only for head convolutions that feed the fused Detect tail alone, padded to a
  // multiple of 8 (255 -> 256: tensor-core tiles fit, the tail reads the first 255).
  std::vector<int64_t> channel_pitch;
  // Copy-free Concat: per value, >= 0 when the value lives inside its root's NHWC buffer, starting
  // at this channel (its producer writes its channel slice of the Concat's output directly, with
  // the Concat's channel count as its pixel pitch; a channel view's readers read it with that
  // pitch); -1: the value owns its buffer.
  std::vector<int64_t> channel_offset;
  int concat_inputs_in_place = 0, concat_inputs_copied = 0;
  int channel_views = 0;       // Split outputs made channel views (GpuStepOptions::channel_views)
  int copy_steps_removed = 0;  // Split and Concat steps they made unnecessary (removed from steps)
  // INT8 (GpuStepOptions::int8): the INT8 convolution steps, the convolutions left in float and why,
  // the kQuantize steps (an int8 copy of a value made by a float step).
  std::vector<GpuInt8Conv> int8_convs;
  std::vector<Int8FloatConv> int8_float_convs;
  int quantize_steps = 0;
  int int8_concats = 0;  // Concats whose int8 copies their inputs' INT8 steps write in place
};

struct GpuStepOptions {
  size_t act_elem_size = 2;  // bytes per NHWC activation element (2: fp16, 4: fp32)
  bool fuse_silu = true;
  bool fuse_residual = true;
  bool fuse_detect_tail = false;  // see CudaEngineOptions::fuse_detect_tail
  bool fuse_v8_tail = false;      // see CudaEngineOptions::fuse_v8_tail
  bool fuse_attention = false;    // see CudaEngineOptions::fuse_attention
  // The fused attention's shared memory per block may not exceed this (the device's opt-in limit;
  // engine/attention.hpp's smem_bytes at the plan's sizes): larger blocks stay unfused.
  size_t attention_smem = size_t{48} << 10;
  bool pad_tail_channels = true;  // pad the fused Detect tail's input channels to a multiple of 8
  bool fuse_sppf = true;          // see CudaEngineOptions::fuse_sppf
  // Copy-free Concat: a channel Concat's input whose only reader is that Concat and whose producer
  // is a Conv or a nearest Resize is written by its producer straight into its channel slice of the
  // Concat's output (16-byte aligned slices only); the Concat copies only the other inputs.
  bool copy_free_concat = true;
  // Channel views (with copy_free_concat; planning/channel_views.cpp): a channel Split whose input
  // is a Conv's output read only by the Split, and whose outputs are consecutive inputs of one
  // channel Concat, in order: the Conv writes into the Concat's buffer at their place and the
  // Split's outputs become views of it (root, channel_offset, the Concat's pitch), the Split steps
  // removed. A Concat input made by a Conv or a nearest Resize that other steps read too is placed
  // as well when every other reader is a Conv reading it as its input or residual or a nearest
  // Resize (they read the pitch). A Concat step whose inputs are all in place is removed. Views are
  // only made where every reader is one of those, and only in plans that have a channel Split step
  // (C2f / C3k2 graphs; a YOLOv5 plan stays as it is).
  bool channel_views = true;
  // The arena for graphs captured as branches (CudaEngineOptions::graph_branches): two buffers
  // share memory only where the data dependencies already order every step using the earlier
  // before every step using the later, so that reuse adds no edge to the graph (a larger arena:
  // buffers of branches that may run side by side stay apart).
  bool branch_arena = false;
  // INT8 (planning/int8_lowering.cpp): the convolutions that the calibration quantises and the
  // INT8 kernels run become kConvInt8 steps reading int8 copies of their inputs; every other step
  // runs in the activation dtype (fp16). Null: none.
  const Int8Calibration* int8 = nullptr;
  // INT8: a residual is added from the value's int8 copy where it has one (engine::Int8KernelLimits);
  // false: from its fp16 value (CudaEngineOptions::int8_residuals).
  bool int8_residuals = false;
  size_t alignment = 256;
};

// SPPF as one kernel (GpuStepKind::kSppf) holds kSppfPlanes h x w planes of 16 bytes per pixel in
// shared memory (the input and three row maxima), at most 48 KB: maps up to 768 pixels (20x20 at a
// 640 input; 26x26 at 832). Larger maps keep their pools and Concat.
constexpr size_t kSppfPlanes = 4;
inline bool sppf_fits(int64_t h, int64_t w) { return h > 0 && w > 0 && kSppfPlanes * 16 * h * w <= (size_t{48} << 10); }

// Throws kUnsupported naming the node for ops / attributes the GPU engine does not run.
GpuStepPlan plan_gpu_steps(Plan plan, const GpuStepOptions& options);

// Bytes of a value's buffer at the plan's shapes in its layout (channel_pitch included).
size_t value_bytes(const GpuStepPlan& sp, int value, size_t act_elem_size);

// The pixel pitch (elements) a step reading `value` uses when the value lives inside another
// value's NHWC buffer (channel_offset >= 0: a copy-free Concat input or a channel view), else 0
// (-1 and values owning their buffer). A Conv reading it gets ConvProblem::xp / rp from it.
int64_t view_pitch(const GpuStepPlan& sp, int value);

// Was the Concat input `value` written by its producer into its slice of the Concat's output
// `concat_out` (copy-free Concat), so that the Concat step neither reads nor copies it?
bool written_in_place(const GpuStepPlan& sp, int value, int concat_out);

}  // namespace yolocu::engine

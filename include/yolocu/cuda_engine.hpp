// yolocu/cuda_engine.hpp - runs a loaded model on one NVIDIA GPU (cuDNN + yolocu kernels), FP32 or
// FP16, without TensorRT. Only in CUDA builds (YOLOCU_WITH_CUDA).
//
// Build (constructor): shape inference and constant folding for {max_batch, 3, H, W}, layouts
// (NHWC activations), Conv+bias+SiLU(+residual Add) fusion, the space-to-depth stem, weights
// converted and uploaded once, one tactic per convolution chosen for every batch size in
// tune_batches (src/engine/cuda/tactics: from the tactic cache on disk when it has them, else by
// checking and timing every candidate: cuDNN Graph API fused kernels and legacy cuDNN algorithms),
// one activation arena planned by liveness, one shared workspace. Every device allocation happens
// here. A batch size that was not tuned takes the tactics of the nearest tuned one (built at its
// first run, or by prepare()); with pad_batches, runs use the anchor sizes only.
//
// run() enqueues one forward pass on the caller's stream: no allocation, no synchronisation (after
// the first run of a batch size, which captures that size's CUDA graph). Outputs live in the
// engine's memory, are float32 row-major in the model's output shapes (batch = the run's batch),
// and stay valid until the next run on this engine.
//
// Threads: one CudaEngine is ONE execution context: do not call run()/run_host()/profile() on the
// same engine from several threads at once. Several engines (sharing one Model) may run
// concurrently on different streams. The only process-wide state is a mutex-protected memo of
// the chosen tactics (per device, layer signature and batch), so that every engine of a model
// computes bit-identical results and only the first build tunes.
#pragma once

#if defined(YOLOCU_WITH_CUDA)

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "yolocu/detector.hpp"
#include "yolocu/model.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu {

struct CudaEngineOptions {
  int device = 0;
  // kFloat32: no TF32 (bit-comparable to the CPU engine). kInt8: fp16 activations, and the
  // convolutions int8_calibration quantises (and the INT8 kernels run) in INT8 (docs/int8.md).
  Precision precision = Precision::kFloat16;
  std::shared_ptr<const Int8Calibration> int8_calibration;  // kInt8: required (yolocu calibrate makes one)
  // kInt8: an INT8 convolution adds its residual from its fp16 value (its producer writes that form
  // beside the int8 copy the bottleneck reads), as simulated INT8 adds it in float; true: from the
  // value's int8 copy, one output fewer for the producer but one quantisation more (what that costs
  // in mAP: docs/int8.md).
  bool int8_residuals = false;
  int max_batch = 1;
  int height = 0, width = 0;                  // 0 = the model's static size, else 640
  size_t workspace_limit = size_t{256} << 20; // workspace a tactic may use
  bool cuda_graphs = true;                    // replay one captured graph per batch size
  // With cuda_graphs: the forward as this many graphs (1..64) of consecutive steps, launched one
  // after the other (same kernels, same order). More than one: an experiment on how a graph's
  // back-to-back kernels share the GPU with other streams' work (nvJPEG; docs/performance.md
  // section 10).
  int graph_segments = 1;
  // With cuda_graphs: each graph captured as the steps' data dependencies (what one step writes
  // and another reads or writes, the convolution workspace included) instead of one chain in step
  // order, so that independent branches (a Detect head's levels, its box and class convolutions)
  // run side by side; the same kernels, and the same results bit for bit. false: one chain.
  bool graph_branches = true;
  // Batch sizes whose tactics are chosen at build (like TensorRT's optimisation profiles); empty:
  // {1, max_batch}. Values outside [1, max_batch] are an error.
  std::vector<int> tune_batches;
  // Run only the anchor batch sizes (the tuned ones, the powers of two below max_batch, max_batch):
  // a run of n images runs the smallest anchor >= n, the extra rows computed and never read
  // (engine/cuda/tactics/batch_sizes.hpp). Fewer sizes to derive, plan and capture (a cold start of
  // every size 1..32 derives 4 instead of 30) for up to twice the work in a partial batch.
  bool pad_batches = false;
  // Derived (untuned) batch sizes build no kernel at runtime: for each layer whose tuned winner is a
  // runtime-compiled cuDNN graph engine (a compilation per layer and size), they
  // take the fastest candidate of the same tuning sweep that is not (legacy cuDNN, yolocu's own, or
  // a precompiled cuDNN engine). A derived size is then ready in milliseconds, at the price of that
  // candidate's speed at that size; the tuned sizes are unchanged. A layer whose choice came from a
  // tactic cache file written without that candidate derives the winner; one whose file keeps the
  // size's plan of the winner (an earlier start without this option compiled it) restores that.
  // (Compiling in the background while the engine runs is no option: cuDNN's runtime compilation
  // makes other threads' legacy-stream calls fail meanwhile, NVDEC's picture mapping among them.)
  bool derive_without_compiling = false;
  // The tactic cache file: "" = TacticCache::default_path() ($YOLOCU_TACTIC_CACHE, else
  // $XDG_CACHE_HOME/yolocu/tactics.json, else ~/.cache/yolocu/tactics.json); "none" = no file.
  std::string tactic_cache;
  // cuDNN Graph API candidates tried per layer, the first ones of cuDNN's heuristic list. 7: winners
  // further down the list gained little of the convolution time while each plan costs seconds of
  // compilation (docs/performance.md section 4); 12 or more for an exhaustive tune.
  int max_graph_plans = 7;
  // CUTLASS implicit-GEMM convolutions (fp16, bias and SiLU fused) as a fourth tactic family, tuned
  // beside the others. Off by default: on the H100 its sm_80 kernels won no tuned layer
  // (docs/gpu-engine.md); a build without CUTLASS's headers has no such candidates.
  bool cutlass_tactics = false;
  // yolocu's depthwise kernel (group == channels: YOLO11's DWConv, the attention's positional
  // convolution) as a candidate beside cuDNN's grouped convolution for those layers (off until
  // timed against it on a GPU).
  bool own_depthwise_tactics = false;
  // yolocu's thin 3x3 kernel (8, 16 or 32 input channels, up to 64 output channels, stride 1 or 2:
  // the C2f / C3k2 bottlenecks of YOLOv8 and YOLO11 at the high resolutions) as a candidate beside
  // cuDNN's for those layers; the tuner keeps it only where it is faster.
  bool own_thin_tactics = true;
  // Run the Detect head's tail (reshape, transpose, sigmoid, grid/anchor arithmetic, concats) as
  // one kernel per level reading the head convolutions' NHWC output (their channels padded to a
  // multiple of 8), instead of ~12 generic passes per level.
  bool fuse_detect_tail = true;
  // Run YOLOv8 / YOLO11's Detect tail (DFL softmax expectation, box decode, class sigmoid, the
  // reshapes and concats into [batch, 4 + nc, anchors]) as one kernel for all levels reading the
  // box and class convolutions' NHWC outputs (engine/v8_head.hpp says what is matched), instead of
  // ~25 generic steps.
  bool fuse_v8_tail = true;
  // Run each attention block of YOLO11's C2PSA (q^T k * scale, softmax over the keys, v @ attn^T,
  // with the reshapes, split and transposes around them: engine/attention_block.hpp says what is
  // matched) as one kernel reading the qkv convolution's NHWC output and writing x and pe's input
  // in NHWC, fp32 scores and sums, instead of ~12 generic steps and layout reorders.
  bool fuse_attention = true;
  // SPPF (YOLOv5's / YOLOv8's three chained stride-1 max pools and the Concat of their outputs with
  // their input) as one kernel that writes the Concat's output; bit-identical to the four steps.
  bool fuse_sppf = true;
  // The 6x6 stride-2 first convolution on 3 channels (YOLOv5's stem) runs as a 3x3 stride-1
  // convolution on the 2x2 space-to-depth input (12 channels padded to 16), which the input
  // conversion writes directly: the same sums, on a shape tensor cores run well.
  bool space_to_depth_stem = true;
  // FP16: the network's first convolution (when it alone reads the input: YOLOv5's 6x6 and YOLOv8 /
  // YOLO11's 3x3 stride-2 stems, 16 or 32 outputs) may run as yolocu's direct stem kernel, which
  // reads the NCHW input itself: the input conversion and the convolution become one pass over the
  // image. Chosen per tuned batch size where it is faster than the conversion and the layer's tuned
  // tactic (timed at build, the choice kept in the tactic cache; its output checked against theirs).
  bool direct_stem = true;
  // Copy-free Concat: a channel Concat's input that only the Concat reads, made by a convolution or
  // a nearest resize, is written by its producer straight into its channel slice of the Concat's
  // output (the convolution's tactics are tuned for that pitched output); the Concat copies the
  // others. Off when workspace_limit is 0 (the legacy cuDNN tactics need workspace for it).
  bool copy_free_concat = true;
  // Channel views (with copy_free_concat): a C2f / C3k2 block runs without copies. Its first
  // convolution writes its output into the final Concat's buffer, the channel Split's outputs are
  // views of that buffer (no Split step), each bottleneck's output is written in its slice even
  // where the next bottleneck reads it too, and the Concat step disappears. The convolutions that
  // read a view (input or residual with a wider pixel pitch) are tuned for it: cuDNN's strided
  // kernels, or a packed copy then the layer's best packed tactic. Applies to graphs that have a
  // channel Split (YOLOv8, YOLO11); a graph without one (YOLOv5) is planned as with it off.
  bool channel_views = true;
  bool print_warnings = true;                 // tactic-cache warnings to stderr (also in stats())
  // Device memory the engine may allocate itself (activations, weights, constants, workspaces,
  // tuning buffers), bytes; 0: no limit. Over it the build throws kOutOfMemory naming the buffer,
  // before allocating it. cuDNN's and the CUDA runtime's own allocations are not counted.
  uint64_t max_device_memory = 0;
};

struct CudaEngineStats {
  double build_ms = 0;
  size_t activation_bytes = 0;  // arena with liveness reuse
  size_t naive_bytes = 0;       // one buffer per value
  size_t weight_bytes = 0;      // weights + biases + constants on the device
  size_t workspace_bytes = 0;   // shared cuDNN workspace
  // Workspaces in all: with graph_branches, convolutions that may run side by side get workspaces
  // of their own where one shared workspace would order them (their bytes count in device_bytes).
  int workspaces = 1;
  size_t device_bytes = 0;      // all the engine's own device memory after the build (max_device_memory counts these)
  int kernels_per_run = 0;      // launches per forward (conv + epilogue count as 2)
  // Steps that launch, and the longest chain of them that must run one after the other
  // (graph_branches), at the largest tuned batch size; value_depth: the same were the tactics'
  // shared workspace not a dependency (the activations' alone).
  int launching_steps = 0, step_depth = 0, value_depth = 0;
  int steps = 0;                // engine steps per forward
  int fused_convs = 0;          // convolutions with bias + SiLU fused into their epilogue
  int fused_residuals = 0;      // residual Adds fused into a conv epilogue
  int fused_tail_nodes = 0;     // Detect-tail nodes replaced by the fused tail kernels
  int fused_attention = 0;      // attention blocks run as one kernel each
  int fused_attention_nodes = 0;  // the nodes they replace
  int fused_sppf = 0;           // SPPF blocks run as one kernel (three MaxPools and a Concat each)
  int concat_inputs_in_place = 0;  // channel-Concat inputs their producers write in place (copy-free)
  int concat_inputs_copied = 0;    // ... that the Concat copies
  int channel_views = 0;           // Split outputs that are channel views (channel_views: no Split step)
  int copy_steps_removed = 0;      // Split and Concat steps channel_views removed
  int convs = 0;
  // kInt8: convolutions run on the INT8 kernels, int8 copies quantised from fp16 values, each INT8
  // layer's kernel at the largest tuned batch ("<layer>: <kernel id>"), the convolutions left in
  // float ("<node>: <why>").
  int int8_convs = 0;
  int int8_quantize_steps = 0;
  int int8_concats = 0;  // Concats on int8 values (their inputs' INT8 steps write the int8 copy in place)
  std::vector<std::string> int8_kernels;
  std::vector<std::string> int8_float_convs;
  double conv_flops_per_image = 0;  // 2 * MACs of all convolutions for one image
  bool space_to_depth_stem = false; // the stem runs as space-to-depth + 3x3
  std::vector<int> direct_stem_batches;  // tuned batch sizes whose stem runs as the direct kernel
  // Tactics: build-time choice for the tuned batch sizes.
  std::vector<int> tuned_batches;
  double tune_ms = 0;               // host time choosing tactics (cache loads included)
  int tactic_layers = 0;            // (layer, batch) choices made at build
  int tactic_cache_hits = 0;        // ... taken from the cache on disk (checked, not timed)
  int tactic_plans_restored = 0;    // ... of which restored from the cache's serialised plan (no compile)
  int tactic_memo_hits = 0;         // ... taken from this process's earlier choices
  int tactics_tuned = 0;            // ... timed now
  int tactic_candidates = 0, tactic_rejected = 0;  // tried / failed the correctness check
  // Where tune_ms went, one line starting "tune breakdown:" (docs/gpu-engine.md: prebuild wall,
  // thread-ms of heuristics queries and plan builds per family, restores, check, timing, serialise).
  std::string tune_breakdown;
  std::string tactic_cache_path;    // "" = none
  // Batch sizes run so far that were not tuned (their tactics derived from the nearest tuned
  // size's, built on all cores when first run, their plans kept in the tactic cache file), the
  // host time that took (ms), and the derived tactics restored from the file's plans.
  int derived_batches = 0;
  double derive_ms = 0;
  int derived_plans_restored = 0;
  double derive_pool_ms = 0;    // of derive_ms: the plans built or restored on all cores
  double derive_finish_ms = 0;  // ... then on the engine's thread (plans serialised for the file)
  int derived_compiled = 0;     // derived tactics whose build compiled a kernel at runtime
  // pad_batches: the sizes runs execute (ascending; empty without padding), and the rows computed
  // past the runs' batches so far.
  std::vector<int> anchors;
  int64_t padded_images = 0;
  int graphs_captured = 0;  // batch sizes whose CUDA graph has been captured (cuda_graphs)
  std::vector<std::string> warnings;
};

struct LayerTime {
  std::string name;    // node name (or "x -> nchw" for layout conversions)
  std::string kind;    // step kind: Conv, ConcatNhwc, Gather, ...
  double ms = 0;       // mean device time per run
  std::string tactic;  // Conv: the tactic's name
  double flops = 0;    // Conv: 2 * MACs at this batch
  double bytes = 0;    // minimum bytes moved (inputs read once, outputs written once)
  std::string shape;   // Conv: the ONNX convolution as "cin->cout kxk sS HxW" (input size; " gG" appended
                       // for G > 1 groups), the key
                       // bench/peer_torch_forward.py --per-layer prints its PyTorch times under
  bool on_chain = false;  // on the longest chain of steps that run one after the other at this batch
                          // (graph_branches; without it every step): where a forward of short steps
                          // (batch 1) spends its time
};

class CudaEngine {
 public:
  // Throws yolocu::Error: kInvalidArgument (options), kUnsupported (ops, shapes), kCuda (no device,
  // CUDA/cuDNN failures), kOutOfMemory.
  CudaEngine(std::shared_ptr<const Model> model, const CudaEngineOptions& options);
  ~CudaEngine();
  CudaEngine(const CudaEngine&) = delete;
  CudaEngine& operator=(const CudaEngine&) = delete;

  // d_input: device memory, NCHW planar batch x C x H x W (C = the model's, 3), dtype float32 for
  // kFloat32 engines, float16 for kFloat16 engines; 1 <= batch <= max_batch. Enqueues on `stream`
  // (any stream of the engine's device, the legacy default stream included).
  void run(const void* d_input, int batch, cudaStream_t stream);

  // Makes these batch sizes ready to run (1..max_batch each): the tactics of every one not tuned at
  // build derived from the nearest tuned size's, all of them at once on the plan-building pool (one
  // build per distinct layer and size), so that their first run builds nothing. With pad_batches,
  // their anchors. Synchronous host work; no GPU work is enqueued. run() does the same for one size.
  void prepare(const std::vector<int>& batches);
  // The batch size a run of `batch` images executes: `batch`, or its anchor with pad_batches.
  int run_batch(int batch) const;

  int num_outputs() const;
  const void* output(int i) const;        // device pointer, valid until the next run
  DType output_dtype(int i) const;        // always kFloat32
  Shape output_shape(int i, int batch) const;
  std::string output_name(int i) const;
  Shape input_shape(int batch) const;     // {batch, C, H, W}
  DType input_dtype() const;              // kFloat32 or kFloat16 (the precision)

  // Convenience for tests and the CLI: host tensors in (float32; float16 also accepted), copied to
  // the device, run on the engine's own stream, synchronised, outputs copied back as float32.
  std::vector<Tensor> run_host(const std::vector<Tensor>& inputs);

  // Mean device time of each step over `iters` eager runs (events around every step, no graph).
  // Synchronises. Input: whatever the engine's input buffer holds (zeros, or the last run_host).
  // The first step is the input conversion (NCHW -> NHWC or space-to-depth).
  std::vector<LayerTime> profile(int batch, int iters);

  CudaEngineStats stats() const;
  const CudaEngineOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yolocu

#endif  // YOLOCU_WITH_CUDA

// The GPU engine's internals (private: included only by the engine's own files): the engine
// state behind CudaEngine::Impl.
//   engine_build.cpp  the build: plan, arena, steps (steps/), tactics per tuned batch size, derived batch sizes
//   engine_exec.cpp   execution: input conversion, the steps' launches, CUDA graph capture / replay
//   engine_stem.cpp   the direct stem kernel: setup, per-batch choice (checked, timed, cached), run
//   cuda_engine.cpp   the public API (argument checks, host convenience, profile)
// The steps themselves (one class per step kind) are in steps/, planned by gpu_steps.cpp.
#pragma once

#include "yolocu/cuda_engine.hpp"

#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/device_budget.hpp"
#include "engine/cuda/conv_layers.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/device_memory.hpp"
#include "engine/cuda/gpu_steps.hpp"
#include "engine/cuda/planning/step_graph.hpp"
#include "engine/cuda/steps/step.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/stem_conv_kernel.hpp"
#include "engine/cuda/tactics/tactic_cache.hpp"
#include "engine/cuda/tactics/tuner.hpp"
#include "engine/cuda/value_buffers.hpp"
#include "engine/plan.hpp"

namespace yolocu::cuda_engine_internal {

using engine::GpuStep;
using engine::GpuStepKind;
namespace ck = cuda_kernels;

// The engine's state: the plan, the step objects, the convolution layers and their tactics per
// batch size, the device buffers, handles and streams, the stats. Steps see it only through
// SetupContext and LaunchContext (steps/step.hpp).
struct Engine {
  std::shared_ptr<const Model> model;
  CudaEngineOptions options;
  // Declared before every DeviceMem member: they refund it when destroyed.
  detail::DeviceBudget budget{0, "max_device_memory"};
  bool half = true;
  size_t es = 2;
  int in_c = 3, in_h = 0, in_w = 0;
  engine::GpuStepPlan sp;
  std::vector<std::unique_ptr<Step>> steps;  // per sp.steps
  std::vector<ConvInfo> convs;               // the convolution layers (Conv steps hold their index)
  ValueBuffers values;                       // the arena's values and the constants' device copies
  DeviceMem arena, workspace, staging;
  // The first workspace (workspace, workspace_bytes: every tactic's need fits), then the ones
  // plan_workspaces adds for graph branches, as the steps see them.
  std::vector<DeviceMem> extra_workspaces;
  std::vector<Workspace> workspaces;
  static constexpr int kMaxWorkspaces = 4;
  DeviceMem stem_input;  // the space-to-depth stem's input [max_batch, H/2, W/2, kStemChannels]
  int stem_conv = -1;    // index into convs, -1: no space-to-depth stem
  // The direct stem kernel (engine_stem.cpp): the conv it can compute (-1: none), its packed weights
  // and its arguments at max_batch (x, y and n set per run).
  int direct_conv = -1;
  DeviceMem direct_w;
  engine::StemConvArgs direct_args;
  engine::StemConvLaunch direct_launch;
  int input_readers = 0;  // steps reading the network input
  size_t workspace_bytes = 0;
  std::vector<int> tuned;                // tuned batch sizes, ascending
  std::vector<int> anchors;              // pad_batches: the sizes runs execute, ascending (else empty)
  std::unique_ptr<engine::Tuner> tuner;  // kept for the batch sizes derived later
  CudnnHandle cudnn;
  Stream stream;          // run_host / profile
  Stream capture_stream;  // graph capture only (never executes work)
  std::vector<std::unique_ptr<BatchExec>> batches;  // index = batch size
  CudaEngineStats stats;
  // The tactic cache of the build (null: none), kept for the plans of derived batch sizes.
  std::unique_ptr<engine::TacticCache> tactic_cache;
  std::string tactic_cache_path;

  const engine::PlanValue& val(int id) const { return values.val(id); }
  Shape shape_at(int id, int batch) const { return values.shape_at(id, batch); }
  void* ptr(int id) const { return values.ptr(id); }
  DeviceMem alloc(size_t bytes, const char* what) { return device_alloc(bytes, what, &budget); }

  // engine_build.cpp
  void build();
  const ValueInfo& read_input(const Model& m);  // in_c, in_h, in_w; the model's input
  void allocate();
  void record_build_stats(std::chrono::steady_clock::time_point t0);
  void check_batch_scaling(const engine::Plan& big);
  void setup_steps();  // the step objects of sp.steps, set up in order
  void choose_tactics();
  void tune_steps();
  size_t tune_layers(void* ws, size_t ws_bytes, void* y_ref);
  void record_tuning_stats(std::chrono::steady_clock::time_point t0, double cache_io_ms);
  void count_kernels();  // stats.kernels_per_run
  engine::ConvBuffers conv_buffers(const ConvInfo& ci) const {
    return cuda_engine_internal::conv_buffers(ci, values, stem_input.get(), workspace.get(), workspace_bytes);
  }
  BatchExec& batch_exec(int batch);
  // The tactics of every size in `sizes` not ready yet, derived in one derive_many call.
  void prepare_batches(const std::vector<int>& sizes);
  // Host threads that build cuDNN plans at once (prebuild, derived batch sizes): the cores, at most 16.
  static int pool_threads() { return static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency()))); }

  // engine_stem.cpp: setup (per conv, with its OIHW float weights), the per-batch choice, the run.
  void setup_direct_stem(const ConvInfo& ci, int conv, const float* oihw, int k);
  void choose_direct_stem(BatchExec& be, int batch, void* y_ref);
  void run_direct_stem(const void* d_input, int batch, cudaStream_t s);

  // engine_exec.cpp
  // The input conversion, or with be.direct_stem the direct stem kernel (which reads the input).
  void convert_input(const BatchExec& be, const void* d_input, int batch, cudaStream_t s);
  LaunchContext launch_context(const BatchExec& be, int batch) const;
  // Steps [first, last) of the forward (all by default) on stream s.
  void enqueue_steps(BatchExec& be, int batch, cudaStream_t s, size_t first = 0, size_t last = SIZE_MAX);
  // The forward's graphs for this batch size, captured as branches or as one chain.
  void capture(BatchExec& be, int batch, bool branches);
  // options.graph_branches: steps [first, last) captured on cs (capturing) as a graph of their data
  // dependencies (acc and deps of step_accesses, planning/step_graph.hpp), independent branches
  // side by side.
  void capture_branches(BatchExec& be, int batch, const std::vector<engine::StepAccess>& acc,
                        const std::vector<std::vector<int>>& deps, cudaStream_t cs, size_t first, size_t last);
  // What each step reads and writes at this batch size: its values, a tactic's workspace (unless
  // !with_workspaces), the stem's input.
  std::vector<engine::StepAccess> step_accesses(const BatchExec& be, int batch, bool with_workspaces = true) const;
  // graph_branches: be.workspace, the workspace each convolution's tactic uses, where one shared
  // workspace would lengthen the graph's longest chain (engine::workspace_slots); with `grow` (the
  // build) more workspaces may be allocated, up to kMaxWorkspaces within max_device_memory.
  void plan_workspaces(BatchExec& be, int batch, bool grow);
  void run(const void* d_input, int batch, cudaStream_t s);
};

}  // namespace yolocu::cuda_engine_internal

namespace yolocu {

struct CudaEngine::Impl : cuda_engine_internal::Engine {};

}  // namespace yolocu

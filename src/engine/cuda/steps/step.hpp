// GPU steps as objects: one class per engine::GpuStepKind, one file each in steps/ (with the
// kernels only it launches), made by make_step (steps/registry.cpp). A step owns its state
// (weights, tables, kernel parameters), prepares it once at build time (setup) and enqueues its
// kernels per run (launch); it reads and writes the values of its engine::GpuStep. What it sees of
// the engine comes in a context: SetupContext at build time, LaunchContext per launch.
//
// Adding a kind: its file here (the class and its factory) and its line in ../step_kinds.def
// (which makes the enumerator, its name and its registry entry); planning/ then emits it where it
// applies (lowering.cpp for an op, fusion.cpp for a pattern).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/conv_layers.hpp"
#include "engine/cuda/device_memory.hpp"
#include "engine/cuda/gpu_steps.hpp"
#include "engine/cuda/value_buffers.hpp"
#include "yolocu/cuda_engine.hpp"

namespace yolocu::cuda_engine_internal {

// The engine as steps see it while it is built (Step::setup), one step after the other.
struct SetupContext {
  const engine::GpuStepPlan& sp;
  const CudaEngineOptions& options;
  ValueBuffers& values;
  detail::DeviceBudget* budget;  // device memory is charged to it
  CudaEngineStats& stats;
  bool half = true;  // activation dtype fp16 (else fp32)
  size_t es = 2;     // its bytes
  int in_c = 3, in_h = 0, in_w = 0;  // the network input
  int input_readers = 0;             // steps reading the network input
  int step = -1;                     // the index of the step being set up
  // The convolution layers (Conv steps add theirs), the space-to-depth stem's layer (-1: none).
  std::vector<ConvInfo>& convs;
  int& stem_conv;
  // Offers a layer to the direct stem kernel (engine_stem.cpp): (layer, its index, OIHW float
  // weights, output channels).
  std::function<void(const ConvInfo&, int, const float*, int)> setup_direct_stem;

  const engine::PlanValue& val(int id) const { return values.val(id); }
  const engine::PlanNode& node(const engine::GpuStep& st) const { return sp.plan.nodes[static_cast<size_t>(st.node)]; }
  bool multi_batch() const { return options.max_batch > 1; }
  DeviceMem alloc(size_t bytes, const char* what) const { return device_alloc(bytes, what, budget); }
  void upload_const(int id) const { values.upload_const(id, budget, stats); }
  // A device copy of `bytes` host bytes (weights, tables), counted in stats.weight_bytes.
  DeviceMem upload(const void* data, size_t bytes, const char* what) const;
};

// The engine as a step sees it when it launches: the buffers, the batch size, the convolutions'
// tactics at that batch size.
struct LaunchContext {
  const engine::GpuStepPlan& sp;
  const ValueBuffers& values;
  int batch = 1;
  bool half = true;
  size_t es = 2;
  const BatchExec& be;
  cudnnHandle_t cudnn = nullptr;
  const std::vector<ConvInfo>& convs;
  int direct_conv = -1;          // the layer the direct stem kernel may run (-1: none)
  void* stem_input = nullptr;    // the space-to-depth stem's input
  const std::vector<Workspace>* workspaces = nullptr;  // the engine's (the first fits every tactic)

  // The workspace convolution layer `conv`'s tactic uses at this batch size.
  Workspace workspace_of(int conv) const {
    if (workspaces == nullptr || workspaces->empty()) return {};
    const size_t w = conv >= 0 && static_cast<size_t>(conv) < be.workspace.size() ? static_cast<size_t>(be.workspace[conv]) : 0;
    return (*workspaces)[w < workspaces->size() ? w : 0];
  }

  const engine::PlanValue& val(int id) const { return values.val(id); }
  Shape shape_at(int id) const { return values.shape_at(id, batch); }
  void* ptr(int id) const { return values.ptr(id); }
  float* fptr(int id) const { return values.fptr(id); }
  const engine::PlanNode& node(const engine::GpuStep& st) const { return sp.plan.nodes[static_cast<size_t>(st.node)]; }
};

// The engine as a step sees it when the tuned batch sizes are known (Step::tune): the arena's
// buffers (their contents are scratch here), the batch sizes, the engine's stream.
struct TuneContext {
  const engine::GpuStepPlan& sp;
  const ValueBuffers& values;
  const std::vector<int>& tuned;  // ascending
  int max_batch = 1;
  cudaStream_t stream = nullptr;
  detail::DeviceBudget* budget = nullptr;
  CudaEngineStats& stats;
  DeviceMem alloc(size_t bytes, const char* what) const { return device_alloc(bytes, what, budget); }
};

class Step {
 public:
  explicit Step(const engine::GpuStep& st) : st_(st) {}
  virtual ~Step() = default;
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;

  // Build time, once per engine, in step order: uploads, tables, checks (errors name the node).
  virtual void setup(SetupContext& ctx) { (void)ctx; }
  // Build time, after every step's setup: choices made by timing at the tuned batch sizes, for
  // every batch size up to max_batch (kConvInt8: its kernel). Synchronises; never captured.
  virtual void tune(const TuneContext& ctx) { (void)ctx; }
  // Enqueues the step's kernels on s (capturable in a CUDA graph; no synchronisation).
  virtual void launch(const LaunchContext& ctx, cudaStream_t s) const = 0;
  // Kernel launches per run at ctx's batch size (CudaEngineStats::kernels_per_run).
  virtual int kernels(const LaunchContext& ctx) const {
    (void)ctx;
    return 1;
  }
  // The convolution layer a Conv step launches (index into the engine's layers), else -1.
  virtual int conv_layer() const { return -1; }
  // What a step without a layer runs at this batch size where it chose it (profiles); else empty.
  virtual std::string kernel_at(int batch) const {
    (void)batch;
    return {};
  }

  const std::vector<int>& reads() const { return st_.in; }   // value ids (-1: none)
  const std::vector<int>& writes() const { return st_.out; }
  const std::string& name() const { return st_.label; }      // for profiles
  engine::GpuStepKind kind() const { return st_.kind; }
  const engine::GpuStep& step() const { return st_; }

 protected:
  const engine::GpuStep st_;
};

// Row-major strides (in elements) of a dense tensor of shape s.
inline Shape row_major_strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// The step object of a planned step (registry.cpp).
std::unique_ptr<Step> make_step(const engine::GpuStep& st);

}  // namespace yolocu::cuda_engine_internal

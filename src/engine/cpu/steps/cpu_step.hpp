// The CPU engine's steps as objects: one per planned step (cpu_plan.hpp), made by make_cpu_step()
// from a registry keyed by CpuStepKind, each owning its oneDNN primitive and memory objects or its
// precomputed loop bounds. Files by family: conv_step.cpp (oneDNN convolution), dnnl_steps.cpp
// (reorder, logistic), blocked_steps.cpp (MaxPool, Resize, Split on nChw{B}c),
// detect_head_step.cpp, node_step.cpp (the reference ops, node by node).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/cpu/cpu_plan.hpp"
#include "yolocu/engine.hpp"

namespace yolocu::engine::cpu {

class CpuStep {
 public:
  CpuStep() = default;
  CpuStep(const CpuStep&) = delete;  // steps may point into themselves
  CpuStep& operator=(const CpuStep&) = delete;
  virtual ~CpuStep() = default;
  // One execution on the engine's stream (oneDNN primitives are enqueued; the engine waits at the
  // end of the run).
  virtual void run(dnnl::stream& strm) = 0;
  // The profile's row (YOLOCU_PROFILE): the node's op type, "Reorder" or "DetectHead".
  virtual const char* profile_name() const = 0;
};

// What a step is built from: the plan, the arena its values live in, oneDNN's engine and stream
// (weights are reordered at build time), and the stats it adds to (weight bytes).
struct CpuStepBuild {
  const CpuStepPlan& sp;
  uint8_t* arena;
  const dnnl::engine& eng;
  dnnl::stream& strm;
  EngineStats& stats;

  const PlanValue& value(int id) const { return sp.plan.values[static_cast<size_t>(id)]; }
  bool blocked(int id) const { return sp.blocked[static_cast<size_t>(id)] != 0; }
  // The value's buffer in the arena (kInternal if it has none).
  uint8_t* ptr(int id) const;
  float* fptr(int id) const { return reinterpret_cast<float*>(ptr(id)); }
  // A constant's tensor, else a view of its buffer.
  Tensor view(int id) const;
};

// The step object of `spec` (not for kNoop: no work, no object).
std::unique_ptr<CpuStep> make_cpu_step(const CpuStepSpec& spec, const CpuStepBuild& b);

// The registry's entries, one per family file.
std::unique_ptr<CpuStep> make_conv_step(const CpuStepSpec& spec, const CpuStepBuild& b);
std::unique_ptr<CpuStep> make_reorder_step(const CpuStepSpec& spec, const CpuStepBuild& b);
std::unique_ptr<CpuStep> make_eltwise_step(const CpuStepSpec& spec, const CpuStepBuild& b);
std::unique_ptr<CpuStep> make_matmul_step(const CpuStepSpec& spec, const CpuStepBuild& b);
std::unique_ptr<CpuStep> make_softmax_step(const CpuStepSpec& spec, const CpuStepBuild& b);
std::unique_ptr<CpuStep> make_maxpool_blocked_step(const CpuStepSpec& spec, const CpuStepBuild& b);
std::unique_ptr<CpuStep> make_resize_blocked_step(const CpuStepSpec& spec, const CpuStepBuild& b);
std::unique_ptr<CpuStep> make_split_blocked_step(const CpuStepSpec& spec, const CpuStepBuild& b);
std::unique_ptr<CpuStep> make_detect_head_step(const CpuStepSpec& spec, const CpuStepBuild& b);
std::unique_ptr<CpuStep> make_node_step(const CpuStepSpec& spec, const CpuStepBuild& b);

// A step that executes one oneDNN primitive with its arguments (convolution, reorder, logistic).
class PrimitiveStep : public CpuStep {
 public:
  PrimitiveStep(dnnl::primitive prim, std::unordered_map<int, dnnl::memory> args, const char* name)
      : prim_(std::move(prim)), args_(std::move(args)), name_(name) {}
  void run(dnnl::stream& strm) override { prim_.execute(strm, args_); }
  const char* profile_name() const override { return name_; }

 private:
  dnnl::primitive prim_;
  std::unordered_map<int, dnnl::memory> args_;
  const char* name_;
};

}  // namespace yolocu::engine::cpu

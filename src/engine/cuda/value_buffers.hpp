// Where the GPU engine's values live: each runtime value in the activation arena at its root's
// offset (engine::GpuStepPlan), each constant a step reads at run time in its own float32 copy;
// and a value's shape at a batch size (steps are planned at max_batch, dim 0 scales).
#pragma once

#include <map>

#include "engine/cuda/device_memory.hpp"
#include "engine/cuda/gpu_steps.hpp"
#include "yolocu/cuda_engine.hpp"

namespace yolocu::cuda_engine_internal {

class ValueBuffers {
 public:
  // The plan (kept by the caller, which outlives this) and the batch its shapes are at.
  void init(const engine::GpuStepPlan* sp, int max_batch) {
    sp_ = sp;
    max_batch_ = max_batch;
  }
  void set_arena(void* base) { arena_ = base; }

  const engine::PlanValue& val(int id) const { return sp_->plan.values[static_cast<size_t>(id)]; }
  Shape shape_at(int id, int batch) const {
    Shape s = val(id).shape;
    if (!val(id).constant && !s.empty()) s[0] = s[0] / max_batch_ * batch;
    return s;
  }
  void* ptr(int id) const {
    if (val(id).constant) {
      auto it = consts_.find(id);
      YOLOCU_CHECK(it != consts_.end(), kInternal, "constant '", val(id).name, "' not on the device");
      return it->second.get();
    }
    const int64_t off = sp_->offset[static_cast<size_t>(id)];
    YOLOCU_CHECK(off >= 0, kInternal, "value '", val(id).name, "' has no buffer");
    return static_cast<uint8_t*>(arena_) + off;
  }
  float* fptr(int id) const { return static_cast<float*>(ptr(id)); }

  // Copies constant `id` to the device once (no-op for -1, runtime values and constants already
  // there); float32 only. Charged to `budget`, counted in stats.weight_bytes.
  void upload_const(int id, detail::DeviceBudget* budget, CudaEngineStats& stats);

 private:
  const engine::GpuStepPlan* sp_ = nullptr;
  int max_batch_ = 1;
  void* arena_ = nullptr;
  std::map<int, DeviceMem> consts_;  // value id -> float32 device copy
};

}  // namespace yolocu::cuda_engine_internal

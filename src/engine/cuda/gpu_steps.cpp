// Host-side planning of the GPU engine: the entry point, running the passes of planning/ in order.
#include "engine/cuda/gpu_steps.hpp"

#include <utility>

#include "core/check.hpp"
#include "engine/cuda/planning/passes.hpp"

namespace yolocu::engine {

const char* gpu_step_kind_name(GpuStepKind k) noexcept {
  switch (k) {
#define YOLOCU_GPU_STEP(kind, name, factory) \
  case GpuStepKind::kind:                    \
    return name;
#include "engine/cuda/step_kinds.def"
#undef YOLOCU_GPU_STEP
  }
  return "?";
}

size_t value_bytes(const GpuStepPlan& sp, int value, size_t act_elem_size) {
  const auto& v = sp.plan.values[static_cast<size_t>(value)];
  const Layout layout = sp.layout[static_cast<size_t>(value)];
  const bool nhwc = layout == Layout::kNhwc || layout == Layout::kNhwcInt8;
  const size_t es = layout == Layout::kNhwcInt8 ? 1 : nhwc ? act_elem_size : sizeof(float);
  size_t n = static_cast<size_t>(shape_numel(v.shape));
  const int64_t pitch = static_cast<size_t>(value) < sp.channel_pitch.size() ? sp.channel_pitch[static_cast<size_t>(value)] : 0;
  if (nhwc && pitch > 0 && v.shape.size() == 4 && v.shape[1] > 0 && pitch != v.shape[1])
    n = n / static_cast<size_t>(v.shape[1]) * static_cast<size_t>(pitch);
  return n * es;
}

int64_t view_pitch(const GpuStepPlan& sp, int value) {
  if (value < 0 || sp.channel_offset[static_cast<size_t>(value)] < 0) return 0;
  return sp.channel_pitch[static_cast<size_t>(value)];
}

bool written_in_place(const GpuStepPlan& sp, int value, int concat_out) {
  return sp.channel_offset[static_cast<size_t>(value)] >= 0 && sp.root[static_cast<size_t>(value)] == concat_out;
}

GpuStepPlan plan_gpu_steps(Plan plan_in, const GpuStepOptions& options) {
  GpuStepPlan sp;
  sp.plan = std::move(plan_in);
  const Plan& plan = sp.plan;
  for (const auto& v : plan.values)
    if (!v.constant)
      YOLOCU_CHECK(v.dtype == DType::kFloat32, kUnsupported, "GPU engine: value '", v.name, "' has type ",
                   dtype_name(v.dtype), " at run time (only float tensors are supported)",
                   v.dtype == DType::kInt8 || v.dtype == DType::kUInt8
                       ? "; a quantised (QDQ) model runs on the CPU engine as its graph says (device cpu, or auto)"
                       : "");
  sp.layout.assign(plan.values.size(), Layout::kNone);
  for (int id : plan.inputs) {
    const PlanValue& v = plan.values[static_cast<size_t>(id)];
    YOLOCU_CHECK(v.shape.size() == 4, kUnsupported, "GPU engine: input '", v.name, "' must be rank 4 (N, C, H, W), got ",
                 shape_str(v.shape));
    sp.layout[static_cast<size_t>(id)] = Layout::kNhwc;
  }
  planning::Fusions fusions = planning::find_fusions(sp, options);
  planning::lower_nodes(sp, fusions, options);
  planning::plan_channel_pitches(sp, options);
  planning::plan_buffer_roots(sp, options);
  if (options.int8 != nullptr) planning::plan_int8(sp, options);
  planning::plan_arena(sp, options);
  return sp;
}

}  // namespace yolocu::engine

// The step registry: the factory of every engine::GpuStepKind (step_kinds.def), each defined in its
// own file here; and SetupContext's upload, which the steps share.
#include <iterator>
#include <memory>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {

using engine::GpuStep;
using engine::GpuStepKind;
using StepFactory = std::unique_ptr<Step> (*)(const GpuStep&);

// Each kind's factory, defined in its own file (step_kinds.def lists them).
#define YOLOCU_GPU_STEP(kind, name, factory) std::unique_ptr<Step> factory(const GpuStep&);
#include "engine/cuda/step_kinds.def"
#undef YOLOCU_GPU_STEP

namespace {

struct Entry {
  GpuStepKind kind;
  StepFactory make;
};

constexpr Entry kRegistry[] = {
#define YOLOCU_GPU_STEP(kind, name, factory) {GpuStepKind::kind, factory},
#include "engine/cuda/step_kinds.def"
#undef YOLOCU_GPU_STEP
};

}  // namespace

DeviceMem SetupContext::upload(const void* data, size_t bytes, const char* what) const {
  DeviceMem m = alloc(bytes, what);
  YOLOCU_CUDA_CHECK(cudaMemcpy(m.get(), data, bytes, cudaMemcpyHostToDevice));
  stats.weight_bytes += bytes;
  return m;
}

std::unique_ptr<Step> make_step(const GpuStep& st) {
  for (const Entry& e : kRegistry)
    if (e.kind == st.kind) return e.make(st);
  detail::fail(ErrorCode::kInternal, "GPU engine: no step implementation for kind ", engine::gpu_step_kind_name(st.kind),
               " (", st.label, ")");
}

}  // namespace yolocu::cuda_engine_internal

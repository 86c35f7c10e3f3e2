// make_cpu_step(): the registry of step kinds, and the arena accessors every step uses.
#include <array>
#include <utility>

#include "core/check.hpp"
#include "engine/cpu/steps/cpu_step.hpp"

namespace yolocu::engine::cpu {

uint8_t* CpuStepBuild::ptr(int id) const {
  YOLOCU_CHECK(sp.offset[static_cast<size_t>(id)] >= 0, kInternal, "value '", value(id).name, "' has no buffer");
  return arena + sp.offset[static_cast<size_t>(id)];
}

Tensor CpuStepBuild::view(int id) const {
  const PlanValue& v = value(id);
  if (v.constant) return v.value;
  return Tensor::view(v.dtype, v.shape, ptr(id));
}

namespace {

using Factory = std::unique_ptr<CpuStep> (*)(const CpuStepSpec&, const CpuStepBuild&);

constexpr std::array<std::pair<CpuStepKind, Factory>, 10> kRegistry = {{
    {CpuStepKind::kNode, make_node_step},
    {CpuStepKind::kConv, make_conv_step},
    {CpuStepKind::kReorder, make_reorder_step},
    {CpuStepKind::kMaxPoolBlocked, make_maxpool_blocked_step},
    {CpuStepKind::kResizeBlocked, make_resize_blocked_step},
    {CpuStepKind::kSplitBlocked, make_split_blocked_step},
    {CpuStepKind::kEltwise, make_eltwise_step},
    {CpuStepKind::kMatMul, make_matmul_step},
    {CpuStepKind::kSoftmax, make_softmax_step},
    {CpuStepKind::kDetectHead, make_detect_head_step},
}};

}  // namespace

std::unique_ptr<CpuStep> make_cpu_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  for (const auto& [kind, make] : kRegistry)
    if (kind == spec.kind) return make(spec, b);
  detail::fail(ErrorCode::kInternal, "CpuEngine: no step object for kind ", cpu_step_kind_name(spec.kind));
}

}  // namespace yolocu::engine::cpu

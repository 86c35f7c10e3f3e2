// The generic step: a node's reference op (engine/ops.hpp) on plain tensors viewing the arena.
#include "engine/cpu/steps/cpu_step.hpp"

namespace yolocu::engine::cpu {
namespace {

class NodeStep : public CpuStep {
 public:
  NodeStep(const CpuStepSpec& spec, const CpuStepBuild& b)
      : node_(b.sp.plan.nodes[static_cast<size_t>(spec.node)]), opset_(b.sp.plan.opset) {
    for (int id : spec.in) in_views_.push_back(id >= 0 ? b.view(id) : Tensor());
    for (int id : spec.out) out_views_.push_back(id >= 0 ? b.view(id) : Tensor());
    for (size_t k = 0; k < in_views_.size(); ++k) in_ptrs_.push_back(spec.in[k] >= 0 ? &in_views_[k] : nullptr);
    for (size_t k = 0; k < out_views_.size(); ++k) out_ptrs_.push_back(spec.out[k] >= 0 ? &out_views_[k] : nullptr);
  }

  void run(dnnl::stream&) override { node_.op->compute(node_.node, opset_, in_ptrs_, out_ptrs_); }
  const char* profile_name() const override { return node_.node.op_type.c_str(); }

 private:
  const PlanNode& node_;
  int64_t opset_;
  std::vector<Tensor> in_views_, out_views_;  // in_ptrs_ / out_ptrs_ point into these
  std::vector<const Tensor*> in_ptrs_;
  std::vector<Tensor*> out_ptrs_;
};

}  // namespace

std::unique_ptr<CpuStep> make_node_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  return std::make_unique<NodeStep>(spec, b);
}

}  // namespace yolocu::engine::cpu

// conv_sites (conv_sites.hpp): the CPU plan's convolution steps, their tensors and weight scales.
#include "engine/quant/conv_sites.hpp"

#include <set>

#include "core/check.hpp"
#include "engine/cpu/cpu_layout.hpp"
#include "engine/cpu/cpu_plan.hpp"
#include "engine/plan.hpp"
#include "engine/quant/int8_conv_ref.hpp"

namespace yolocu::engine::quant {
namespace {

using engine::Plan;

// From the raw output of conv node `conv`: a graph output reached through nodes other than Conv.
bool reaches_output(const Plan& plan, int conv) {
  std::vector<int> stack = plan.nodes[static_cast<size_t>(conv)].out;
  std::set<int> seen;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v < 0 || !seen.insert(v).second) continue;
    const engine::PlanValue& pv = plan.values[static_cast<size_t>(v)];
    if (pv.graph_output) return true;
    for (int n : pv.consumers)
      if (plan.nodes[static_cast<size_t>(n)].node.op_type != "Conv")
        for (int o : plan.nodes[static_cast<size_t>(n)].out) stack.push_back(o);
  }
  return false;
}

}  // namespace

std::vector<ConvSite> conv_sites(const Model& model, int width, int height) {
  engine::cpu::CpuStepOptions so;
  so.block = engine::cpu::block_size();
  so.fuse_detect_head = false;
  const engine::cpu::CpuStepPlan sp = engine::cpu::plan_cpu_steps(engine::build_plan(model, {{1, 3, height, width}}), so);
  const Plan& plan = sp.plan;
  std::vector<ConvSite> sites;
  for (const engine::cpu::CpuStepSpec& s : sp.steps) {
    if (s.kind != engine::cpu::CpuStepKind::kConv) continue;
    const engine::PlanNode& pn = plan.nodes[static_cast<size_t>(s.node)];
    const engine::PlanValue& w = plan.values[static_cast<size_t>(pn.in[1])];
    ConvSite site;
    site.scales.node = pn.node.name;
    site.scales.weight = w.name;
    site.scales.input = plan.values[static_cast<size_t>(pn.in[0])].name;
    site.scales.output = plan.values[static_cast<size_t>(s.out[0])].name;
    YOLOCU_CHECK(w.value.dtype() == DType::kFloat32 && !w.shape.empty(), kUnsupported, pn.node.describe(),
                 ": INT8 calibration needs float32 weights");
    site.scales.weight_scales = engine::quant::weight_scales(w.value.data_as<float>(), w.shape[0], w.value.numel() / w.shape[0]);
    site.stem = plan.values[static_cast<size_t>(pn.in[0])].graph_input;
    site.head = reaches_output(plan, s.node);
    sites.push_back(std::move(site));
  }
  YOLOCU_CHECK(!sites.empty(), kUnsupported, "INT8 calibration: the model has no convolutions");
  return sites;
}

}  // namespace yolocu::engine::quant

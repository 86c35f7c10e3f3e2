// plan_int8_regions (int8_regions.hpp): the INT8 convolution steps from the calibration, then the
// forms (float, int8 at a scale) each value's readers need, carried back through the ops that
// commute with quantisation, then where each form is made.
#include "engine/quant/int8_regions.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "core/check.hpp"

namespace yolocu::engine {
namespace {

// The data inputs of a node (Resize's scales and sizes, Split's sizes are parameters).
std::vector<int> data_inputs(const PlanNode& n) {
  const std::string& op = n.node.op_type;
  if (op == "Concat") return n.in;
  return {n.in.empty() ? -1 : n.in[0]};
}

// MaxPool, nearest Resize / Upsample, Concat and Split over runtime values: int8 in, int8 out with
// the same scale, exactly.
bool commutes_with_quantisation(const Plan& plan, const PlanNode& n) {
  const std::string& op = n.node.op_type;
  bool known = op == "Concat" || op == "Split";
  if (op == "MaxPool") known = n.out.size() < 2 || n.out[1] < 0;  // no Indices output
  if (op == "Resize" || op == "Upsample")
    known = n.node.attr_string("mode", "nearest") == "nearest";
  if (!known) return false;
  for (int v : data_inputs(n))
    if (v < 0 || plan.values[static_cast<size_t>(v)].constant) return false;
  return true;
}

// Why the kernels cannot run convolution `c` (empty: they can).
std::string kernel_refusal(const Plan& plan, int c, const Int8KernelLimits& limits) {
  const PlanNode& n = plan.nodes[static_cast<size_t>(c)];
  if (n.node.attr_int("group", 1) != 1) return "a grouped convolution";
  if (n.in.size() < 2 || n.in[1] < 0 || !plan.values[static_cast<size_t>(n.in[1])].constant)
    return "weights that are not constant";
  const Shape& w = plan.values[static_cast<size_t>(n.in[1])].shape;  // [K, C, R, S]
  if (w.size() != 4) return "not a 2-D convolution";
  if (w[1] % limits.input_channel_multiple != 0)
    return std::to_string(w[1]) + " input channels (the kernels take multiples of " +
           std::to_string(limits.input_channel_multiple) + ")";
  if (w[0] % limits.output_channel_multiple != 0)
    return std::to_string(w[0]) + " output channels (the kernels take multiples of " +
           std::to_string(limits.output_channel_multiple) + ")";
  return limits.refuse ? limits.refuse(c) : std::string();
}

struct Lookup {
  std::map<std::string, int> value, node;
  Lookup(const Plan& plan) {
    for (size_t i = 0; i < plan.values.size(); ++i)
      value[plan.values[i].name] = static_cast<int>(i);
    for (size_t i = 0; i < plan.nodes.size(); ++i)
      node[plan.nodes[i].node.name] = static_cast<int>(i);
  }
  int value_of(const std::string& name, const std::string& conv) const {
    auto it = value.find(name);
    YOLOCU_CHECK(it != value.end(), kInvalidArgument, "INT8 calibration: tensor '", name,
                 "' of convolution '", conv,
                 "' is not in the model's plan (a calibration of another model?)");
    return it->second;
  }
};

// The INT8 step of convolution `c` as the calibration describes it: its SiLU and residual Add as
// the plan has them, its output checked against the calibration's.
Int8ConvStep make_step(const Plan& plan, const Lookup& look, int c, const Int8ConvScales& k,
                       const Int8Calibration& cal, std::vector<int>* nodes) {
  nodes->assign(1, c);
  Int8ConvStep s;
  s.node = c;
  s.input = plan.nodes[static_cast<size_t>(c)].in[0];
  YOLOCU_CHECK(s.input == look.value_of(k.input, k.node), kInvalidArgument,
               "INT8 calibration: convolution '", k.node, "' reads '",
               plan.values[static_cast<size_t>(s.input)].name, "', not '", k.input, "'");
  const Int8TensorScale* in = cal.tensor(k.input);
  YOLOCU_CHECK(in != nullptr, kInvalidArgument, "INT8 calibration: no scale for '", k.input, "'");
  s.input_scale = in->scale;
  int y = plan.nodes[static_cast<size_t>(c)].out[0], sig = -1, mul = -1;
  if (is_silu_pair(plan, c, &sig, &mul)) {
    y = plan.nodes[static_cast<size_t>(mul)].out[0];
    nodes->insert(nodes->end(), {sig, mul});
  }
  s.output = y;
  const int want = look.value_of(k.output, k.node);
  int x = -1;
  const int add = want == y ? -1 : residual_add(plan, c, y, &x, /*ready_before=*/false);
  if (add >= 0) {
    nodes->push_back(add);
    s.residual = x;
    s.output = plan.nodes[static_cast<size_t>(add)].out[0];
  }
  YOLOCU_CHECK(s.output == want, kInvalidArgument, "INT8 calibration: convolution '", k.node,
               "' writes '", plan.values[static_cast<size_t>(s.output)].name, "' in the plan, '",
               k.output, "' in the calibration");
  return s;
}

}  // namespace

int Int8Regions::int8_values() const {
  return static_cast<int>(std::count_if(values.begin(), values.end(),
                                        [](const Int8Value& v) { return !v.int8_scales.empty(); }));
}
int Int8Regions::int8_copies() const {
  int n = 0;
  for (const Int8Value& v : values) n += static_cast<int>(v.int8_scales.size());
  return n;
}

Int8Regions plan_int8_regions(const Plan& plan, const Int8Calibration& cal,
                              const Int8KernelLimits& limits) {
  const Lookup look(plan);
  Int8Regions r;
  const size_t nv = plan.values.size();
  r.values.assign(nv, {});
  // 1. The convolutions: INT8 steps, or float with the reason; the nodes each step replaces.
  std::vector<std::pair<int, const Int8ConvScales*>> convs;
  for (const Int8ConvScales& k : cal.convs) {
    auto it = look.node.find(k.node);
    YOLOCU_CHECK(it != look.node.end(), kInvalidArgument, "INT8 calibration: convolution '", k.node,
                 "' is not in the model's plan (a calibration of another model?)");
    convs.emplace_back(it->second, &k);
  }
  std::sort(convs.begin(), convs.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<char> in_step(plan.nodes.size(), 0);  // a node an INT8 step replaces
  std::vector<char> step_output(nv, 0);             // a value an INT8 step writes
  for (const auto& [c, k] : convs) {
    std::string why =
        k->keep_float ? "kept in float by the calibration" : kernel_refusal(plan, c, limits);
    if (!why.empty()) {
      r.float_convs.push_back({c, why});
      continue;
    }
    std::vector<int> nodes;
    const Int8ConvStep s = make_step(plan, look, c, *k, cal, &nodes);
    step_output[static_cast<size_t>(s.output)] = 1;
    r.convs.push_back(s);
    for (int n : nodes) in_step[static_cast<size_t>(n)] = 1;
  }
  // the nodes that commute with quantisation, outside the steps
  std::vector<char> commuting(plan.nodes.size(), 0);
  for (size_t n = 0; n < plan.nodes.size(); ++n)
    commuting[n] = limits.commuting_ops && !in_step[n] && commutes_with_quantisation(plan, plan.nodes[n]) &&
                   (!limits.commutes || limits.commutes(static_cast<int>(n), step_output));
  // 2. The forms each value's readers need, carried back through the ops that commute with
  // quantisation to the values they read.
  std::vector<std::set<float>> int8(nv);
  std::vector<char> fp(nv, 0);
  std::function<void(int, bool, float)> need = [&](int v, bool as_int8, float scale) {
    const size_t i = static_cast<size_t>(v);
    if (as_int8 ? !int8[i].insert(scale).second : fp[i] != 0) return;
    if (!as_int8) fp[i] = 1;
    const int p = plan.values[i].producer;
    if (p >= 0 && commuting[static_cast<size_t>(p)])
      for (int u : data_inputs(plan.nodes[static_cast<size_t>(p)])) need(u, as_int8, scale);
  };
  for (const Int8ConvStep& s : r.convs) need(s.input, true, s.input_scale);
  for (size_t n = 0; n < plan.nodes.size(); ++n) {
    if (in_step[n] || commuting[n]) continue;
    for (int v : plan.nodes[n].in)
      if (v >= 0 && !plan.values[static_cast<size_t>(v)].constant) need(v, false, 0.f);
  }
  for (int v : plan.outputs) need(v, false, 0.f);
  for (Int8ConvStep& s : r.convs) {  // a residual reads a form its value has anyway
    if (s.residual < 0) continue;
    s.residual_int8 = limits.int8_residuals && !int8[static_cast<size_t>(s.residual)].empty();
    if (!s.residual_int8) need(s.residual, false, 0.f);
  }
  // 3. Where each form comes from: an INT8 step writes its output's forms, a commuting op runs
  // per form, any other producer writes the float and its int8 copies are quantised from it.
  for (size_t v = 0; v < nv; ++v) {
    const PlanValue& pv = plan.values[v];
    if (pv.constant) continue;
    const int p = pv.producer;
    const bool from_step = step_output[v] != 0;
    if (p >= 0 && in_step[static_cast<size_t>(p)] && !from_step) continue;  // inside a step
    const bool from_float = !from_step && !(p >= 0 && commuting[static_cast<size_t>(p)]);
    r.values[v].fp16 = fp[v] != 0 || from_float;
    r.values[v].int8_scales.assign(int8[v].begin(), int8[v].end());
    if (from_float)
      for (float s : int8[v]) r.quantize.push_back({static_cast<int>(v), s});
  }
  return r;
}

}  // namespace yolocu::engine

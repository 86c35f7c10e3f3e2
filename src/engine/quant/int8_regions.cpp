// plan_int8_regions (int8_regions.hpp): the INT8 convolution steps from the calibration, the scales
// their inputs need carried back through MaxPool / nearest Resize / Concat / Split, then the values held in
// int8 as the largest set whose producers and readers all handle int8 at one scale (a value that
// breaks a rule leaves the set, which can break its neighbours' rules: repeated until none does).
#include "engine/quant/int8_regions.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "core/check.hpp"

namespace yolocu::engine {
namespace {

// MaxPool, nearest Resize / Upsample, Concat and Split: int8 in, int8 out with the same scale,
// exactly.
bool commutes_with_quantisation(const PlanNode& n) {
  const std::string& op = n.node.op_type;
  if (op == "Concat" || op == "Split") return true;
  if (op == "MaxPool") return n.out.size() < 2 || n.out[1] < 0;  // no Indices output
  if (op == "Resize" || op == "Upsample") return n.node.attr_string("mode", "nearest") == "nearest";
  return false;
}

std::vector<int> runtime_inputs(const Plan& plan, const PlanNode& n) {
  std::vector<int> in;
  for (int v : n.in)
    if (v >= 0 && !plan.values[static_cast<size_t>(v)].constant) in.push_back(v);
  return in;
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
  return {};
}

struct Lookup {
  std::map<std::string, int> value, node;
  Lookup(const Plan& plan) {
    for (size_t i = 0; i < plan.values.size(); ++i) value[plan.values[i].name] = static_cast<int>(i);
    for (size_t i = 0; i < plan.nodes.size(); ++i) node[plan.nodes[i].node.name] = static_cast<int>(i);
  }
  int value_of(const std::string& name, const std::string& conv) const {
    auto it = value.find(name);
    YOLOCU_CHECK(it != value.end(), kInvalidArgument, "INT8 calibration: tensor '", name, "' of convolution '", conv,
                 "' is not in the model's plan (a calibration of another model?)");
    return it->second;
  }
};

// The INT8 step of convolution `c` as the calibration describes it: its SiLU and residual Add as
// the plan has them, its output checked against the calibration's.
Int8ConvStep make_step(const Plan& plan, const Lookup& look, int c, const Int8ConvScales& k,
                       const Int8Calibration& cal) {
  Int8ConvStep s;
  s.node = c;
  s.input = plan.nodes[static_cast<size_t>(c)].in[0];
  YOLOCU_CHECK(s.input == look.value_of(k.input, k.node), kInvalidArgument, "INT8 calibration: convolution '",
               k.node, "' reads '", plan.values[static_cast<size_t>(s.input)].name, "', not '", k.input, "'");
  const Int8TensorScale* in = cal.tensor(k.input);
  YOLOCU_CHECK(in != nullptr, kInvalidArgument, "INT8 calibration: no scale for '", k.input, "'");
  s.input_scale = in->scale;
  int y = plan.nodes[static_cast<size_t>(c)].out[0], sig = -1, mul = -1;
  if (is_silu_pair(plan, c, &sig, &mul)) y = plan.nodes[static_cast<size_t>(mul)].out[0];
  s.output = y;
  const int want = look.value_of(k.output, k.node);
  int x = -1;
  const int add = want == y ? -1 : residual_add(plan, c, y, &x, /*ready_before=*/false);
  if (add >= 0) {
    s.residual = x;
    s.output = plan.nodes[static_cast<size_t>(add)].out[0];
  }
  YOLOCU_CHECK(s.output == want, kInvalidArgument, "INT8 calibration: convolution '", k.node, "' writes '",
               plan.values[static_cast<size_t>(s.output)].name, "' in the plan, '", k.output, "' in the calibration");
  return s;
}

}  // namespace

int Int8Regions::int8_values() const {
  return static_cast<int>(std::count_if(values.begin(), values.end(), [](const Int8Value& v) { return v.int8; }));
}

Int8Regions plan_int8_regions(const Plan& plan, const Int8Calibration& cal, const Int8KernelLimits& limits) {
  const Lookup look(plan);
  Int8Regions r;
  const size_t nv = plan.values.size();
  r.values.assign(nv, {});
  // 1. The convolutions: INT8 steps, or float with the reason.
  std::vector<std::pair<int, const Int8ConvScales*>> convs;
  for (const Int8ConvScales& k : cal.convs) {
    auto it = look.node.find(k.node);
    YOLOCU_CHECK(it != look.node.end(), kInvalidArgument, "INT8 calibration: convolution '", k.node,
                 "' is not in the model's plan (a calibration of another model?)");
    convs.emplace_back(it->second, &k);
  }
  std::sort(convs.begin(), convs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::map<int, int> step_of_conv, step_of_add, step_of_output;  // node / value -> index into r.convs
  for (const auto& [c, k] : convs) {
    std::string why = k->keep_float ? "kept in float by the calibration" : kernel_refusal(plan, c, limits);
    if (!why.empty()) {
      r.float_convs.push_back({c, why});
      continue;
    }
    const Int8ConvStep s = make_step(plan, look, c, *k, cal);
    const int i = static_cast<int>(r.convs.size());
    step_of_conv[c] = i;
    step_of_output[s.output] = i;
    if (s.residual >= 0) step_of_add[plan.values[static_cast<size_t>(s.output)].producer] = i;
    r.convs.push_back(s);
  }
  // 2. The scales each value is read with: the INT8 inputs', carried back through the ops that
  // commute with quantisation (a Concat's inputs must hold its scale to be copied as they are).
  std::vector<std::set<float>> scales(nv);
  std::vector<std::pair<int, float>> todo;
  for (const Int8ConvStep& s : r.convs) todo.emplace_back(s.input, s.input_scale);
  while (!todo.empty()) {
    const auto [v, scale] = todo.back();
    todo.pop_back();
    if (!scales[static_cast<size_t>(v)].insert(scale).second) continue;
    const int p = plan.values[static_cast<size_t>(v)].producer;
    if (p >= 0 && commutes_with_quantisation(plan.nodes[static_cast<size_t>(p)]))
      for (int u : runtime_inputs(plan, plan.nodes[static_cast<size_t>(p)])) todo.emplace_back(u, scale);
  }
  std::vector<char> held(nv, 0);
  std::vector<float> scale_of(nv, 0.f);
  for (size_t v = 0; v < nv; ++v)
    if (scales[v].size() == 1) held[v] = 1, scale_of[v] = *scales[v].begin();
  // 3. The largest set of values whose producer and readers all handle int8 at its scale.
  auto same = [&](int u, int v) { return held[static_cast<size_t>(u)] && scale_of[static_cast<size_t>(u)] == scale_of[static_cast<size_t>(v)]; };
  auto producer_ok = [&](int v) {
    if (step_of_output.count(v)) return true;
    const int p = plan.values[static_cast<size_t>(v)].producer;
    if (p < 0 || !commutes_with_quantisation(plan.nodes[static_cast<size_t>(p)])) return false;
    for (int u : runtime_inputs(plan, plan.nodes[static_cast<size_t>(p)]))
      if (!same(u, v)) return false;
    return true;
  };
  auto reader_ok = [&](int v, int c) {
    if (auto it = step_of_conv.find(c); it != step_of_conv.end() && r.convs[static_cast<size_t>(it->second)].input == v)
      return true;
    if (auto it = step_of_add.find(c); it != step_of_add.end() && r.convs[static_cast<size_t>(it->second)].residual == v)
      return true;
    const PlanNode& n = plan.nodes[static_cast<size_t>(c)];
    if (!commutes_with_quantisation(n)) return false;
    for (int w : n.out)  // a Split's every part
      if (w >= 0 && !same(w, v)) return false;
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t v = 0; v < nv; ++v) {
      if (!held[v]) continue;
      const PlanValue& pv = plan.values[v];
      bool ok = !pv.graph_output && producer_ok(static_cast<int>(v));
      for (int c : pv.consumers) ok = ok && reader_ok(static_cast<int>(v), c);
      if (!ok) held[v] = 0, changed = true;
    }
  }
  for (size_t v = 0; v < nv; ++v)
    if (held[v]) r.values[v] = {true, scale_of[v]};
  // 4. What the steps write, and the float values quantised for them.
  std::set<std::pair<int, float>> quantize;
  for (Int8ConvStep& s : r.convs) {
    s.int8_output = held[static_cast<size_t>(s.output)] != 0;
    if (!held[static_cast<size_t>(s.input)]) quantize.emplace(s.input, s.input_scale);
  }
  for (const auto& [v, scale] : quantize) r.quantize.push_back({v, scale});
  return r;
}

}  // namespace yolocu::engine

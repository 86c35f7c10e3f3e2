// INT8 lowering of a GPU step plan (planning/passes.hpp, plan_int8): engine::plan_int8_regions
// chooses the INT8 convolutions and the forms each value is held in, with what the GPU plan can do
// today (a Concat runs on int8 values where INT8 steps write every input in place; MaxPool, Resize,
// Split and other Concats read and write fp16); then
//   - each int8 copy becomes a value of its own (Layout::kNhwcInt8, packed, its own buffer, or its
//     slice of an int8 Concat's copy);
//   - each INT8 convolution's kConv step becomes a kConvInt8 step reading the int8 copy of its
//     input (and of its residual where there is one) and writing its output's forms, at most two
//     (the kernels' outputs); a third form is quantised from the fp16 value;
//   - every other int8 copy gets a kQuantize step from the fp16 value, placed just before its first
//     reader (the value is complete there: that reader read it before).
#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "core/check.hpp"
#include "engine/cuda/planning/passes.hpp"

namespace yolocu::engine::planning {
namespace {

// Why the GPU plan cannot run convolution `node` (its step `s`) on the INT8 kernels; empty: it can.
std::string gpu_refusal(const GpuStepPlan& sp, const Int8Calibration& cal, int node, const GpuStep* s) {
  const Plan& plan = sp.plan;
  if (s == nullptr) return "not a convolution step of the GPU plan";
  const PlanNode& pn = plan.nodes[static_cast<size_t>(node)];
  if (s->in[0] != pn.in[0]) return "its input is reordered on the GPU";
  if (s->in[0] == plan.inputs[0]) return "it reads the network input";
  const Int8ConvScales* k = cal.conv(pn.node.name);
  const std::string& writes = plan.values[static_cast<size_t>(s->out[0])].name;
  if (k == nullptr || k->output != writes)
    return "the GPU plan fuses it differently (its step writes '" + writes + "')";
  if (s->residual >= 0 && view_pitch(sp, s->residual) > 0)
    return "its residual is a channel view (the INT8 kernels read a packed residual)";
  const size_t y = static_cast<size_t>(s->out[0]);
  if (sp.root[y] != static_cast<int>(y) && sp.channel_offset[y] < 0) return "its output aliases another value";
  if (sp.channel_offset[y] < 0 && sp.channel_pitch[y] != plan.values[y].shape[1])
    return "its output's channels are padded";
  return {};
}

// Whether the GPU plan can run Concat node `node` on int8 values: a channel Concat whose every input
// an INT8 step writes (step_output), is read by the Concat alone and lies in its slice of the
// Concat's buffer already (copy-free Concat, 16 channels aligned): each int8 copy of the output is
// then made by those steps writing their int8 copies into its slices, with no step of its own.
bool concat_runs_on_int8(const GpuStepPlan& sp, int node, const std::vector<char>& step_output) {
  const Plan& plan = sp.plan;
  const PlanNode& pn = plan.nodes[static_cast<size_t>(node)];
  if (pn.node.op_type != "Concat" || pn.out.empty() || pn.out[0] < 0) return false;
  const bool has_step = std::any_of(sp.steps.begin(), sp.steps.end(), [&](const GpuStep& st) {
    return st.kind == GpuStepKind::kConcatNhwc && st.node == node;
  });
  const size_t y = static_cast<size_t>(pn.out[0]);
  if (!has_step || sp.root[y] != static_cast<int>(y) || sp.channel_offset[y] >= 0 ||
      sp.channel_pitch[y] != plan.values[y].shape[1])
    return false;
  for (int id : pn.in) {
    const size_t v = static_cast<size_t>(id);
    if (id < 0 || !written_in_place(sp, id, static_cast<int>(y)) || step_output[v] == 0 ||
        plan.values[v].consumers.size() != 1 || sp.channel_offset[v] % 16 != 0)
      return false;
  }
  return true;
}

class Int8Lowering {
 public:
  Int8Lowering(GpuStepPlan& sp, const Int8Calibration& cal, bool int8_residuals)
      : sp_(sp), cal_(cal), int8_residuals_(int8_residuals) {}

  void run() {
    index_conv_steps();
    Int8KernelLimits limits;
    limits.commutes = [this](int node, const std::vector<char>& step_output) {
      const bool yes = concat_runs_on_int8(sp_, node, step_output);
      if (yes) int8_concats_.push_back(node);
      return yes;
    };
    limits.int8_residuals = int8_residuals_;
    limits.refuse = [this](int node) {
      auto it = conv_step_.find(node);
      return gpu_refusal(sp_, cal_, node, it == conv_step_.end() ? nullptr : &sp_.steps[static_cast<size_t>(it->second)]);
    };
    regions_ = plan_int8_regions(sp_.plan, cal_, limits);
    sp_.int8_float_convs = regions_.float_convs;
    const size_t nv = regions_.values.size();  // the values before the copies are added
    for (size_t v = 0; v < nv; ++v) {
      const std::vector<float>& scales = regions_.values[v].int8_scales;
      for (size_t i = 0; i < scales.size(); ++i) add_copy(static_cast<int>(v), scales[i], i);
    }
    for (int node : int8_concats_) place_concat_copies(node);
    index_conv_steps();  // (steps may have gone)
    for (const Int8ConvStep& c : regions_.convs) lower_conv(c);
    for (const Int8Quantize& q : regions_.quantize) quantize_.push_back({q.value, q.scale});
    place_quantize_steps();
  }

 private:
  void index_conv_steps() {
    conv_step_.clear();
    for (size_t i = 0; i < sp_.steps.size(); ++i)
      if (sp_.steps[i].kind == GpuStepKind::kConv) conv_step_[sp_.steps[i].node] = static_cast<int>(i);
  }

  // The int8 copy of `value` at `scale`, its n-th: a value of its own (packed NHWC int8).
  void add_copy(int value, float scale, size_t n) {
    Plan& plan = sp_.plan;
    PlanValue pv = plan.values[static_cast<size_t>(value)];
    pv.name += ":int8" + (n > 0 ? ":" + std::to_string(n) : std::string());
    pv.dtype = DType::kInt8;
    pv.graph_output = pv.graph_input = false;
    pv.consumers.clear();
    pv.producer = -1;
    const int64_t channels = pv.shape.size() == 4 ? pv.shape[1] : 0;
    plan.values.push_back(std::move(pv));
    const int id = static_cast<int>(plan.values.size()) - 1;
    sp_.layout.push_back(Layout::kNhwcInt8);
    sp_.root.push_back(id);
    sp_.channel_offset.push_back(-1);
    sp_.channel_pitch.push_back(channels);
    copies_[{value, scale}] = id;
  }

  // A Concat running on int8 values: each int8 copy of an input lies in its slice of the output's
  // copy at the same scale; without an fp16 form of the output, its fp16 Concat step goes.
  void place_concat_copies(int node) {
    const PlanNode& pn = sp_.plan.nodes[static_cast<size_t>(node)];
    const int y = pn.out[0];
    for (float s : regions_.values[static_cast<size_t>(y)].int8_scales) {
      const size_t cy = static_cast<size_t>(copy_of(y, s));
      for (int id : pn.in) {
        const size_t ci = static_cast<size_t>(copy_of(id, s));
        sp_.root[ci] = static_cast<int>(cy);
        sp_.channel_offset[ci] = sp_.channel_offset[static_cast<size_t>(id)];
        sp_.channel_pitch[ci] = sp_.channel_pitch[cy];
      }
    }
    if (regions_.values[static_cast<size_t>(y)].int8_scales.empty()) return;
    ++sp_.int8_concats;
    if (!regions_.values[static_cast<size_t>(y)].fp16)
      sp_.steps.erase(std::remove_if(sp_.steps.begin(), sp_.steps.end(),
                                     [&](const GpuStep& st) { return st.kind == GpuStepKind::kConcatNhwc && st.node == node; }),
                      sp_.steps.end());
  }

  int copy_of(int value, float scale) const {
    auto it = copies_.find({value, scale});
    YOLOCU_CHECK(it != copies_.end(), kInternal, "INT8 lowering: no int8 copy of '",
                 sp_.plan.values[static_cast<size_t>(value)].name, "' at scale ", scale);
    return it->second;
  }

  void lower_conv(const Int8ConvStep& c) {
    GpuStep& s = sp_.steps[static_cast<size_t>(conv_step_.at(c.node))];
    const size_t y = static_cast<size_t>(c.output);
    YOLOCU_CHECK(s.out[0] == c.output && s.residual == c.residual, kInternal, "INT8 lowering: ", s.label,
                 " is fused differently from its INT8 step");
    GpuInt8Conv g;
    g.x_scale = c.input_scale;
    g.w_scales = cal_.conv(sp_.plan.nodes[static_cast<size_t>(c.node)].node.name)->weight_scales;
    int residual = c.residual;
    if (c.residual >= 0 && c.residual_int8) {
      g.residual_scale = regions_.values[static_cast<size_t>(c.residual)].int8_scales.front();
      residual = copy_of(c.residual, g.residual_scale);
    }
    // The forms of the output: the kernels write two, a third is quantised from the fp16 value.
    const Int8Value& forms = regions_.values[y];
    const bool fp16 = forms.fp16 || forms.int8_scales.size() > 2;
    s.out.clear();
    if (fp16) {
      s.out.push_back(c.output);
      g.out_scales.push_back(0.f);
    }
    for (float sc : forms.int8_scales) {
      if (s.out.size() < 2) {
        s.out.push_back(copy_of(c.output, sc));
        g.out_scales.push_back(sc);
      } else {
        YOLOCU_CHECK(sp_.root[static_cast<size_t>(copy_of(c.output, sc))] == copy_of(c.output, sc), kInternal,
                     "INT8 lowering: ", s.label, " has a third form that lies in a Concat's int8 copy");
        quantize_.push_back({c.output, sc});
      }
    }
    YOLOCU_CHECK(!s.out.empty(), kInternal, "INT8 lowering: ", s.label, " has no reader");
    s.kind = GpuStepKind::kConvInt8;
    s.in = {copy_of(c.input, c.input_scale), s.in[1], s.in[2], residual};
    s.residual = residual;
    s.int8 = static_cast<int>(sp_.int8_convs.size());
    sp_.int8_convs.push_back(std::move(g));
  }

  // A kQuantize step for each copy a float step's value needs, just before the copy's first reader.
  void place_quantize_steps() {
    std::sort(quantize_.begin(), quantize_.end());
    std::map<int, std::vector<GpuStep>> before;  // step index -> the quantise steps to run first
    for (const auto& [value, scale] : quantize_) {
      const int copy = copy_of(value, scale);
      int first = -1;
      for (size_t i = 0; i < sp_.steps.size() && first < 0; ++i) {
        const GpuStep& st = sp_.steps[i];
        if (st.residual == copy || std::find(st.in.begin(), st.in.end(), copy) != st.in.end()) first = static_cast<int>(i);
      }
      YOLOCU_CHECK(first >= 0, kInternal, "INT8 lowering: nothing reads ", sp_.plan.values[static_cast<size_t>(copy)].name);
      GpuStep q;
      q.kind = GpuStepKind::kQuantize;
      q.in = {value};
      q.out = {copy};
      q.scale = scale;
      q.label = sp_.plan.values[static_cast<size_t>(value)].name + " -> int8";
      before[first].push_back(std::move(q));
    }
    std::vector<GpuStep> steps;
    steps.reserve(sp_.steps.size() + quantize_.size());
    for (size_t i = 0; i < sp_.steps.size(); ++i) {
      auto it = before.find(static_cast<int>(i));
      if (it != before.end())
        for (GpuStep& q : it->second) steps.push_back(std::move(q));
      steps.push_back(std::move(sp_.steps[i]));
    }
    sp_.steps = std::move(steps);
    sp_.quantize_steps = static_cast<int>(quantize_.size());
  }

  GpuStepPlan& sp_;
  const Int8Calibration& cal_;
  bool int8_residuals_;
  std::vector<int> int8_concats_;                 // Concat nodes running on int8 values
  Int8Regions regions_;
  std::map<int, int> conv_step_;                  // Conv node -> its kConv step
  std::map<std::pair<int, float>, int> copies_;   // (value, scale) -> its int8 copy
  std::vector<std::pair<int, float>> quantize_;   // copies quantised from the fp16 value
};

}  // namespace

void plan_int8(GpuStepPlan& sp, const GpuStepOptions& options) {
  YOLOCU_CHECK(options.act_elem_size == 2, kInvalidArgument,
               "GPU engine: INT8 runs with fp16 activations around the INT8 convolutions (precision fp16)");
  Int8Lowering(sp, *options.int8, options.int8_residuals).run();
}

}  // namespace yolocu::engine::planning

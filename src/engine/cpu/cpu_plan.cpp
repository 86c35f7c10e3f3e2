// CPU step planning: fusions, layouts, in-place Concats and the arena (see cpu_plan.hpp).
#include "engine/cpu/cpu_plan.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/check.hpp"
#include "engine/memory_plan.hpp"

namespace yolocu::engine::cpu {
namespace {

const PlanValue& value_of(const Plan& plan, int id) { return plan.values[static_cast<size_t>(id)]; }

// Pass 1: one step per runtime node, with Conv -> Sigmoid -> Mul fused into one convolution, a
// residual Add into it as a post-op, and the Detect head's tail (reshape, transpose, sigmoid, split,
// grid/anchor arithmetic, concats) into one step.
class FusionPass {
 public:
  FusionPass(CpuStepPlan& sp, bool fuse_detect_head)
      : sp_(sp), plan_(sp.plan), absorbed_(plan_.nodes.size(), false), head_at_(plan_.nodes.size(), -1),
        logistic_(plan_.nodes.size(), false) {
    if (fuse_detect_head) sp_.heads = find_detect_heads(plan_);
    for (size_t k = 0; k < sp_.heads.size(); ++k) {
      const DetectHead& h = sp_.heads[k];
      for (int n : h.absorbed) absorbed_[static_cast<size_t>(n)] = true;
      for (const auto& L : h.levels) logistic_[static_cast<size_t>(L.conv)] = true;
      absorbed_[static_cast<size_t>(h.concat)] = false;
      head_at_[static_cast<size_t>(h.concat)] = static_cast<int>(k);
      sp_.fused_nodes += static_cast<int>(h.absorbed.size()) - 1;
    }
  }

  std::vector<CpuStepSpec> run() {
    std::vector<CpuStepSpec> specs;
    for (size_t i = 0; i < plan_.nodes.size(); ++i) {
      if (absorbed_[i]) continue;
      const PlanNode& pn = plan_.nodes[i];
      CpuStepSpec s;
      s.node = static_cast<int>(i);
      s.in = pn.in;
      s.out = pn.out;
      if (head_at_[i] >= 0)
        detect_head(s);
      else if (pn.node.op_type == "Conv" && value_of(plan_, pn.in[0]).dtype == DType::kFloat32)
        conv(s, pn);
      specs.push_back(std::move(s));
    }
    return specs;
  }

 private:
  void detect_head(CpuStepSpec& s) const {
    const DetectHead& h = sp_.heads[static_cast<size_t>(head_at_[static_cast<size_t>(s.node)])];
    s.kind = CpuStepKind::kDetectHead;
    s.head = head_at_[static_cast<size_t>(s.node)];
    s.in.clear();
    for (const auto& L : h.levels) s.in.push_back(plan_.nodes[static_cast<size_t>(L.conv)].out[0]);
  }

  void conv(CpuStepSpec& s, const PlanNode& pn) {
    YOLOCU_CHECK(value_of(plan_, pn.in[1]).constant, kUnsupported, pn.node.describe(),
                 ": weights computed at run time are not supported");
    s.kind = CpuStepKind::kConv;
    s.fused_logistic = logistic_[static_cast<size_t>(s.node)];
    int sig = -1, mul = -1;
    if (!s.fused_logistic && is_silu_pair(plan_, s.node, &sig, &mul)) {
      absorbed_[static_cast<size_t>(sig)] = absorbed_[static_cast<size_t>(mul)] = true;
      s.fused_silu = true;
      s.out = plan_.nodes[static_cast<size_t>(mul)].out;
      sp_.fused_nodes += 2;
    }
    // Residual: the (activated) output's only consumer is Add(out, x) with x computed before this
    // convolution (the Bottleneck shortcut) -> a binary-add post-op reading x.
    const int add = s.fused_logistic ? -1 : residual_add(plan_, s.node, s.out[0], &s.residual);
    if (add >= 0) {
      absorbed_[static_cast<size_t>(add)] = true;
      s.out = plan_.nodes[static_cast<size_t>(add)].out;
      s.in.push_back(s.residual);
      sp_.fused_nodes += 1;
    }
  }

  CpuStepPlan& sp_;
  const Plan& plan_;
  std::vector<bool> absorbed_;
  std::vector<int> head_at_;     // the Concat a fused head replaces
  std::vector<bool> logistic_;   // head convolutions
};

// Pass 2: which activations stay blocked; plain twins (and blocked twins for convolutions) made by
// reorder steps where a step needs the other layout. Appends the twins to the plan's values.
class LayoutPass {
 public:
  LayoutPass(CpuStepPlan& sp, int block)
      : sp_(sp), plan_(sp.plan), B_(block), twin_(plan_.values.size(), -1), btwin_(plan_.values.size(), -1) {
    sp_.blocked.assign(plan_.values.size(), 0);
  }

  std::vector<CpuStepSpec> run(std::vector<CpuStepSpec> specs) {
    for (CpuStepSpec& s : specs) {
      bool out_blocked = false;
      if (decide_output(s, &out_blocked)) {  // a blocked channel Split: its input is blocked already
        ordered_.push_back(s);
        continue;
      }
      route_inputs(s, out_blocked);
      if (out_blocked) sp_.blocked[static_cast<size_t>(s.out[0])] = 1;
      ordered_.push_back(s);
    }
    for (int& id : plan_.outputs)
      if (is_blocked(id)) {
        const int t = plain_of(id);
        plan_.values[static_cast<size_t>(t)].graph_output = true;
        id = t;
      }
    return std::move(ordered_);
  }

 private:
  bool blockable(int id) const {
    const auto& v = value_of(plan_, id);
    return !v.constant && v.dtype == DType::kFloat32 && v.shape.size() == 4 && v.shape[1] % B_ == 0;
  }
  bool is_blocked(int id) const { return id >= 0 && sp_.blocked[static_cast<size_t>(id)]; }
  bool is_runtime(int id) const { return id >= 0 && !value_of(plan_, id).constant; }

  // A copy of value `id` in the other layout (plain: blocked 0, blocked: 1), made by a reorder
  // step placed before the step being routed.
  int add_twin(int id, char blocked) {
    PlanValue pv = value_of(plan_, id);
    pv.name += blocked ? ":blocked" : ":nchw";
    if (blocked) pv.graph_input = false;
    pv.graph_output = false;
    pv.consumers.clear();
    plan_.values.push_back(pv);
    sp_.blocked.push_back(blocked);
    twin_.push_back(-1);
    btwin_.push_back(-1);
    const int t = static_cast<int>(plan_.values.size()) - 1;
    CpuStepSpec r;
    r.kind = CpuStepKind::kReorder;
    r.in = {id};
    r.out = {t};
    ordered_.push_back(r);
    return t;
  }
  int plain_of(int id) {
    if (!is_blocked(id)) return id;
    if (twin_[static_cast<size_t>(id)] < 0) {
      const int t = add_twin(id, 0);
      twin_[static_cast<size_t>(id)] = t;
    }
    return twin_[static_cast<size_t>(id)];
  }
  // A convolution reading a plain activation with many channels (after a Split, Reshape, Transpose,
  // MatMul ... computed node by node) would get oneDNN's reference kernel: it reads a blocked copy.
  int blocked_of(int id) {
    if (is_blocked(id) || !blockable(id)) return id;
    if (btwin_[static_cast<size_t>(id)] < 0) {
      const int t = add_twin(id, 1);
      btwin_[static_cast<size_t>(id)] = t;
    }
    return btwin_[static_cast<size_t>(id)];
  }

  // Whether the step's output stays blocked (*out_blocked); may turn the step into a blocked kind.
  // True for a blocked channel Split, which is then complete (its outputs marked blocked).
  bool decide_output(CpuStepSpec& s, bool* out_blocked);
  void route_inputs(CpuStepSpec& s, bool out_blocked);

  CpuStepPlan& sp_;
  Plan& plan_;
  const int64_t B_;
  std::vector<int> twin_;   // plain copy of a blocked value
  std::vector<int> btwin_;  // blocked copy of a plain value
  std::vector<CpuStepSpec> ordered_;
};

int64_t normalised_axis(const Node& node, size_t rank) {
  int64_t axis = node.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(rank);
  return axis;
}

bool LayoutPass::decide_output(CpuStepSpec& s, bool* out_blocked) {
  const PlanNode& pn = plan_.nodes[static_cast<size_t>(s.node)];
  const std::string& op = pn.node.op_type;
  size_t runtime_in = 0;
  for (int id : s.in) runtime_in += is_runtime(id) ? 1 : 0;
  const bool all_runtime = runtime_in == s.in.size();
  const int y = s.out.empty() ? -1 : s.out[0];
  bool& ok = *out_blocked;
  if (s.kind == CpuStepKind::kConv) {
    ok = blockable(y);
    // Channel count not a multiple of B (e.g. the 255-channel heads) after a blocked input: write
    // the padded blocked layout (oneDNN's fast kernels) and reorder to plain for the consumers.
    const auto& yv = value_of(plan_, y);
    if (!ok && is_blocked(s.in[0]) && yv.shape.size() == 4 && yv.dtype == DType::kFloat32)
      sp_.blocked[static_cast<size_t>(y)] = 2;
  } else if (s.kind == CpuStepKind::kDetectHead) {
    // writes plain rows; reads the head convolutions in whichever layout they have
  } else if (op == "Sigmoid" || op == "Mul" || op == "Add" || op == "Sub" || op == "Relu") {
    ok = y >= 0 && blockable(y) && all_runtime;
    for (int id : s.in)
      if (is_runtime(id)) ok = ok && is_blocked(id) && value_of(plan_, id).shape == value_of(plan_, y).shape;
  } else if (op == "Concat") {
    ok = normalised_axis(pn.node, value_of(plan_, y).shape.size()) == 1 && blockable(y) && all_runtime;
    for (int id : s.in)
      if (is_runtime(id)) ok = ok && is_blocked(id);
  } else if (op == "MaxPool") {
    ok = is_blocked(s.in[0]) && blockable(y) && pn.node.attr_ints("dilations", {1, 1}) == std::vector<int64_t>{1, 1} &&
         pn.node.attr_int("ceil_mode", 0) == 0;
    if (ok) s.kind = CpuStepKind::kMaxPoolBlocked;
  } else if (op == "Resize" || op == "Upsample") {
    const Shape& xs = value_of(plan_, s.in[0]).shape;
    ok = is_blocked(s.in[0]) && blockable(y) && value_of(plan_, y).shape[1] == xs[1] && value_of(plan_, y).shape[0] == xs[0];
    if (ok) s.kind = CpuStepKind::kResizeBlocked;
  } else if (op == "Split") {
    // channel Split of a blocked value into parts that are multiples of B: stays blocked
    bool split = normalised_axis(pn.node, value_of(plan_, s.in[0]).shape.size()) == 1 && is_blocked(s.in[0]) &&
                 !s.out.empty();
    for (int id : s.out) split = split && id >= 0 && blockable(id) && !value_of(plan_, id).graph_output;
    if (split) {
      s.kind = CpuStepKind::kSplitBlocked;
      for (int id : s.out) sp_.blocked[static_cast<size_t>(id)] = 1;
      return true;
    }
  }
  return false;
}

// Inputs: convolutions and the Detect head read either layout; blocked ops read blocked; the rest
// read plain twins.
void LayoutPass::route_inputs(CpuStepSpec& s, bool out_blocked) {
  if (s.kind == CpuStepKind::kDetectHead) return;
  const int y = s.out.empty() ? -1 : s.out[0];
  for (size_t k = 0; k < s.in.size(); ++k) {
    int& id = s.in[k];
    if (!is_runtime(id)) continue;
    if (s.kind == CpuStepKind::kConv) {
      // The source of a convolution: blocked (B | C) as it is; a padded blocked value (C not a
      // multiple of B, e.g. YOLO11's 8-channel C3k bottlenecks) has no fast kernel as a source: a
      // plain copy; a plain value with more than 4 channels feeding a blocked output: a blocked copy
      // (after a Split, Reshape, Transpose, MatMul ... run node by node).
      if (k == 0) {
        const auto& xv = value_of(plan_, id);
        if (sp_.blocked[static_cast<size_t>(id)] == 2)
          id = plain_of(id);
        else if (xv.shape.size() == 4 && xv.shape[1] > 4 && blockable(y))
          id = blocked_of(id);
      }
      continue;
    }
    if (!out_blocked) id = plain_of(id);
  }
}

// Pass 3: buffers. View ops alias their input; the inputs of a blocked channel Concat of one image
// are written straight into their slice of its output (nChw{B}c with B | C: the slices are
// consecutive), and the Concat step becomes a no-op; then lifetimes over step indices.
class BufferPass {
 public:
  explicit BufferPass(CpuStepPlan& sp)
      : sp_(sp), plan_(sp.plan), parent_(plan_.values.size(), -1), rel_(plan_.values.size(), 0) {}

  void run() {
    for (CpuStepSpec& s : sp_.steps) {
      if (s.kind != CpuStepKind::kNode) continue;
      if (!alias_view(s)) concat_in_place(s);
    }
    arena();
  }

 private:
  bool alias_view(const CpuStepSpec& s) {
    const PlanNode& pn = plan_.nodes[static_cast<size_t>(s.node)];
    if (!pn.op->is_view || s.in.empty() || s.in[0] < 0 || value_of(plan_, s.in[0]).constant || s.out.size() != 1 ||
        s.out[0] < 0)
      return false;
    parent_[static_cast<size_t>(s.out[0])] = s.in[0];
    return true;
  }

  void concat_in_place(CpuStepSpec& s) {
    const PlanNode& pn = plan_.nodes[static_cast<size_t>(s.node)];
    if (pn.node.op_type != "Concat" || s.out.size() != 1 || sp_.blocked[static_cast<size_t>(s.out[0])] != 1 ||
        value_of(plan_, s.out[0]).shape[0] != 1)
      return;
    for (int id : s.in) {
      if (id < 0) return;
      const auto& v = value_of(plan_, id);
      if (v.constant || v.graph_input || v.graph_output || v.producer < 0 || sp_.blocked[static_cast<size_t>(id)] != 1 ||
          parent_[static_cast<size_t>(id)] >= 0 || std::count(s.in.begin(), s.in.end(), id) != 1)
        return;
    }
    int64_t off = 0;
    for (int id : s.in) {
      parent_[static_cast<size_t>(id)] = s.out[0];
      rel_[static_cast<size_t>(id)] = off;
      off += shape_numel(value_of(plan_, id).shape) * static_cast<int64_t>(sizeof(float));
    }
    s.kind = CpuStepKind::kNoop;
    ++sp_.fused_nodes;
  }

  void arena() {
    const size_t nv = plan_.values.size();
    std::vector<int> root(nv);
    std::vector<int64_t> root_off(nv, 0);
    for (size_t v = 0; v < nv; ++v) {
      int r = static_cast<int>(v);
      int64_t o = 0;
      while (parent_[static_cast<size_t>(r)] >= 0) {
        o += rel_[static_cast<size_t>(r)];
        r = parent_[static_cast<size_t>(r)];
      }
      root[v] = r;
      root_off[v] = o;
    }
    std::vector<bool> is_const(nv);
    for (size_t v = 0; v < nv; ++v) is_const[v] = plan_.values[v].constant;
    std::vector<std::vector<int>> step_values;
    for (const auto& s : sp_.steps) {
      step_values.push_back(s.in);
      step_values.back().insert(step_values.back().end(), s.out.begin(), s.out.end());
    }
    const ValueArena mp = plan_value_arena(root, root_off, is_const, step_values, plan_.inputs, plan_.outputs,
                                           [&](int v) { return cpu_value_bytes(sp_, v); }, 64);
    sp_.offset = mp.offset;
    sp_.arena_bytes = mp.total_bytes;
    sp_.naive_bytes = mp.naive_bytes;
  }

  CpuStepPlan& sp_;
  const Plan& plan_;
  std::vector<int> parent_;    // the value whose buffer this one lives in
  std::vector<int64_t> rel_;   // byte offset inside it
};

}  // namespace

const char* cpu_step_kind_name(CpuStepKind k) noexcept {
  switch (k) {
    case CpuStepKind::kNode: return "Node";
    case CpuStepKind::kConv: return "Conv";
    case CpuStepKind::kReorder: return "Reorder";
    case CpuStepKind::kMaxPoolBlocked: return "MaxPoolBlocked";
    case CpuStepKind::kResizeBlocked: return "ResizeBlocked";
    case CpuStepKind::kSplitBlocked: return "SplitBlocked";
    case CpuStepKind::kEltwise: return "Eltwise";
    case CpuStepKind::kMatMul: return "MatMul";
    case CpuStepKind::kSoftmax: return "Softmax";
    case CpuStepKind::kDetectHead: return "DetectHead";
    case CpuStepKind::kNoop: return "Noop";
  }
  return "?";
}

size_t cpu_value_bytes(const CpuStepPlan& sp, int value) {
  const auto& v = value_of(sp.plan, value);
  if (!sp.blocked[static_cast<size_t>(value)]) return static_cast<size_t>(shape_numel(v.shape)) * dtype_size(v.dtype);
  // nChw{B}c float32: the channels padded to a multiple of B (oneDNN's buffer size for the layout)
  const int64_t B = sp.block, c = (v.shape[1] + B - 1) / B * B;
  return static_cast<size_t>(v.shape[0] * c * v.shape[2] * v.shape[3]) * sizeof(float);
}

namespace {

// A runtime float32 value of the plain layout.
bool plain_float(const CpuStepPlan& sp, int id) {
  if (id < 0) return false;
  const PlanValue& v = value_of(sp.plan, id);
  return v.dtype == DType::kFloat32 && !v.constant && sp.blocked[static_cast<size_t>(id)] == 0;
}

// MatMul as oneDNN's matmul (C2PSA's attention products): both operands of one rank >= 2 with the
// same batch axes (no 1-D promotion, no broadcast), as YOLO11's graphs have them.
bool matmul_on_dnnl(const CpuStepPlan& sp, const CpuStepSpec& s) {
  if (s.in.size() != 2 || s.out.size() != 1 || !plain_float(sp, s.in[0]) || !plain_float(sp, s.in[1]) ||
      !plain_float(sp, s.out[0]))
    return false;
  const Shape& a = value_of(sp.plan, s.in[0]).shape;
  const Shape& b = value_of(sp.plan, s.in[1]).shape;
  return a.size() >= 2 && a.size() <= 6 && a.size() == b.size() && std::equal(a.begin(), a.end() - 2, b.begin()) &&
         a.back() == b[b.size() - 2];
}

// Softmax as oneDNN's softmax: over the last axis (C2PSA's attention scores). oneDNN's kernels for
// an inner axis (YOLOv8's DFL bins) are its slow reference ones: the reference op keeps those.
bool softmax_on_dnnl(const CpuStepPlan& sp, const CpuStepSpec& s) {
  if (s.in.size() != 1 || s.out.size() != 1 || !plain_float(sp, s.in[0]) || !plain_float(sp, s.out[0])) return false;
  const Node& n = sp.plan.nodes[static_cast<size_t>(s.node)].node;
  const auto rank = static_cast<int64_t>(value_of(sp.plan, s.in[0]).shape.size());
  int64_t axis = n.attr_int("axis", sp.plan.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  return rank >= 1 && rank <= 6 && axis == rank - 1;
}

}  // namespace

CpuStepPlan plan_cpu_steps(Plan plan, const CpuStepOptions& options) {
  CpuStepPlan sp;
  sp.plan = std::move(plan);
  sp.block = options.block;
  std::vector<CpuStepSpec> specs = FusionPass(sp, options.fuse_detect_head).run();
  sp.steps = LayoutPass(sp, options.block).run(std::move(specs));
  BufferPass(sp).run();
  // Sigmoid on a runtime float32 value: oneDNN's JIT logistic (vectorised exp) over the buffer,
  // either layout (a padded blocked buffer has the same size). The Detect head applies it to
  // N x 25200 x 85 values when its tail is not fused.
  for (CpuStepSpec& s : sp.steps) {
    if (s.kind != CpuStepKind::kNode) continue;
    const auto& x = value_of(sp.plan, s.in[0]);
    const PlanNode& pn = sp.plan.nodes[static_cast<size_t>(s.node)];
    if (pn.node.op_type == "Sigmoid" && x.dtype == DType::kFloat32 && !x.constant)
      s.kind = CpuStepKind::kEltwise;
    else if (pn.node.op_type == "MatMul" && matmul_on_dnnl(sp, s))
      s.kind = CpuStepKind::kMatMul;
    else if (pn.node.op_type == "Softmax" && softmax_on_dnnl(sp, s))
      s.kind = CpuStepKind::kSoftmax;
  }
  return sp;
}

}  // namespace yolocu::engine::cpu

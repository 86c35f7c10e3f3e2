// Planning pass: nodes -> steps and layouts (planning/passes.hpp). A node's step reads its inputs in
// the layout its kernel needs: where a value is in the other layout, a reorder step (ToNhwc /
// ToPlain) makes its twin, once, just before the first step that needs it.
#include <string>
#include <utility>
#include <vector>

#include "core/check.hpp"
#include "engine/cuda/planning/passes.hpp"

namespace yolocu::engine::planning {
namespace {

bool is_unary(const std::string& op) {
  return op == "Sigmoid" || op == "Relu" || op == "Exp" || op == "Sqrt" || op == "Floor" || op == "Ceil" ||
         op == "Neg" || op == "Abs";
}
bool is_binary(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Max" || op == "Min";
}

class Lowering {
 public:
  Lowering(GpuStepPlan& sp, Fusions& f, const GpuStepOptions& options)
      : sp_(sp), plan_(sp.plan), f_(f), options_(options), twin_(sp.plan.values.size(), -1) {}

  void run() {
    for (size_t i = 0; i < plan_.nodes.size(); ++i)
      if (!f_.absorbed[i]) lower_node(i);
    make_outputs_plain();
  }

 private:
  PlanValue& val(int id) { return plan_.values[static_cast<size_t>(id)]; }
  Layout layout_of(int id) const { return id < 0 ? Layout::kNone : sp_.layout[static_cast<size_t>(id)]; }

  // The value in layout `to`: itself, or its twin (made, with its reorder step, on first use).
  int make_twin(int id, Layout to) {
    if (sp_.layout[static_cast<size_t>(id)] == to) return id;
    if (twin_[static_cast<size_t>(id)] >= 0) return twin_[static_cast<size_t>(id)];
    PlanValue pv = val(id);
    pv.name += to == Layout::kNhwc ? ":nhwc" : ":nchw";
    pv.graph_output = false;
    pv.graph_input = false;
    pv.consumers.clear();
    pv.producer = -1;
    plan_.values.push_back(pv);
    sp_.layout.push_back(to);
    twin_.push_back(id);  // the twin's twin is the original
    const int t = static_cast<int>(plan_.values.size()) - 1;
    twin_[static_cast<size_t>(id)] = t;
    GpuStep r;
    r.kind = to == Layout::kNhwc ? GpuStepKind::kToNhwc : GpuStepKind::kToPlain;
    r.in = {id};
    r.out = {t};
    r.label = val(id).name + (to == Layout::kNhwc ? " -> nhwc" : " -> nchw");
    sp_.steps.push_back(r);
    return t;
  }
  int plain(int id) {
    if (id < 0 || val(id).constant) return id;
    return make_twin(id, Layout::kPlain);
  }
  int nhwc(int id) {
    YOLOCU_CHECK(val(id).shape.size() == 4, kUnsupported, "GPU engine: value '", val(id).name,
                 "' feeds a convolution-type op but has shape ", shape_str(val(id).shape));
    YOLOCU_CHECK(!val(id).constant, kUnsupported, "GPU engine: constant '", val(id).name,
                 "' as the data input of a convolution-type op");
    return make_twin(id, Layout::kNhwc);
  }

  void lower_node(size_t i);
  // Per op family: sets s.kind and s.in (reorders made as needed), returns the outputs' layout.
  Layout lower_detect_tail(GpuStep& s, size_t i);
  Layout lower_v8_tail(GpuStep& s, size_t i);
  Layout lower_attention(GpuStep& s, size_t i);
  Layout lower_conv(GpuStep& s, const PlanNode& pn, size_t i);
  Layout lower_elementwise(GpuStep& s, const PlanNode& pn, const std::vector<int>& runtime_in);
  Layout lower_concat(GpuStep& s, const PlanNode& pn, const std::vector<int>& runtime_in);
  Layout lower_maxpool(GpuStep& s, const PlanNode& pn);
  Layout lower_resize(GpuStep& s, const PlanNode& pn);
  Layout lower_matmul(GpuStep& s, const PlanNode& pn);
  // Steps of one output each (Split): a copy of s per output, in the given layout.
  void push_per_output(const GpuStep& s, const PlanNode& pn, Layout layout);
  void make_outputs_plain();

  GpuStepPlan& sp_;
  Plan& plan_;
  Fusions& f_;
  const GpuStepOptions& options_;
  std::vector<int> twin_;  // per value: its twin in the other layout, -1 none yet
};

void Lowering::lower_node(size_t i) {
  const PlanNode& pn = plan_.nodes[i];  // stays valid: only plan.values grows below
  const std::string& op = pn.node.op_type;
  GpuStep s;
  s.node = static_cast<int>(i);
  s.in = pn.in;
  s.out = pn.out;
  s.label = pn.node.name.empty() ? op : pn.node.name;
  const int y = pn.out.empty() ? -1 : pn.out[0];
  std::vector<int> runtime_in;
  for (int id : pn.in)
    if (id >= 0 && !val(id).constant) runtime_in.push_back(id);
  Layout out_layout = Layout::kPlain;

  if (f_.head_at[i] >= 0) {
    out_layout = lower_detect_tail(s, i);
  } else if (f_.v8_head_at[i] >= 0) {
    out_layout = lower_v8_tail(s, i);
  } else if (f_.attention_at[i] >= 0) {
    out_layout = lower_attention(s, i);
  } else if (f_.sppf_at[i] > 0) {
    s.kind = GpuStepKind::kSppf;
    s.pool = f_.sppf_at[i];
    s.in = {nhwc(pn.in[0])};
    s.label = "SPPF " + s.label;
    out_layout = Layout::kNhwc;
  } else if (op == "Conv") {
    out_layout = lower_conv(s, pn, i);
  } else if (is_unary(op) || is_binary(op)) {
    out_layout = lower_elementwise(s, pn, runtime_in);
  } else if (op == "Concat") {
    out_layout = lower_concat(s, pn, runtime_in);
  } else if (op == "MaxPool") {
    out_layout = lower_maxpool(s, pn);
  } else if (op == "Resize" || op == "Upsample") {
    out_layout = lower_resize(s, pn);
  } else if (op == "Split" && layout_of(pn.in[0]) == Layout::kNhwc && val(pn.in[0]).shape.size() == 4 &&
             (pn.node.attr_int("axis", 0) == 1 || pn.node.attr_int("axis", 0) == -3)) {
    // A channel split of an NHWC value stays NHWC: one strided row copy per output.
    s.kind = GpuStepKind::kSplitNhwc;
    s.in = {pn.in[0]};
    push_per_output(s, pn, Layout::kNhwc);
    return;
  } else if (op == "Softmax") {
    s.kind = GpuStepKind::kSoftmax;
    s.in = {plain(pn.in[0])};
    YOLOCU_CHECK(val(pn.in[0]).dtype == DType::kFloat32, kUnsupported, pn.node.describe(), ": float32 only on the GPU");
  } else if (op == "MatMul") {
    out_layout = lower_matmul(s, pn);
  } else if (op == "Transpose" || op == "Slice" || op == "Split") {
    s.kind = GpuStepKind::kGather;
    s.in[0] = plain(pn.in[0]);
    YOLOCU_CHECK(val(pn.in[0]).shape.size() <= 6, kUnsupported, pn.node.describe(), ": rank > 6");
    if (op == "Split") {  // one gather step per output
      push_per_output(s, pn, Layout::kPlain);
      return;
    }
  } else if (op == "Cast") {
    YOLOCU_CHECK(val(pn.in[0]).dtype == DType::kFloat32 && val(y).dtype == DType::kFloat32, kUnsupported,
                 pn.node.describe(), ": only casts between float types are supported on the GPU");
    s.kind = GpuStepKind::kCopy;
    s.in[0] = plain(pn.in[0]);
  } else if (pn.op->is_view) {
    s.kind = GpuStepKind::kView;
    YOLOCU_CHECK(pn.in[0] >= 0 && !val(pn.in[0]).constant, kInternal, pn.node.describe(),
                 ": view of a constant was not folded");
    s.in[0] = plain(pn.in[0]);
  } else {
    detail::fail(ErrorCode::kUnsupported, pn.node.describe(), ": op '", op,
                 "' is not supported by the GPU engine (its inputs are not all constant)");
  }
  for (int id : s.out)
    if (id >= 0) sp_.layout[static_cast<size_t>(id)] = out_layout;
  sp_.steps.push_back(std::move(s));
}

Layout Lowering::lower_detect_tail(GpuStep& s, size_t i) {
  s.kind = GpuStepKind::kDetectTail;
  s.head = f_.head_at[i];
  s.in.clear();
  for (const DetectLevel& L : sp_.heads[static_cast<size_t>(s.head)].levels) {
    const int cv = plan_.nodes[static_cast<size_t>(L.conv)].out[0];
    YOLOCU_CHECK(layout_of(cv) == Layout::kNhwc, kInternal, "Detect tail: head convolution output '", val(cv).name,
                 "' is not NHWC");
    s.in.push_back(cv);
  }
  s.label = "DetectTail";
  return Layout::kPlain;
}

Layout Lowering::lower_v8_tail(GpuStep& s, size_t i) {
  s.kind = GpuStepKind::kV8Tail;
  s.head = f_.v8_head_at[i];
  s.in.clear();
  for (const V8Level& L : sp_.v8_heads[static_cast<size_t>(s.head)].levels) {
    s.in.push_back(nhwc(L.box));  // the head convolutions' outputs are NHWC already
    s.in.push_back(nhwc(L.cls));
  }
  s.label = "V8Tail";
  return Layout::kPlain;
}

Layout Lowering::lower_attention(GpuStep& s, size_t i) {
  s.kind = GpuStepKind::kAttention;
  s.head = f_.attention_at[i];
  const AttentionBlock& a = sp_.attention[static_cast<size_t>(s.head)];
  s.in = {nhwc(a.qkv)};  // the qkv convolution's output is NHWC already
  s.out = {a.out};
  if (a.v_image >= 0) s.out.push_back(a.v_image);
  s.label = "Attention " + s.label;
  return Layout::kNhwc;
}

Layout Lowering::lower_conv(GpuStep& s, const PlanNode& pn, size_t i) {
  YOLOCU_CHECK(pn.in.size() >= 2 && val(pn.in[1]).constant, kUnsupported, pn.node.describe(),
               ": weights computed at run time are not supported");
  YOLOCU_CHECK(pn.in.size() < 3 || pn.in[2] < 0 || val(pn.in[2]).constant, kUnsupported, pn.node.describe(),
               ": bias computed at run time is not supported");
  const auto pads = pn.node.attr_ints("pads", {0, 0, 0, 0});
  YOLOCU_CHECK(pads.size() == 4 && pads[0] == pads[2] && pads[1] == pads[3], kUnsupported, pn.node.describe(),
               ": asymmetric padding is not supported on the GPU");
  YOLOCU_CHECK(pn.node.attr_string("auto_pad", "NOTSET") == "NOTSET", kUnsupported, pn.node.describe(),
               ": auto_pad is not supported on the GPU");
  s.kind = GpuStepKind::kConv;
  s.in[0] = nhwc(pn.in[0]);
  ++sp_.convs;
  int sig = -1, mul = -1;
  if (options_.fuse_silu && engine::is_silu_pair(plan_, static_cast<int>(i), &sig, &mul)) {
    f_.absorbed[static_cast<size_t>(sig)] = f_.absorbed[static_cast<size_t>(mul)] = true;
    s.silu = true;
    s.out = plan_.nodes[static_cast<size_t>(mul)].out;
    ++sp_.fused_silu;
  }
  // Residual: the output's (the SiLU's, or the convolution's own without one: YOLO11's C2PSA pe,
  // proj and ffn.1) only consumer is Add(y, r), same shape, with r ready: NHWC already, i.e. made
  // by a step lowered before this one (pe's r is the fused attention's output, whose step runs at
  // the block's first node although its last node comes after pe).
  int r = -1;
  const int a =
      options_.fuse_residual ? engine::residual_add(plan_, static_cast<int>(i), s.out[0], &r, /*ready_before=*/false) : -1;
  if (a >= 0 && !f_.absorbed[static_cast<size_t>(a)] && layout_of(r) == Layout::kNhwc) {
    f_.absorbed[static_cast<size_t>(a)] = true;
    s.residual = r;
    s.out = plan_.nodes[static_cast<size_t>(a)].out;
    ++sp_.fused_residual;
  }
  // Inputs the step reads: x, (weights / bias are constants), residual.
  s.in = {s.in[0], pn.in[1], pn.in.size() > 2 ? pn.in[2] : -1, s.residual};
  return Layout::kNhwc;
}

Layout Lowering::lower_elementwise(GpuStep& s, const PlanNode& pn, const std::vector<int>& runtime_in) {
  const std::string& op = pn.node.op_type;
  const int y = pn.out.empty() ? -1 : pn.out[0];
  YOLOCU_CHECK(!is_binary(op) || pn.in.size() == 2, kUnsupported, pn.node.describe(), ": expects 2 inputs");
  bool nhwc_ok = y >= 0 && val(y).shape.size() == 4 && runtime_in.size() == pn.in.size();
  for (int id : runtime_in) nhwc_ok = nhwc_ok && layout_of(id) == Layout::kNhwc && val(id).shape == val(y).shape;
  if (nhwc_ok) {
    s.kind = GpuStepKind::kEltwiseNhwc;
    return Layout::kNhwc;
  }
  s.kind = is_unary(op) ? GpuStepKind::kUnary : GpuStepKind::kBinary;
  for (int& id : s.in) id = plain(id);
  YOLOCU_CHECK(val(y).shape.size() <= 6, kUnsupported, pn.node.describe(), ": rank ", val(y).shape.size(),
               " > 6 is not supported on the GPU");
  return Layout::kPlain;
}

Layout Lowering::lower_concat(GpuStep& s, const PlanNode& pn, const std::vector<int>& runtime_in) {
  const int y = pn.out[0];
  int64_t axis = pn.node.attr_int("axis", 0);
  const int64_t r = static_cast<int64_t>(val(y).shape.size());
  if (axis < 0) axis += r;
  bool nhwc_ok = axis == 1 && r == 4 && runtime_in.size() == pn.in.size();
  for (int id : runtime_in) nhwc_ok = nhwc_ok && layout_of(id) == Layout::kNhwc;
  if (nhwc_ok) {
    s.kind = GpuStepKind::kConcatNhwc;
    return Layout::kNhwc;
  }
  s.kind = GpuStepKind::kConcat;
  for (int& id : s.in) id = plain(id);
  return Layout::kPlain;
}

Layout Lowering::lower_maxpool(GpuStep& s, const PlanNode& pn) {
  YOLOCU_CHECK(val(pn.out[0]).shape.size() == 4, kUnsupported, pn.node.describe(), ": only 2-D max pooling");
  YOLOCU_CHECK(pn.node.attr_ints("dilations", {1, 1}) == std::vector<int64_t>({1, 1}), kUnsupported,
               pn.node.describe(), ": dilated max pooling is not supported on the GPU");
  YOLOCU_CHECK(pn.node.attr_string("auto_pad", "NOTSET") == "NOTSET", kUnsupported, pn.node.describe(),
               ": auto_pad is not supported on the GPU");
  YOLOCU_CHECK(pn.out.size() == 1 || pn.out[1] < 0, kUnsupported, pn.node.describe(), ": Indices output");
  s.kind = GpuStepKind::kMaxPool;
  s.in = {nhwc(pn.in[0])};
  return Layout::kNhwc;
}

Layout Lowering::lower_resize(GpuStep& s, const PlanNode& pn) {
  YOLOCU_CHECK(pn.node.attr_string("mode", "nearest") == "nearest", kUnsupported, pn.node.describe(),
               ": only nearest resizing is supported on the GPU");
  const Shape& xs = val(pn.in[0]).shape;
  const Shape& ys = val(pn.out[0]).shape;
  YOLOCU_CHECK(xs.size() == 4 && ys.size() == 4 && xs[0] == ys[0] && xs[1] == ys[1], kUnsupported,
               pn.node.describe(), ": only spatial resizing of rank-4 tensors is supported on the GPU");
  s.kind = GpuStepKind::kResize;
  s.in[0] = nhwc(pn.in[0]);
  return Layout::kNhwc;
}

Layout Lowering::lower_matmul(GpuStep& s, const PlanNode& pn) {
  YOLOCU_CHECK(pn.in.size() == 2 && pn.in[0] >= 0 && pn.in[1] >= 0, kUnsupported, pn.node.describe(),
               ": expects 2 inputs");
  YOLOCU_CHECK(val(pn.in[0]).shape.size() >= 2 && val(pn.in[1]).shape.size() >= 2 && val(pn.out[0]).shape.size() <= 6,
               kUnsupported, pn.node.describe(), ": 1-D operands or rank > 6 are not supported on the GPU");
  s.kind = GpuStepKind::kMatMul;
  for (int& id : s.in) id = plain(id);
  return Layout::kPlain;
}

void Lowering::push_per_output(const GpuStep& s, const PlanNode& pn, Layout layout) {
  for (size_t k = 0; k < pn.out.size(); ++k) {
    if (pn.out[k] < 0) continue;
    GpuStep g = s;
    g.out = {pn.out[k]};
    g.out_index = static_cast<int>(k);
    sp_.layout[static_cast<size_t>(pn.out[k])] = layout;
    sp_.steps.push_back(g);
  }
}

void Lowering::make_outputs_plain() {
  for (int& id : plan_.outputs) {
    YOLOCU_CHECK(!val(id).constant && !val(id).graph_input, kUnsupported, "GPU engine: output '", val(id).name,
                 "' is a constant or an input");
    if (layout_of(id) == Layout::kNhwc) {
      const int t = plain(id);
      val(t).graph_output = true;
      id = t;
    }
  }
}

}  // namespace

void lower_nodes(GpuStepPlan& sp, Fusions& f, const GpuStepOptions& options) { Lowering(sp, f, options).run(); }

}  // namespace yolocu::engine::planning

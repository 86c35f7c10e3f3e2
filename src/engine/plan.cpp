#include "engine/plan.hpp"

#include <array>
#include <map>
#include <unordered_map>

#include "core/check.hpp"
#include "yolocu/engine.hpp"

namespace yolocu::engine {

using detail::fail;

void check_input_shapes(const Model& model, const std::vector<Shape>& shapes) {
  const auto& inputs = model.graph.inputs;
  YOLOCU_CHECK(shapes.size() == inputs.size(), kInvalidArgument, "the model has ", inputs.size(), " input(s), ",
               shapes.size(), " given");
  std::map<std::string, int64_t> bound;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& v = inputs[i];
    const Shape& s = shapes[i];
    YOLOCU_CHECK(s.size() == v.dims.size(), kInvalidArgument, "input '", v.name, "' has rank ", v.dims.size(),
                 " in the model, the tensor given has rank ", s.size(), " (shape ", shape_str(s), ")");
    for (size_t d = 0; d < s.size(); ++d) {
      YOLOCU_CHECK(s[d] > 0, kInvalidArgument, "input '", v.name, "': dimension ", d, " is ", s[d]);
      if (v.dims[d].is_static()) {
        YOLOCU_CHECK(v.dims[d].value == s[d], kInvalidArgument, "input '", v.name, "': dimension ", d, " must be ",
                     v.dims[d].value, " (static in the model), got ", s[d], " (shape ", shape_str(s), ")");
      } else {
        auto it = bound.emplace(v.dims[d].param, s[d]).first;
        YOLOCU_CHECK(it->second == s[d], kInvalidArgument, "input '", v.name, "': symbolic dimension '",
                     v.dims[d].param, "' is ", s[d], " here and ", it->second, " elsewhere");
      }
    }
  }
}

namespace {
Tensor to_compute_dtype(Tensor t, bool fp16_as_fp32) {
  return fp16_as_fp32 && t.dtype() == DType::kFloat16 ? cast_tensor(t, DType::kFloat32) : t;
}
}  // namespace

namespace {

// Bytes of a dtype x shape value, saturating at UINT64_MAX (shapes come from the file).
uint64_t value_bytes(DType dtype, const Shape& shape) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d <= 0) return 0;
    const uint64_t ud = static_cast<uint64_t>(d);
    if (n > UINT64_MAX / ud) return UINT64_MAX;
    n *= ud;
  }
  return n;
}

// kUnsupported above kMaxTensorElements, kOutOfMemory above the budget; before any allocation.
void check_value_size(const std::string& who, const std::string& value, DType dtype, const Shape& shape,
                      uint64_t budget) {
  for (int64_t d : shape)
    YOLOCU_CHECK(d >= 0, kParse, who, ": value '", value, "' has a negative dimension (shape ", shape_str(shape), ")");
  const uint64_t bytes = value_bytes(dtype, shape);
  const uint64_t elems = bytes / dtype_size(dtype);
  YOLOCU_CHECK(elems <= static_cast<uint64_t>(kMaxTensorElements), kUnsupported, who, ": value '", value,
               "' of shape ", shape_str(shape), " has ", bytes == UINT64_MAX ? std::string("more than 2^64 bytes of") : std::to_string(elems),
               " elements; yolocu supports tensors of up to 2^31 - 1 elements");
  YOLOCU_CHECK(bytes <= budget, kOutOfMemory, who, ": value '", value, "' of shape ", shape_str(shape), " (",
               dtype_name(dtype), ") needs ", bytes, " bytes, above the memory budget of ", budget,
               " bytes (max_memory, yolocu --max-memory)");
}

}  // namespace

namespace {

// Initializers and folded values together, checked against the budget as they are added.
struct ConstantBudget {
  uint64_t budget = 0;
  uint64_t bytes = 0;
  void add(const std::string& who, uint64_t more) {
    bytes = more > UINT64_MAX - bytes ? UINT64_MAX : bytes + more;
    YOLOCU_CHECK(bytes <= budget, kOutOfMemory, who, ": the model's constants need ", bytes,
                 " bytes so far, above the memory budget of ", budget, " bytes (max_memory, yolocu --max-memory)");
  }
};

// build_plan's passes, in order: bind the graph's initializers and inputs, infer each node's outputs
// and fold it when its inputs are constant (else keep it as a runtime node), bind the graph's
// outputs, drop the runtime nodes no output needs.
class PlanBuilder {
 public:
  PlanBuilder(const Model& model, const PlanOptions& options, uint64_t budget)
      : model_(model), options_(options), budget_(budget), constants_{budget, 0} {
    plan_.opset = model.opset;
  }

  void bind_initializers();
  void bind_inputs(const std::vector<Shape>& shapes);
  void add_node(const Node& node);
  void bind_outputs();
  Plan finish();

 private:
  struct NodeInputs {
    std::vector<ops::ValueMeta> metas;
    std::vector<int> ids;
    bool all_const = true;
  };
  int add_value(const std::string& name);
  NodeInputs collect_inputs(const Node& node) const;
  std::vector<ops::ValueMeta> infer(const Node& node, const ops::OpDef& op, const NodeInputs& in) const;
  std::vector<int> add_outputs(const Node& node, const std::vector<ops::ValueMeta>& outs);
  void fold(const Node& node, const ops::OpDef& op, const std::vector<int>& in_ids,
            const std::vector<ops::ValueMeta>& outs, const std::vector<int>& out_ids);

  const Model& model_;
  const PlanOptions& options_;
  uint64_t budget_;
  ConstantBudget constants_;
  Plan plan_;
  std::unordered_map<std::string, int> ids_;
  std::vector<PlanNode> runtime_;
};

int PlanBuilder::add_value(const std::string& name) {
  YOLOCU_CHECK(!ids_.count(name), kParse, "value '", name, "' defined twice");
  const int id = static_cast<int>(plan_.values.size());
  ids_[name] = id;
  plan_.values.push_back({});
  plan_.values.back().name = name;
  return id;
}

void PlanBuilder::bind_initializers() {
  for (const auto& kv : model_.graph.initializers) {
    const int id = add_value(kv.first);
    PlanValue& v = plan_.values[static_cast<size_t>(id)];
    constants_.add("initializer '" + kv.first + "'",
                   value_bytes(options_.fp16_as_fp32 && kv.second.dtype() == DType::kFloat16 ? DType::kFloat32
                                                                                            : kv.second.dtype(),
                               kv.second.shape()));
    v.value = to_compute_dtype(kv.second, options_.fp16_as_fp32);
    v.dtype = v.value.dtype();
    v.shape = v.value.shape();
    v.constant = true;
  }
}

void PlanBuilder::bind_inputs(const std::vector<Shape>& shapes) {
  for (size_t i = 0; i < model_.graph.inputs.size(); ++i) {
    const ValueInfo& in = model_.graph.inputs[i];
    const int id = add_value(in.name);
    PlanValue& v = plan_.values[static_cast<size_t>(id)];
    v.dtype = options_.fp16_as_fp32 && in.dtype == DType::kFloat16 ? DType::kFloat32 : in.dtype;
    v.shape = shapes[i];
    check_value_size("graph input", in.name, v.dtype, v.shape, budget_);
    v.graph_input = true;
    plan_.inputs.push_back(id);
    plan_.input_dtypes.push_back(in.dtype);
  }
}

PlanBuilder::NodeInputs PlanBuilder::collect_inputs(const Node& node) const {
  NodeInputs r;
  for (const auto& name : node.inputs) {
    if (name.empty()) {
      r.metas.push_back({});
      r.metas.back().present = false;
      r.ids.push_back(-1);
      continue;
    }
    const auto found = ids_.find(name);
    YOLOCU_CHECK(found != ids_.end(), kInvalidArgument, node.describe(), " reads '", name,
                 "', an output its producer does not compute (more outputs declared than the op has)");
    const int id = found->second;
    const PlanValue& v = plan_.values[static_cast<size_t>(id)];
    ops::ValueMeta m;
    m.dtype = v.dtype;
    m.shape = v.shape;
    m.value = v.constant ? &v.value : nullptr;
    r.metas.push_back(m);
    r.ids.push_back(id);
    r.all_const = r.all_const && v.constant;
  }
  return r;
}

std::vector<ops::ValueMeta> PlanBuilder::infer(const Node& node, const ops::OpDef& op, const NodeInputs& in) const {
  std::vector<ops::ValueMeta> outs;
  try {
    op.infer(node, model_.opset, in.metas, outs);
  } catch (const Error& e) {
    // Name the node: errors from ops already do; add context for the opset.
    throw Error(e.code(), std::string(e.what()) + " (opset " + std::to_string(model_.opset) + ")");
  }
  YOLOCU_CHECK(outs.size() <= node.outputs.size() || node.op_type == "Split", kParse, node.describe(), ": declares ",
               node.outputs.size(), " outputs, needs ", outs.size());
  for (size_t k = 0; k < outs.size() && k < node.outputs.size(); ++k)
    check_value_size(node.describe(), node.outputs[k].empty() ? "(unnamed output)" : node.outputs[k], outs[k].dtype,
                     outs[k].shape, budget_);
  return outs;
}

std::vector<int> PlanBuilder::add_outputs(const Node& node, const std::vector<ops::ValueMeta>& outs) {
  std::vector<int> out_ids;
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k].empty() || k >= outs.size()) {
      out_ids.push_back(-1);
      continue;
    }
    const int id = add_value(node.outputs[k]);
    PlanValue& v = plan_.values[static_cast<size_t>(id)];
    v.dtype = outs[k].dtype;
    v.shape = outs[k].shape;
    out_ids.push_back(id);
  }
  return out_ids;
}

// Computes a node whose inputs are constant (or a Shape) now; its outputs become constants.
void PlanBuilder::fold(const Node& node, const ops::OpDef& op, const std::vector<int>& in_ids,
                       const std::vector<ops::ValueMeta>& outs, const std::vector<int>& out_ids) {
  std::vector<Tensor> inputs_owned;
  inputs_owned.reserve(in_ids.size());
  std::vector<const Tensor*> in_ptrs;
  for (int id : in_ids) {
    if (id < 0) {
      in_ptrs.push_back(nullptr);
      continue;
    }
    const PlanValue& v = plan_.values[static_cast<size_t>(id)];
    if (v.constant) {
      in_ptrs.push_back(&v.value);
    } else {  // Shape of a runtime value: a placeholder with the right shape, never read
      inputs_owned.emplace_back(Tensor::view(v.dtype, v.shape, nullptr));
      in_ptrs.push_back(&inputs_owned.back());
    }
  }
  std::vector<Tensor> results;
  std::vector<Tensor*> out_ptrs;
  // Every output the op computes gets a buffer, also one the file leaves unnamed (an op may write
  // it: LeakyRelu with output "" dereferenced a null output, found by the onnx fuzzer); only the
  // named ones are kept.
  results.reserve(outs.size());
  for (size_t k = 0; k < out_ids.size(); ++k) {
    if (k >= outs.size()) {
      out_ptrs.push_back(nullptr);
      continue;
    }
    results.emplace_back(outs[k].dtype, outs[k].shape);
    out_ptrs.push_back(&results.back());
  }
  op.compute(node, model_.opset, in_ptrs, out_ptrs);
  for (size_t k = 0; k < out_ids.size() && k < results.size(); ++k) {
    const int id = out_ids[k];
    if (id < 0) continue;
    PlanValue& v = plan_.values[static_cast<size_t>(id)];
    v.value = to_compute_dtype(results[k], options_.fp16_as_fp32);
    v.dtype = v.value.dtype();
    v.constant = true;
  }
  ++plan_.folded_nodes;
}

void PlanBuilder::add_node(const Node& node) {
  YOLOCU_CHECK(node.domain.empty() || node.domain == "ai.onnx", kUnsupported, node.describe(), ": operator domain '",
               node.domain, "' is not supported (opset ", model_.opset, ")");
  const ops::OpDef* op = ops::find_op(node.op_type);
  YOLOCU_CHECK(op, kUnsupported, "unsupported op '", node.op_type, "' (node '", node.name, "', opset ", model_.opset,
               ")");
  const NodeInputs in = collect_inputs(node);
  const std::vector<ops::ValueMeta> outs = infer(node, *op, in);
  // Shape is known from metadata alone; everything else folds when all its inputs are constant.
  const bool folds = in.all_const || node.op_type == "Shape";
  if (folds)
    for (size_t k = 0; k < outs.size() && k < node.outputs.size(); ++k)
      constants_.add(node.describe(), value_bytes(outs[k].dtype, outs[k].shape));  // unnamed ones are computed too
  const std::vector<int> out_ids = add_outputs(node, outs);
  if (folds) {
    fold(node, *op, in.ids, outs, out_ids);
    return;
  }
  for (int id : out_ids)
    if (id >= 0 && options_.fp16_as_fp32 && plan_.values[static_cast<size_t>(id)].dtype == DType::kFloat16)
      plan_.values[static_cast<size_t>(id)].dtype = DType::kFloat32;
  PlanNode pn;
  pn.node = node;
  pn.op = op;
  pn.in = in.ids;
  pn.out = out_ids;
  runtime_.push_back(std::move(pn));
}

void PlanBuilder::bind_outputs() {
  for (const auto& o : model_.graph.outputs) {
    const auto found = ids_.find(o.name);
    YOLOCU_CHECK(found != ids_.end(), kInvalidArgument, "graph output '", o.name,
                 "' is an output its producer does not compute (more outputs declared than the op has)");
    const int id = found->second;
    plan_.values[static_cast<size_t>(id)].graph_output = true;
    plan_.outputs.push_back(id);
    plan_.output_dtypes.push_back(o.dtype);
  }
}

// Dead-node elimination, walking back from the outputs; the live nodes get their producer and
// consumer links.
Plan PlanBuilder::finish() {
  std::vector<bool> live(plan_.values.size(), false);
  for (int id : plan_.outputs) live[static_cast<size_t>(id)] = true;
  std::vector<bool> keep(runtime_.size(), false);
  for (size_t i = runtime_.size(); i-- > 0;) {
    bool needed = false;
    for (int id : runtime_[i].out)
      if (id >= 0 && live[static_cast<size_t>(id)]) needed = true;
    if (!needed) continue;
    keep[i] = true;
    for (int id : runtime_[i].in)
      if (id >= 0) live[static_cast<size_t>(id)] = true;
  }
  for (size_t i = 0; i < runtime_.size(); ++i) {
    if (!keep[i]) continue;
    const int idx = static_cast<int>(plan_.nodes.size());
    for (int id : runtime_[i].in)
      if (id >= 0) plan_.values[static_cast<size_t>(id)].consumers.push_back(idx);
    for (int id : runtime_[i].out)
      if (id >= 0) plan_.values[static_cast<size_t>(id)].producer = idx;
    plan_.nodes.push_back(std::move(runtime_[i]));
  }
  return std::move(plan_);
}

}  // namespace

Plan build_plan(const Model& model, const std::vector<Shape>& input_shapes, const PlanOptions& options) {
  check_input_shapes(model, input_shapes);
  const uint64_t budget = options.max_memory ? options.max_memory : default_max_memory();
  YOLOCU_CHECK(model.opset >= kMinOpset && model.opset <= kMaxOpset, kUnsupported, "model opset ", model.opset,
               " is outside the range yolocu supports (", kMinOpset, "-", kMaxOpset, ")");
  PlanBuilder b(model, options, budget);
  b.bind_initializers();
  b.bind_inputs(input_shapes);
  for (const Node& node : model.graph.nodes) b.add_node(node);
  b.bind_outputs();
  return b.finish();
}

bool is_silu_pair(const Plan& plan, int conv_idx, int* sig_idx, int* mul_idx) {
  const PlanNode& c = plan.nodes[static_cast<size_t>(conv_idx)];
  const int cv = c.out[0];
  const auto& v = plan.values[static_cast<size_t>(cv)];
  if (v.graph_output || v.consumers.size() != 2) return false;
  int s = -1, m = -1;
  for (int k : v.consumers) {
    const auto& n = plan.nodes[static_cast<size_t>(k)].node;
    if (n.op_type == "Sigmoid") s = k;
    else if (n.op_type == "Mul") m = k;
  }
  if (s < 0 || m < 0) return false;
  const int sv = plan.nodes[static_cast<size_t>(s)].out[0];
  const auto& sval = plan.values[static_cast<size_t>(sv)];
  if (sval.graph_output || sval.consumers.size() != 1 || sval.consumers[0] != m) return false;
  const auto& mn = plan.nodes[static_cast<size_t>(m)];
  if (mn.in.size() != 2 || !((mn.in[0] == cv && mn.in[1] == sv) || (mn.in[0] == sv && mn.in[1] == cv))) return false;
  *sig_idx = s;
  *mul_idx = m;
  return true;
}

namespace {

struct TailMatcher {
  const Plan& plan;
  std::vector<int> nodes;

  const PlanValue& val(int id) const { return plan.values[static_cast<size_t>(id)]; }
  const PlanNode& node(int idx) const { return plan.nodes[static_cast<size_t>(idx)]; }
  bool runtime_f32(int id, size_t consumers = 1) const {
    if (id < 0) return false;
    const PlanValue& v = val(id);
    return !v.constant && !v.graph_input && !v.graph_output && v.producer >= 0 && v.dtype == DType::kFloat32 &&
           v.consumers.size() == consumers;
  }
  // Node producing `id` if it is an `op` and `id` has exactly one consumer; else -1.
  int producer(int id, const char* op) const {
    if (!runtime_f32(id)) return -1;
    return node(val(id).producer).node.op_type == op ? val(id).producer : -1;
  }
  // Binary node `idx` = op(runtime `*x`, fp32 constant `*c`) in either order (Mul and Add commute).
  bool with_constant(int idx, int* x, int* c, bool ordered = false) const {
    const PlanNode& n = node(idx);
    if (n.in.size() != 2 || n.out.size() != 1) return false;
    for (int k = 0; k < 2; ++k) {
      if (ordered && k == 1) break;
      const int a = n.in[static_cast<size_t>(k)], b = n.in[static_cast<size_t>(1 - k)];
      if (a >= 0 && b >= 0 && !val(a).constant && val(b).constant && val(b).dtype == DType::kFloat32) {
        *x = a;
        *c = b;
        return true;
      }
    }
    return false;
  }
  // The constant broadcast (numpy rules, batch dim 1) to [na, ny, nx, 2].
  static bool broadcast(const Tensor& t, int64_t na, int64_t ny, int64_t nx, std::vector<float>* out) {
    const Shape target{1, na, ny, nx, 2};
    const Shape& s = t.shape();
    if (s.size() > target.size() || t.dtype() != DType::kFloat32) return false;
    std::array<int64_t, 5> stride{};
    int64_t st = 1;
    for (size_t k = 0; k < s.size(); ++k) {
      const size_t d = s.size() - 1 - k, td = target.size() - 1 - k;
      if (s[d] != 1 && s[d] != target[td]) return false;
      stride[td] = s[d] == 1 ? 0 : st;
      st *= s[d];
    }
    const float* p = t.data_as<float>();
    out->resize(static_cast<size_t>(na * ny * nx * 2));
    size_t i = 0;
    for (int64_t a = 0; a < na; ++a)
      for (int64_t y = 0; y < ny; ++y)
        for (int64_t x = 0; x < nx; ++x)
          for (int64_t k = 0; k < 2; ++k)
            (*out)[i++] = p[a * stride[1] + y * stride[2] + x * stride[3] + k * stride[4]];
    return true;
  }
  static bool last_axis(const Node& n, int64_t rank) {
    const int64_t axis = n.attr_int("axis", 0);
    return axis == rank - 1 || axis == -1;
  }

  bool level(int value, DetectLevel* L) {
    const int r2 = producer(value, "Reshape");
    if (r2 < 0) return false;
    const int c1 = producer(node(r2).in[0], "Concat");
    if (c1 < 0 || !last_axis(node(c1).node, 5) || node(c1).in.size() != 3) return false;
    const int xy = node(c1).in[0], wh = node(c1).in[1], conf = node(c1).in[2];
    const int split = producer(conf, "Split");
    if (split < 0) return false;
    const PlanNode& sp = node(split);
    if (sp.out.size() != 3 || sp.out[2] != conf || !runtime_f32(sp.out[0]) || !runtime_f32(sp.out[1]) ||
        !last_axis(sp.node, 5))
      return false;
    int x = -1, c_anchor = -1, c_pow = -1, c_wh = -1, c_stride = -1, c_grid = -1, c_xy = -1;
    const int m7 = producer(wh, "Mul");
    if (m7 < 0 || !with_constant(m7, &x, &c_anchor)) return false;
    const int pw = producer(x, "Pow");
    if (pw < 0 || !with_constant(pw, &x, &c_pow, true) || val(c_pow).value.numel() != 1) return false;
    const int m6 = producer(x, "Mul");
    if (m6 < 0 || !with_constant(m6, &x, &c_wh) || x != sp.out[1]) return false;
    const int m5 = producer(xy, "Mul");
    if (m5 < 0 || !with_constant(m5, &x, &c_stride)) return false;
    const int add = producer(x, "Add");
    if (add < 0 || !with_constant(add, &x, &c_grid)) return false;
    const int m4 = producer(x, "Mul");
    if (m4 < 0 || !with_constant(m4, &x, &c_xy) || x != sp.out[0]) return false;
    const int sig = producer(sp.in[0], "Sigmoid");
    if (sig < 0) return false;
    const int tr = producer(node(sig).in[0], "Transpose");
    if (tr < 0 || node(tr).node.attr_ints("perm") != std::vector<int64_t>{0, 1, 3, 4, 2}) return false;
    const int r1 = producer(node(tr).in[0], "Reshape");
    if (r1 < 0) return false;
    const int conv = producer(node(r1).in[0], "Conv");
    if (conv < 0) return false;
    // shapes: conv [N, na*no, ny, nx] -> [N, na, no, ny, nx] -> [N, na, ny, nx, no] -> [N, na*ny*nx, no]
    const Shape& cs = val(node(conv).out[0]).shape;
    const Shape& rs = val(node(r1).out[0]).shape;
    const Shape& os = val(value).shape;
    if (cs.size() != 4 || rs.size() != 5 || os.size() != 3) return false;
    const int64_t n = cs[0], na = rs[1], no = rs[2], ny = rs[3], nx = rs[4];
    if (rs[0] != n || na * no != cs[1] || ny != cs[2] || nx != cs[3] || no <= 5) return false;
    if (os != Shape{n, na * ny * nx, no}) return false;
    const Shape part{n, na, ny, nx, 2};
    if (val(sp.out[0]).shape != part || val(sp.out[1]).shape != part ||
        val(sp.out[2]).shape != Shape{n, na, ny, nx, no - 4})
      return false;
    L->conv = conv;
    L->na = na;
    L->no = no;
    L->ny = ny;
    L->nx = nx;
    L->wh_pow = val(c_pow).value.data_as<float>()[0];
    if (!broadcast(val(c_xy).value, na, ny, nx, &L->xy_scale) || !broadcast(val(c_grid).value, na, ny, nx, &L->grid) ||
        !broadcast(val(c_stride).value, na, ny, nx, &L->stride) ||
        !broadcast(val(c_wh).value, na, ny, nx, &L->wh_scale) ||
        !broadcast(val(c_anchor).value, na, ny, nx, &L->anchor_grid))
      return false;
    for (int k : {r1, tr, sig, split, m4, add, m5, m6, pw, m7, c1, r2}) nodes.push_back(k);
    return true;
  }
};

}  // namespace

bool match_detect_head(const Plan& plan, int concat_idx, DetectHead* head) {
  const PlanNode& c = plan.nodes[static_cast<size_t>(concat_idx)];
  if (c.node.op_type != "Concat" || c.out.size() != 1 || c.out[0] < 0 || c.in.empty()) return false;
  const PlanValue& out = plan.values[static_cast<size_t>(c.out[0])];
  if (out.constant || out.dtype != DType::kFloat32 || out.shape.size() != 3) return false;
  const int64_t axis = c.node.attr_int("axis", 0);
  if (axis != 1 && axis != -2) return false;
  TailMatcher m{plan, {}};
  DetectHead h;
  h.concat = concat_idx;
  for (int v : c.in) {
    DetectLevel L;
    if (!m.level(v, &L)) return false;
    if (L.no != out.shape[2] || plan.values[static_cast<size_t>(v)].shape[0] != out.shape[0]) return false;
    L.row_begin = h.rows;
    h.rows += L.na * L.ny * L.nx;
    h.levels.push_back(std::move(L));
  }
  if (h.rows != out.shape[1]) return false;
  h.absorbed = std::move(m.nodes);
  h.absorbed.push_back(concat_idx);
  *head = std::move(h);
  return true;
}

std::vector<std::vector<int64_t>> resize_indices(const Plan& plan, const PlanNode& node) {
  std::vector<const Tensor*> args;
  for (int id : node.in)
    args.push_back(id >= 0 && plan.values[static_cast<size_t>(id)].constant ? &plan.values[static_cast<size_t>(id)].value
                                                                            : nullptr);
  return ops::resize_source_indices(node.node, plan.opset, plan.values[static_cast<size_t>(node.in[0])].shape, args);
}

std::vector<DetectHead> find_detect_heads(const Plan& plan) {
  std::vector<DetectHead> heads;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    DetectHead h;
    if (match_detect_head(plan, static_cast<int>(i), &h)) heads.push_back(std::move(h));
  }
  return heads;
}

int residual_add(const Plan& plan, int conv_idx, int y, int* x, bool ready_before) {
  const auto& yv = plan.values[static_cast<size_t>(y)];
  if (yv.graph_output || yv.consumers.size() != 1) return -1;
  const int add = yv.consumers[0];
  const PlanNode& a = plan.nodes[static_cast<size_t>(add)];
  if (a.node.op_type != "Add" || a.in.size() != 2 || a.out.size() != 1 || a.out[0] < 0) return -1;
  const int other = a.in[0] == y ? a.in[1] : a.in[1] == y ? a.in[0] : -1;
  if (other < 0 || other == y) return -1;
  const auto& xv = plan.values[static_cast<size_t>(other)];
  const auto& ov = plan.values[static_cast<size_t>(a.out[0])];
  if (xv.constant || xv.dtype != DType::kFloat32 || xv.shape != yv.shape || ov.shape != yv.shape) return -1;
  if (ready_before && !xv.graph_input && (xv.producer < 0 || xv.producer >= conv_idx)) return -1;
  *x = other;
  return add;
}

Model make_batch_dynamic(const Model& model) {
  Model m = model;
  if (m.graph.inputs.size() != 1 || m.graph.inputs[0].dims.empty() || !m.graph.inputs[0].dims[0].is_static()) return m;
  m.graph.inputs[0].dims[0] = Dim{-1, "batch"};
  for (auto& o : m.graph.outputs)
    if (!o.dims.empty()) o.dims[0] = Dim{-1, "batch"};
  std::unordered_map<std::string, Node*> producer;
  for (Node& n : m.graph.nodes)
    for (const auto& o : n.outputs) producer[o] = &n;
  auto patch = [](Tensor& t) {
    if (t.dtype() != DType::kInt64 || t.numel() < 1 || t.data_as<int64_t>()[0] != 1) return;
    t = t.clone();  // initializers may share storage with the original model
    t.data_as<int64_t>()[0] = 0;
  };
  for (Node& n : m.graph.nodes) {
    if (n.op_type != "Reshape" || n.inputs.size() < 2) continue;
    std::string name = n.inputs[1];
    for (int hop = 0; hop < 16; ++hop) {
      auto init = m.graph.initializers.find(name);
      if (init != m.graph.initializers.end()) {
        patch(init->second);
        break;
      }
      auto it = producer.find(name);
      if (it == producer.end()) break;
      Node* p = it->second;
      if (p->op_type == "Constant") {
        auto a = p->attributes.find("value");
        if (a != p->attributes.end() && a->second.kind == Attribute::Kind::kTensor) patch(a->second.t);
        break;
      }
      if (p->op_type != "Identity" || p->inputs.empty()) break;
      name = p->inputs[0];
    }
  }
  return m;
}

}  // namespace yolocu::engine

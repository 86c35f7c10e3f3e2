#include "engine/cuda/gpu_steps.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "engine/memory_plan.hpp"

namespace yolocu::engine {

const char* gpu_step_kind_name(GpuStepKind k) noexcept {
  switch (k) {
    case GpuStepKind::kConv: return "Conv";
    case GpuStepKind::kToNhwc: return "ToNhwc";
    case GpuStepKind::kToPlain: return "ToPlain";
    case GpuStepKind::kEltwiseNhwc: return "EltwiseNhwc";
    case GpuStepKind::kConcatNhwc: return "ConcatNhwc";
    case GpuStepKind::kMaxPool: return "MaxPool";
    case GpuStepKind::kSppf: return "Sppf";
    case GpuStepKind::kResize: return "Resize";
    case GpuStepKind::kUnary: return "Unary";
    case GpuStepKind::kBinary: return "Binary";
    case GpuStepKind::kGather: return "Gather";
    case GpuStepKind::kConcat: return "Concat";
    case GpuStepKind::kCopy: return "Copy";
    case GpuStepKind::kSplitNhwc: return "SplitNhwc";
    case GpuStepKind::kSoftmax: return "Softmax";
    case GpuStepKind::kMatMul: return "MatMul";
    case GpuStepKind::kView: return "View";
    case GpuStepKind::kDetectTail: return "DetectTail";
  }
  return "?";
}

namespace {

bool is_unary(const std::string& op) {
  return op == "Sigmoid" || op == "Relu" || op == "Exp" || op == "Sqrt" || op == "Floor" || op == "Ceil" ||
         op == "Neg" || op == "Abs";
}
bool is_binary(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Max" || op == "Min";
}

// SPPF (GpuStepOptions::fuse_sppf): Concat(x, p1, p2, p3) on channels, p1 = MaxPool(x), p2 =
// MaxPool(p1), p3 = MaxPool(p2), the same odd k x k pool with stride 1 and padding k / 2 each time,
// p1 and p2 read only by the next pool and the Concat, p3 only by the Concat, none a graph output,
// and the map small enough for the kernel (sppf_fits). Returns k and the pools' nodes in order,
// else 0.
int match_sppf(const Plan& plan, int concat, int pools[3]) {
  const PlanNode& cn = plan.nodes[static_cast<size_t>(concat)];
  if (cn.node.op_type != "Concat" || cn.in.size() != 4 || cn.out.size() != 1) return 0;
  const int64_t axis = cn.node.attr_int("axis", 0);
  auto val = [&](int id) -> const PlanValue& { return plan.values[static_cast<size_t>(id)]; };
  for (int id : cn.in)
    if (id < 0 || val(id).constant || val(id).shape.size() != 4) return 0;
  if (axis != 1 && axis != -3) return 0;
  int k = 0;
  for (int i = 1; i <= 3; ++i) {
    const PlanValue& v = val(cn.in[static_cast<size_t>(i)]);
    if (v.producer < 0 || v.graph_output) return 0;
    const PlanNode& pn = plan.nodes[static_cast<size_t>(v.producer)];
    const Node& n = pn.node;
    if (n.op_type != "MaxPool" || pn.in.empty() || pn.in[0] != cn.in[static_cast<size_t>(i - 1)]) return 0;
    if (pn.out.size() > 1 && pn.out[1] >= 0) return 0;
    const auto ks = n.attr_ints("kernel_shape", {});
    if (ks.size() != 2 || ks[0] != ks[1] || ks[0] % 2 == 0 || (k != 0 && ks[0] != k)) return 0;
    k = static_cast<int>(ks[0]);
    const int64_t h = k / 2;
    if (n.attr_ints("strides", {1, 1}) != std::vector<int64_t>({1, 1}) ||
        n.attr_ints("pads", {0, 0, 0, 0}) != std::vector<int64_t>({h, h, h, h}) ||
        n.attr_ints("dilations", {1, 1}) != std::vector<int64_t>({1, 1}) || n.attr_string("auto_pad", "NOTSET") != "NOTSET")
      return 0;
    const int next = i < 3 ? val(cn.in[static_cast<size_t>(i + 1)]).producer : -1;
    if (v.consumers.size() != (i < 3 ? 2u : 1u)) return 0;
    for (int c : v.consumers)
      if (c != concat && c != next) return 0;
    pools[i - 1] = v.producer;
  }
  const Shape& xs = val(cn.in[0]).shape;
  return sppf_fits(xs[2], xs[3]) ? k : 0;
}

// Copy-free Concat (GpuStepOptions::copy_free_concat): moves each eligible input of a channel
// Concat into its slice of the Concat's output buffer (root, channel offset, the output's pitch).
void place_concat_inputs(GpuStepPlan& sp, size_t es) {
  const Plan& plan = sp.plan;
  const size_t nv = plan.values.size();
  std::vector<int> readers(nv, 0), writer(nv, -1);
  for (size_t i = 0; i < sp.steps.size(); ++i) {
    const GpuStep& s = sp.steps[i];
    for (int id : s.in)
      if (id >= 0) ++readers[static_cast<size_t>(id)];
    for (int id : s.out)
      if (id >= 0) writer[static_cast<size_t>(id)] = static_cast<int>(i);
  }
  std::vector<bool> holds(nv, false);  // a Concat output with inputs placed in it
  const auto aligned = [&](int64_t channels) { return channels * static_cast<int64_t>(es) % 16 == 0; };
  for (const GpuStep& s : sp.steps) {
    if (s.kind != GpuStepKind::kConcatNhwc) continue;
    const size_t y = static_cast<size_t>(s.out[0]);
    const int64_t pitch = sp.channel_pitch[y];
    int64_t c0 = 0;
    for (int id : s.in) {
      const size_t v = static_cast<size_t>(id);
      const PlanValue& pv = plan.values[v];
      const int64_t c = pv.shape[1];
      const int w = writer[v];
      const GpuStepKind wk = w >= 0 ? sp.steps[static_cast<size_t>(w)].kind : GpuStepKind::kView;
      const bool ok = sp.root[y] == static_cast<int>(y) && sp.channel_offset[y] < 0 && pitch == plan.values[y].shape[1] &&
                      readers[v] == 1 && std::count(s.in.begin(), s.in.end(), id) == 1 && !pv.graph_output &&
                      !pv.graph_input && !pv.constant && !holds[v] && sp.root[v] == static_cast<int>(v) &&
                      sp.channel_pitch[v] == c && (wk == GpuStepKind::kConv || wk == GpuStepKind::kResize) &&
                      aligned(c0) && aligned(c) && aligned(pitch);
      if (ok) {
        sp.root[v] = static_cast<int>(y);
        sp.channel_offset[v] = c0;
        sp.channel_pitch[v] = pitch;
        holds[y] = true;
        ++sp.concat_inputs_in_place;
      } else {
        ++sp.concat_inputs_copied;
      }
      c0 += c;
    }
  }
}

}  // namespace

size_t value_bytes(const GpuStepPlan& sp, int value, size_t act_elem_size) {
  const auto& v = sp.plan.values[static_cast<size_t>(value)];
  const bool nhwc = sp.layout[static_cast<size_t>(value)] == Layout::kNhwc;
  const size_t es = nhwc ? act_elem_size : sizeof(float);
  size_t n = static_cast<size_t>(shape_numel(v.shape));
  const int64_t pitch = static_cast<size_t>(value) < sp.channel_pitch.size() ? sp.channel_pitch[static_cast<size_t>(value)] : 0;
  if (nhwc && pitch > 0 && v.shape.size() == 4 && v.shape[1] > 0 && pitch != v.shape[1])
    n = n / static_cast<size_t>(v.shape[1]) * static_cast<size_t>(pitch);
  return n * es;
}

GpuStepPlan plan_gpu_steps(Plan plan_in, const GpuStepOptions& options) {
  GpuStepPlan sp;
  sp.plan = std::move(plan_in);
  Plan& plan = sp.plan;
  auto val = [&](int id) -> PlanValue& { return plan.values[static_cast<size_t>(id)]; };

  for (const auto& v : plan.values)
    if (!v.constant)
      YOLOCU_CHECK(v.dtype == DType::kFloat32, kUnsupported, "GPU engine: value '", v.name, "' has type ",
                   dtype_name(v.dtype), " at run time (only float tensors are supported)");

  sp.layout.assign(plan.values.size(), Layout::kNone);
  for (int id : plan.inputs) {
    YOLOCU_CHECK(val(id).shape.size() == 4, kUnsupported, "GPU engine: input '", val(id).name,
                 "' must be rank 4 (N, C, H, W), got ", shape_str(val(id).shape));
    sp.layout[static_cast<size_t>(id)] = Layout::kNhwc;
  }

  std::vector<int> twin(plan.values.size(), -1);
  auto make_twin = [&](int id, Layout to) {
    if (sp.layout[static_cast<size_t>(id)] == to) return id;
    if (twin[static_cast<size_t>(id)] >= 0) return twin[static_cast<size_t>(id)];
    PlanValue pv = val(id);
    pv.name += to == Layout::kNhwc ? ":nhwc" : ":nchw";
    pv.graph_output = false;
    pv.graph_input = false;
    pv.consumers.clear();
    pv.producer = -1;
    plan.values.push_back(pv);
    sp.layout.push_back(to);
    twin.push_back(id);  // the twin's twin is the original
    const int t = static_cast<int>(plan.values.size()) - 1;
    twin[static_cast<size_t>(id)] = t;
    GpuStep r;
    r.kind = to == Layout::kNhwc ? GpuStepKind::kToNhwc : GpuStepKind::kToPlain;
    r.in = {id};
    r.out = {t};
    r.label = val(id).name + (to == Layout::kNhwc ? " -> nhwc" : " -> nchw");
    sp.steps.push_back(r);
    return t;
  };
  auto plain = [&](int id) {
    if (id < 0 || val(id).constant) return id;
    return make_twin(id, Layout::kPlain);
  };
  auto nhwc = [&](int id) {
    YOLOCU_CHECK(val(id).shape.size() == 4, kUnsupported, "GPU engine: value '", val(id).name,
                 "' feeds a convolution-type op but has shape ", shape_str(val(id).shape));
    YOLOCU_CHECK(!val(id).constant, kUnsupported, "GPU engine: constant '", val(id).name,
                 "' as the data input of a convolution-type op");
    return make_twin(id, Layout::kNhwc);
  };
  auto layout_of = [&](int id) { return id < 0 ? Layout::kNone : sp.layout[static_cast<size_t>(id)]; };

  std::vector<bool> absorbed(plan.nodes.size(), false);
  std::vector<int> head_at(plan.nodes.size(), -1);  // the merging Concat of a fused Detect tail
  if (options.fuse_detect_tail) sp.heads = find_detect_heads(plan);
  for (size_t k = 0; k < sp.heads.size(); ++k) {
    const DetectHead& h = sp.heads[k];
    for (int n : h.absorbed) absorbed[static_cast<size_t>(n)] = true;
    absorbed[static_cast<size_t>(h.concat)] = false;
    head_at[static_cast<size_t>(h.concat)] = static_cast<int>(k);
    sp.fused_tail_nodes += static_cast<int>(h.absorbed.size());
  }
  std::vector<int> sppf_at(plan.nodes.size(), 0);  // a fused SPPF's Concat: the pools' kernel size
  for (size_t i = 0; options.fuse_sppf && i < plan.nodes.size(); ++i) {
    int pools[3] = {-1, -1, -1};
    const int k = absorbed[i] ? 0 : match_sppf(plan, static_cast<int>(i), pools);
    if (k == 0 || absorbed[static_cast<size_t>(pools[0])] || absorbed[static_cast<size_t>(pools[1])] ||
        absorbed[static_cast<size_t>(pools[2])])
      continue;
    for (int p : pools) absorbed[static_cast<size_t>(p)] = true;
    sppf_at[i] = k;
    ++sp.fused_sppf;
  }
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    if (absorbed[i]) continue;
    const PlanNode& pn = plan.nodes[i];  // stays valid: only plan.values grows below
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

    if (head_at[i] >= 0) {
      s.kind = GpuStepKind::kDetectTail;
      s.head = head_at[i];
      s.in.clear();
      for (const DetectLevel& L : sp.heads[static_cast<size_t>(s.head)].levels) {
        const int cv = plan.nodes[static_cast<size_t>(L.conv)].out[0];
        YOLOCU_CHECK(layout_of(cv) == Layout::kNhwc, kInternal, "Detect tail: head convolution output '", val(cv).name,
                     "' is not NHWC");
        s.in.push_back(cv);
      }
      s.label = "DetectTail";
    } else if (sppf_at[i] > 0) {
      s.kind = GpuStepKind::kSppf;
      s.pool = sppf_at[i];
      s.in = {nhwc(pn.in[0])};
      s.label = "SPPF " + s.label;
      out_layout = Layout::kNhwc;
    } else if (op == "Conv") {
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
      ++sp.convs;
      int sig = -1, mul = -1;
      if (options.fuse_silu && engine::is_silu_pair(plan, static_cast<int>(i), &sig, &mul)) {
        absorbed[static_cast<size_t>(sig)] = absorbed[static_cast<size_t>(mul)] = true;
        s.silu = true;
        s.out = plan.nodes[static_cast<size_t>(mul)].out;
        ++sp.fused_silu;
        // Residual: the SiLU output's only consumer is Add(silu, r) with r ready, same shape, NHWC.
        int r = -1;
        const int a = options.fuse_residual ? engine::residual_add(plan, static_cast<int>(i), s.out[0], &r) : -1;
        if (a >= 0 && !absorbed[static_cast<size_t>(a)] && layout_of(r) == Layout::kNhwc) {
          absorbed[static_cast<size_t>(a)] = true;
          s.residual = r;
          s.out = plan.nodes[static_cast<size_t>(a)].out;
          ++sp.fused_residual;
        }
      }
      // Inputs the step reads: x, (weights / bias are constants), residual.
      s.in = {s.in[0], pn.in[1], pn.in.size() > 2 ? pn.in[2] : -1, s.residual};
      out_layout = Layout::kNhwc;
    } else if (is_unary(op) || is_binary(op)) {
      YOLOCU_CHECK(!is_binary(op) || pn.in.size() == 2, kUnsupported, pn.node.describe(), ": expects 2 inputs");
      bool nhwc_ok = y >= 0 && val(y).shape.size() == 4 && runtime_in.size() == pn.in.size();
      for (int id : runtime_in) nhwc_ok = nhwc_ok && layout_of(id) == Layout::kNhwc && val(id).shape == val(y).shape;
      if (nhwc_ok) {
        s.kind = GpuStepKind::kEltwiseNhwc;
        out_layout = Layout::kNhwc;
      } else {
        s.kind = is_unary(op) ? GpuStepKind::kUnary : GpuStepKind::kBinary;
        for (int& id : s.in) id = plain(id);
        YOLOCU_CHECK(val(y).shape.size() <= 6, kUnsupported, pn.node.describe(), ": rank ", val(y).shape.size(),
                     " > 6 is not supported on the GPU");
      }
    } else if (op == "Concat") {
      int64_t axis = pn.node.attr_int("axis", 0);
      const int64_t r = static_cast<int64_t>(val(y).shape.size());
      if (axis < 0) axis += r;
      bool nhwc_ok = axis == 1 && r == 4 && runtime_in.size() == pn.in.size();
      for (int id : runtime_in) nhwc_ok = nhwc_ok && layout_of(id) == Layout::kNhwc;
      if (nhwc_ok) {
        s.kind = GpuStepKind::kConcatNhwc;
        out_layout = Layout::kNhwc;
      } else {
        s.kind = GpuStepKind::kConcat;
        for (int& id : s.in) id = plain(id);
      }
    } else if (op == "MaxPool") {
      YOLOCU_CHECK(val(y).shape.size() == 4, kUnsupported, pn.node.describe(), ": only 2-D max pooling");
      YOLOCU_CHECK(pn.node.attr_ints("dilations", {1, 1}) == std::vector<int64_t>({1, 1}), kUnsupported,
                   pn.node.describe(), ": dilated max pooling is not supported on the GPU");
      YOLOCU_CHECK(pn.node.attr_string("auto_pad", "NOTSET") == "NOTSET", kUnsupported, pn.node.describe(),
                   ": auto_pad is not supported on the GPU");
      YOLOCU_CHECK(pn.out.size() == 1 || pn.out[1] < 0, kUnsupported, pn.node.describe(), ": Indices output");
      s.kind = GpuStepKind::kMaxPool;
      s.in = {nhwc(pn.in[0])};
      out_layout = Layout::kNhwc;
    } else if (op == "Resize" || op == "Upsample") {
      YOLOCU_CHECK(pn.node.attr_string("mode", "nearest") == "nearest", kUnsupported, pn.node.describe(),
                   ": only nearest resizing is supported on the GPU");
      const Shape& xs = val(pn.in[0]).shape;
      const Shape& ys = val(y).shape;
      YOLOCU_CHECK(xs.size() == 4 && ys.size() == 4 && xs[0] == ys[0] && xs[1] == ys[1], kUnsupported,
                   pn.node.describe(), ": only spatial resizing of rank-4 tensors is supported on the GPU");
      s.kind = GpuStepKind::kResize;
      s.in[0] = nhwc(pn.in[0]);
      out_layout = Layout::kNhwc;
    } else if (op == "Split" && layout_of(pn.in[0]) == Layout::kNhwc && val(pn.in[0]).shape.size() == 4 &&
               (pn.node.attr_int("axis", 0) == 1 || pn.node.attr_int("axis", 0) == -3)) {
      // A channel split of an NHWC value stays NHWC: one strided row copy per output.
      s.kind = GpuStepKind::kSplitNhwc;
      s.in = {pn.in[0]};
      for (size_t k = 0; k < pn.out.size(); ++k) {
        if (pn.out[k] < 0) continue;
        GpuStep g = s;
        g.out = {pn.out[k]};
        g.out_index = static_cast<int>(k);
        sp.layout[static_cast<size_t>(pn.out[k])] = Layout::kNhwc;
        sp.steps.push_back(g);
      }
      continue;
    } else if (op == "Softmax") {
      s.kind = GpuStepKind::kSoftmax;
      s.in = {plain(pn.in[0])};
      YOLOCU_CHECK(val(pn.in[0]).dtype == DType::kFloat32, kUnsupported, pn.node.describe(), ": float32 only on the GPU");
    } else if (op == "MatMul") {
      YOLOCU_CHECK(pn.in.size() == 2 && pn.in[0] >= 0 && pn.in[1] >= 0, kUnsupported, pn.node.describe(),
                   ": expects 2 inputs");
      YOLOCU_CHECK(val(pn.in[0]).shape.size() >= 2 && val(pn.in[1]).shape.size() >= 2 && val(y).shape.size() <= 6,
                   kUnsupported, pn.node.describe(), ": 1-D operands or rank > 6 are not supported on the GPU");
      s.kind = GpuStepKind::kMatMul;
      for (int& id : s.in) id = plain(id);
    } else if (op == "Transpose" || op == "Slice" || op == "Split") {
      s.kind = GpuStepKind::kGather;
      s.in[0] = plain(pn.in[0]);
      YOLOCU_CHECK(val(pn.in[0]).shape.size() <= 6, kUnsupported, pn.node.describe(), ": rank > 6");
      if (op == "Split") {
        // One gather step per output.
        for (size_t k = 0; k < pn.out.size(); ++k) {
          if (pn.out[k] < 0) continue;
          GpuStep g = s;
          g.out = {pn.out[k]};
          g.out_index = static_cast<int>(k);
          sp.layout[static_cast<size_t>(pn.out[k])] = Layout::kPlain;
          sp.steps.push_back(g);
        }
        continue;
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
      if (id >= 0) sp.layout[static_cast<size_t>(id)] = out_layout;
    sp.steps.push_back(std::move(s));
  }
  for (int& id : plan.outputs) {
    YOLOCU_CHECK(!val(id).constant && !val(id).graph_input, kUnsupported, "GPU engine: output '", val(id).name,
                 "' is a constant or an input");
    if (layout_of(id) == Layout::kNhwc) {
      const int t = plain(id);
      val(t).graph_output = true;
      id = t;
    }
  }

  // Channel pitches: a head convolution whose output only the fused Detect tail reads stores its
  // channels padded to a multiple of 8.
  const size_t nv = plan.values.size();
  sp.channel_pitch.assign(nv, 0);
  for (size_t v = 0; v < nv; ++v)
    if (sp.layout[v] == Layout::kNhwc && plan.values[v].shape.size() == 4) sp.channel_pitch[v] = plan.values[v].shape[1];
  if (options.pad_tail_channels) {
    std::vector<int> readers(nv, 0), tail_readers(nv, 0), conv_writer(nv, 0);
    for (const auto& s : sp.steps) {
      for (int id : s.in)
        if (id >= 0) {
          ++readers[static_cast<size_t>(id)];
          if (s.kind == GpuStepKind::kDetectTail) ++tail_readers[static_cast<size_t>(id)];
        }
      if (s.kind == GpuStepKind::kConv) ++conv_writer[static_cast<size_t>(s.out[0])];
    }
    for (size_t v = 0; v < nv; ++v)
      if (conv_writer[v] == 1 && readers[v] > 0 && readers[v] == tail_readers[v] && !plan.values[v].graph_output)
        sp.channel_pitch[v] = (sp.channel_pitch[v] + 7) / 8 * 8;
  }

  // Buffers: views alias their input (a chain resolves to the first real buffer).
  sp.root.resize(nv);
  for (size_t v = 0; v < nv; ++v) sp.root[v] = static_cast<int>(v);
  for (const auto& s : sp.steps)
    if (s.kind == GpuStepKind::kView) sp.root[static_cast<size_t>(s.out[0])] = sp.root[static_cast<size_t>(s.in[0])];
  sp.channel_offset.assign(nv, -1);
  if (options.copy_free_concat) place_concat_inputs(sp, options.act_elem_size);
  std::vector<int64_t> root_off(nv, 0);
  for (size_t v = 0; v < nv; ++v)
    if (sp.channel_offset[v] > 0) root_off[v] = sp.channel_offset[v] * static_cast<int64_t>(options.act_elem_size);
  std::vector<bool> is_const(nv);
  for (size_t v = 0; v < nv; ++v) is_const[v] = plan.values[v].constant;
  std::vector<std::vector<int>> step_values;
  for (const auto& s : sp.steps) {
    step_values.push_back(s.in);
    step_values.back().insert(step_values.back().end(), s.out.begin(), s.out.end());
  }
  const ValueArena arena = plan_value_arena(
      sp.root, root_off, is_const, step_values, plan.inputs, plan.outputs,
      [&](int v) { return value_bytes(sp, v, options.act_elem_size); }, options.alignment);
  sp.offset = arena.offset;
  sp.arena_bytes = arena.total_bytes;
  sp.naive_bytes = arena.naive_bytes;
  return sp;
}

}  // namespace yolocu::engine

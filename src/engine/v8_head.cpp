// The YOLOv8 / YOLO11 Detect tail matcher (engine/v8_head.hpp), walking back from the final Concat.
#include "engine/v8_head.hpp"

#include <cmath>
#include <string>

#include "engine/graph_pattern.hpp"

namespace yolocu::engine {
namespace {

class V8Matcher : GraphPattern {
 public:
  explicit V8Matcher(const Plan& plan) : GraphPattern(plan) {}

  bool match(int concat_idx, V8Head* head) {
    const PlanNode& c = node(concat_idx);
    if (c.node.op_type != "Concat" || c.in.size() != 2 || c.out.size() != 1 || !axis_is(c.node, 1, 3)) return false;
    const PlanValue& out = val(c.out[0]);
    if (out.constant || out.dtype != DType::kFloat32 || out.shape.size() != 3 || out.shape[1] <= 4) return false;
    n_ = out.shape[0];
    a_ = out.shape[2];
    V8Head h;
    h.concat = concat_idx;
    h.nc = out.shape[1] - 4;
    h.anchors = a_;
    const int sig = producer(c.in[1], "Sigmoid");
    if (sig < 0 || !shape_is(c.in[1], {n_, h.nc, a_}) || !shape_is(node(sig).in[0], {n_, h.nc, a_})) return false;
    if (!decode(c.in[0]) || !sources(box_logits_, node(sig).in[0], h.nc, &h.levels) || !grid_constants(&h.levels))
      return false;
    h.absorbed = std::move(nodes_);
    h.absorbed.push_back(sig);
    h.absorbed.push_back(concat_idx);
    *head = std::move(h);
    return true;
  }

 private:
  int64_t n_ = 0, a_ = 0;
  int box_logits_ = -1;  // the DFL's input [N, 64, A]
  const float *anchors_ = nullptr, *anchors2_ = nullptr, *strides_ = nullptr;  // decode's constants

  // A runtime fp32 value made by a node, no graph output, with exactly `consumers` readers.
  bool runtime_f32(int id, size_t consumers = 1) const {
    return GraphPattern::runtime_f32(id) && val(id).consumers.size() == consumers;
  }
  // The node producing `id` if it is an `op` with one output and `id` has `consumers` readers.
  int producer(int id, const char* op, size_t consumers = 1) const {
    if (!runtime_f32(id, consumers)) return -1;
    const PlanNode& p = node(val(id).producer);
    return p.node.op_type == op ? val(id).producer : -1;
  }
  // A float constant of `numel` values whose dims other than the last `keep` are 1.
  const float* constant(int id, int64_t numel, size_t keep) const {
    if (id < 0 || !val(id).constant || val(id).dtype != DType::kFloat32) return nullptr;
    const Tensor& t = val(id).value;
    if (t.numel() != numel || t.shape().size() < keep) return nullptr;
    for (size_t d = 0; d + keep < t.shape().size(); ++d)
      if (t.shape()[d] != 1) return nullptr;
    return t.data_as<float>();
  }
  // Integer constant values (int64 or int32) of input `k` of a node, empty if not there.
  std::vector<int64_t> ints(const PlanNode& pn, size_t k) const {
    std::vector<int64_t> v;
    if (k >= pn.in.size() || pn.in[k] < 0 || !val(pn.in[k]).constant) return v;
    const Tensor& t = val(pn.in[k]).value;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == DType::kInt64) v.push_back(t.data_as<int64_t>()[i]);
      else if (t.dtype() == DType::kInt32) v.push_back(t.data_as<int32_t>()[i]);
      else return {};
    }
    return v;
  }
  // Binary node `idx`: the runtime input and the constant one (either order unless `ordered`:
  // then the constant must come first when `const_first`, else second).
  bool split_binary(int idx, int* x, int* c, bool ordered = false, bool const_first = false) const {
    const PlanNode& n = node(idx);
    if (n.in.size() != 2 || n.out.size() != 1) return false;
    for (int k = 0; k < 2; ++k) {
      if (ordered && (k == 0) != !const_first) continue;  // k: the runtime input's position
      const int a = n.in[static_cast<size_t>(k)], b = n.in[static_cast<size_t>(1 - k)];
      if (a >= 0 && b >= 0 && !val(a).constant && val(b).constant) {
        *x = a;
        *c = b;
        return true;
      }
    }
    return false;
  }

  // Concat(Reshape(source_l) [N, channels, h_l * w_l] ..., axis 2) = `id`: the levels' sources
  // (runtime values [N, channels, h_l, w_l] read by their Reshape alone) as `box`, in order.
  bool levels(int id, int64_t channels, std::vector<V8Level>* out) {
    const int cat = producer(id, "Concat");
    if (cat < 0 || !axis_is(node(cat).node, 2, 3) || !shape_is(id, {n_, channels, a_})) return false;
    int64_t begin = 0;
    for (int v : node(cat).in) {
      const int r = producer(v, "Reshape");
      if (r < 0) return false;
      const int src = node(r).in[0];
      if (!runtime_f32(src)) return false;
      const Shape& cs = val(src).shape;
      if (cs.size() != 4 || cs[0] != n_ || cs[1] != channels || !shape_is(v, {n_, channels, cs[2] * cs[3]})) return false;
      V8Level L;
      L.box = src;
      L.ny = cs[2];
      L.nx = cs[3];
      L.anchor_begin = begin;
      begin += cs[2] * cs[3];
      out->push_back(L);
      nodes_.push_back(r);
    }
    nodes_.push_back(cat);
    return begin == a_ && !out->empty();
  }

  // The levels' sources of the box logits `box` [N, 64, A] and the class logits `cls` [N, nc, A]:
  // two Concats of per-level Reshapes, or the two outputs of one Split of a Concat of the levels'
  // concatenated [N, 64 + nc, h, w] values.
  bool sources(int box, int cls, int64_t nc, std::vector<V8Level>* out) {
    if (!runtime_f32(box) || !runtime_f32(cls) || !shape_is(box, {n_, 4 * kV8RegMax, a_}) || !shape_is(cls, {n_, nc, a_}))
      return false;
    const int split = val(box).producer;
    if (node(split).node.op_type == "Split") {
      const PlanNode& sp = node(split);
      if (sp.out.size() != 2 || sp.out[0] != box || sp.out[1] != cls || !axis_is(sp.node, 1, 3)) return false;
      nodes_.push_back(split);
      if (!levels(sp.in[0], 4 * kV8RegMax + nc, out)) return false;
      for (V8Level& L : *out) {
        L.cls = L.box;
        L.cls_channel = 4 * kV8RegMax;
      }
      return true;
    }
    std::vector<V8Level> classes;
    if (!levels(box, 4 * kV8RegMax, out) || !levels(cls, nc, &classes) || classes.size() != out->size()) return false;
    for (size_t l = 0; l < out->size(); ++l) {
      V8Level& L = (*out)[l];
      if (classes[l].ny != L.ny || classes[l].nx != L.nx) return false;
      L.cls = classes[l].box;
    }
    return true;
  }

  // The DFL: Reshape [N, 4, 16, A] -> Transpose -> Softmax -> Conv(0..15) -> Reshape [N, 4, A] = `id`.
  bool dfl(int id, size_t consumers) {
    const int r2 = producer(id, "Reshape", consumers);
    if (r2 < 0) return false;
    const int conv = producer(node(r2).in[0], "Conv");
    if (conv < 0 || !shape_is(node(r2).in[0], {n_, 1, 4, a_})) return false;
    const PlanNode& cn = node(conv);
    if (cn.in.size() < 2 || (cn.in.size() > 2 && cn.in[2] >= 0)) return false;  // no bias
    const Node& cv = cn.node;
    if (cv.attr_int("group", 1) != 1 || cv.attr_ints("strides", {1, 1}) != std::vector<int64_t>{1, 1} ||
        cv.attr_ints("pads", {0, 0, 0, 0}) != std::vector<int64_t>{0, 0, 0, 0} ||
        cv.attr_ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1} || cv.attr_string("auto_pad", "NOTSET") != "NOTSET")
      return false;
    const float* w = constant(cn.in[1], kV8RegMax, 4);
    if (w == nullptr || val(cn.in[1]).value.shape() != Shape{1, kV8RegMax, 1, 1}) return false;
    for (int64_t i = 0; i < kV8RegMax; ++i)
      if (w[i] != static_cast<float>(i)) return false;  // the expectation's projection, exactly
    const int sm = producer(cn.in[0], "Softmax");
    if (sm < 0 || plan_.opset < 13 || !axis_is(node(sm).node, 1, 4)) return false;  // opset < 13: flattened
    const int tr = producer(node(sm).in[0], "Transpose");
    if (tr < 0 || node(tr).node.attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3} ||
        !shape_is(node(sm).in[0], {n_, kV8RegMax, 4, a_}))
      return false;
    const int r1 = producer(node(tr).in[0], "Reshape");
    if (r1 < 0 || !shape_is(node(tr).in[0], {n_, 4, kV8RegMax, a_})) return false;
    for (int k : {r1, tr, sm, conv, r2}) nodes_.push_back(k);
    box_logits_ = node(r1).in[0];
    return true;
  }

  // lt and rb: channels [0, 2) and [2, 4) on axis 1 of the DFL output, by two Slices or one Split.
  bool distances(int lt, int rb) {
    if (!runtime_f32(lt) || !runtime_f32(rb) || !shape_is(lt, {n_, 2, a_}) || !shape_is(rb, {n_, 2, a_}))
      return false;
    const int pl = val(lt).producer, pr = val(rb).producer;
    const PlanNode &nl = node(pl), &nr = node(pr);
    if (pl == pr) {  // Split: outputs lt, rb on axis 1 (their shapes say [2, 2])
      if (nl.node.op_type != "Split" || nl.out.size() != 2 || nl.out[0] != lt || nl.out[1] != rb ||
          !axis_is(nl.node, 1, 3))
        return false;
      nodes_.push_back(pl);
      return dfl(nl.in[0], 1);
    }
    for (const PlanNode* s : {&nl, &nr}) {
      const std::vector<int64_t> axes = ints(*s, 3), steps = ints(*s, 4);
      if (s->node.op_type != "Slice" || s->in.size() < 4 || s->in[0] != nl.in[0] || axes.size() != 1 ||
          (axes[0] != 1 && axes[0] != -2) || (s->in.size() > 4 && steps != std::vector<int64_t>{1}))
        return false;
    }
    if (ints(nl, 1) != std::vector<int64_t>{0} || ints(nr, 1) != std::vector<int64_t>{2}) return false;
    nodes_.push_back(pl);
    nodes_.push_back(pr);
    return dfl(nl.in[0], 2);
  }

  // Concat((x1y1 + x2y2) / 2, x2y2 - x1y1, axis 1) * strides = `id` (the decoded boxes).
  bool decode(int id) {
    int x = -1, c = -1;
    const int mul = producer(id, "Mul");
    if (mul < 0 || !split_binary(mul, &x, &c) || !shape_is(id, {n_, 4, a_})) return false;
    const float* strides = constant(c, a_, 1);
    const int cat = producer(x, "Concat");
    if (strides == nullptr || cat < 0 || node(cat).in.size() != 2 || !axis_is(node(cat).node, 1, 3)) return false;
    const int div = producer(node(cat).in[0], "Div");
    const int sub = producer(node(cat).in[1], "Sub");
    if (div < 0 || sub < 0 || !split_binary(div, &x, &c, true, false)) return false;
    const float* two = constant(c, 1, 0);
    const int add = producer(x, "Add");
    if (two == nullptr || *two != 2.f || add < 0) return false;
    const int x1y1 = node(sub).in[1], x2y2 = node(sub).in[0];
    const std::vector<int>& ain = node(add).in;
    if (ain.size() != 2 || !((ain[0] == x1y1 && ain[1] == x2y2) || (ain[0] == x2y2 && ain[1] == x1y1))) return false;
    int lt = -1, rb = -1, c1 = -1, c2 = -1;
    const int s1 = producer(x1y1, "Sub", 2), a2 = producer(x2y2, "Add", 2);
    if (s1 < 0 || a2 < 0 || !split_binary(s1, &lt, &c1, true, true) || !split_binary(a2, &rb, &c2)) return false;
    const float* anchors = constant(c1, 2 * a_, 2);
    const float* anchors2 = constant(c2, 2 * a_, 2);
    if (anchors == nullptr || anchors2 == nullptr || val(c1).value.shape().back() != a_ ||
        val(c2).value.shape().back() != a_)
      return false;
    for (int k : {mul, cat, div, sub, add, s1, a2}) nodes_.push_back(k);
    anchors_ = anchors;
    anchors2_ = anchors2;
    strides_ = strides;
    return distances(lt, rb);
  }

  // The anchors (both copies) are every level's (x + 0.5, y + 0.5), the strides one positive
  // finite value per level; sets each level's stride.
  bool grid_constants(std::vector<V8Level>* levels) const {
    const float *anchors = anchors_, *anchors2 = anchors2_, *strides = strides_;
    for (V8Level& L : *levels) {
      const float s = strides[L.anchor_begin];
      if (!(s > 0.f) || !std::isfinite(s)) return false;
      L.stride = s;
      for (int64_t y = 0; y < L.ny; ++y)
        for (int64_t x = 0; x < L.nx; ++x) {
          const int64_t a = L.anchor_begin + y * L.nx + x;
          const float ax = static_cast<float>(x) + kV8AnchorOffset, ay = static_cast<float>(y) + kV8AnchorOffset;
          if (strides[a] != s || anchors[a] != ax || anchors[a_ + a] != ay || anchors2[a] != ax || anchors2[a_ + a] != ay)
            return false;
        }
    }
    return true;
  }
};

}  // namespace

bool match_v8_head(const Plan& plan, int concat_idx, V8Head* head) {
  if (concat_idx < 0 || concat_idx >= static_cast<int>(plan.nodes.size())) return false;
  return V8Matcher(plan).match(concat_idx, head);
}

std::vector<V8Head> find_v8_heads(const Plan& plan) {
  std::vector<V8Head> heads;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    V8Head h;
    if (match_v8_head(plan, static_cast<int>(i), &h)) heads.push_back(std::move(h));
  }
  return heads;
}

}  // namespace yolocu::engine

// The C2PSA attention matcher (engine/attention_block.hpp), walking forward from the qkv Reshape.
#include "engine/attention_block.hpp"

#include <cmath>
#include <string>

#include "engine/graph_pattern.hpp"

namespace yolocu::engine {
namespace {

class AttentionMatcher : GraphPattern {
 public:
  explicit AttentionMatcher(const Plan& plan) : GraphPattern(plan) {}

  bool match(int r0, AttentionBlock* block) {
    const PlanNode& rn = node(r0);
    if (rn.node.op_type != "Reshape" || rn.in.empty() || rn.out.size() != 1) return false;
    AttentionBlock a;
    a.qkv = rn.in[0];
    a.first = r0;
    if (a.qkv < 0 || val(a.qkv).constant || val(a.qkv).dtype != DType::kFloat32 || val(a.qkv).shape.size() != 4)
      return false;
    const Shape& qs = val(a.qkv).shape;
    const Shape& rs = val(rn.out[0]).shape;
    a.batch = qs[0];
    a.height = qs[2];
    a.width = qs[3];
    a.tokens = qs[2] * qs[3];
    if (rs.size() != 4 || rs[0] != a.batch || rs[1] <= 0 || rs[3] != a.tokens || rs[1] * rs[2] != qs[1]) return false;
    a.heads = rs[1];
    const int split = consumer(rn.out[0], "Split");
    if (split < 0) return false;
    const PlanNode& sp = node(split);
    if (sp.out.size() != 3 || !axis_is(sp.node, 2, 4)) return false;
    const int q = sp.out[0], k = sp.out[1], v = sp.out[2];
    a.key_dim = val(q).shape.size() == 4 ? val(q).shape[2] : 0;
    a.head_dim = val(v).shape.size() == 4 ? val(v).shape[2] : 0;
    if (a.key_dim <= 0 || a.head_dim <= 0 || 2 * a.key_dim + a.head_dim != rs[2] || !head_shape(q, a, a.key_dim) ||
        !head_shape(k, a, a.key_dim) || !head_shape(v, a, a.head_dim))
      return false;
    for (int id : {r0, split}) nodes_.push_back(id);
    int scores = -1;
    if (!scores_of(q, k, a, &scores)) return false;
    // Softmax over the keys, transposed, multiplied into v.
    const int sm = consumer(scores, "Softmax");
    if (sm < 0) return false;
    // The last axis (at opset < 13 too: the trailing axes from 3 are the last one).
    const int64_t axis = node(sm).node.attr_int("axis", plan_.opset >= 13 ? -1 : 1);
    if (axis != 3 && axis != -1) return false;
    const int tr = consumer(node(sm).out[0], "Transpose");
    if (tr < 0 || !perm_swaps_last(tr) || !shape_is(node(tr).out[0], {a.batch, a.heads, a.tokens, a.tokens})) return false;
    const int mm = consumer(node(tr).out[0], "MatMul");
    if (mm < 0 || node(mm).in.size() != 2 || node(mm).in[0] != v || node(mm).in[1] != node(tr).out[0]) return false;
    const int y = node(mm).out[0];
    const Shape image{a.batch, a.heads * a.head_dim, a.height, a.width};
    const int r1 = consumer(y, "Reshape");
    if (!shape_is(y, {a.batch, a.heads, a.head_dim, a.tokens}) || r1 < 0 || !image_out(r1, image)) return false;
    for (int id : {sm, tr, mm, r1}) nodes_.push_back(id);
    a.out = node(r1).out[0];
    // v: read by the second MatMul, and by pe's Reshape to the image (when there is one).
    const std::vector<int>& vr = val(v).consumers;
    if (vr.size() == 2) {
      const int r2 = vr[0] == mm ? vr[1] : vr[0];
      if ((vr[0] != mm && vr[1] != mm) || r2 == mm || node(r2).node.op_type != "Reshape" || node(r2).in[0] != v ||
          !image_out(r2, image))
        return false;
      a.v_image = node(r2).out[0];
      nodes_.push_back(r2);
    } else if (vr.size() != 1) {
      return false;
    }
    a.absorbed = std::move(nodes_);
    *block = std::move(a);
    return true;
  }

 private:
  // The only reader of `id` if it is an `op` (with one output, a Split with three) and `id` is a
  // runtime fp32 value.
  int consumer(int id, const char* op) const {
    if (!runtime_f32(id) || val(id).consumers.size() != 1) return -1;
    const int c = val(id).consumers[0];
    const size_t outs = std::string(op) == "Split" ? 3 : 1;
    return node(c).node.op_type == op && node(c).out.size() == outs ? c : -1;
  }
  bool head_shape(int id, const AttentionBlock& a, int64_t rows) const {
    return runtime_f32(id) && shape_is(id, {a.batch, a.heads, rows, a.tokens});
  }
  bool perm_swaps_last(int tr) const { return node(tr).node.attr_ints("perm") == std::vector<int64_t>{0, 1, 3, 2}; }
  // Reshape node `r` makes a runtime fp32 value of shape `image`, no graph output.
  bool image_out(int r, const Shape& image) const {
    const int o = node(r).out[0];
    return runtime_f32(o) && shape_is(o, image);
  }
  // Mul node `m`: one runtime input `x` and a scalar fp32 constant equal to kd^-0.5 (returned).
  bool scale_of(int m, int x, int64_t kd, float* scale) const {
    const PlanNode& n = node(m);
    if (n.in.size() != 2) return false;
    const int c = n.in[0] == x ? n.in[1] : n.in[1] == x ? n.in[0] : -1;
    if (c < 0 || c == x || !val(c).constant || val(c).dtype != DType::kFloat32 || val(c).value.numel() != 1) return false;
    const float s = val(c).value.data_as<float>()[0];
    const double want = 1.0 / std::sqrt(static_cast<double>(kd));
    if (!(std::fabs(s - want) <= 1e-6 * want)) return false;
    *scale = s;
    return true;
  }

  // q^T k * scale, as the export writes it (Mul on q, then Transpose and MatMul) or as the module
  // does (Transpose, MatMul, then Mul): sets `scores` to the value the Softmax reads.
  bool scores_of(int q, int k, AttentionBlock& a, int* scores) {
    const Shape sq{a.batch, a.heads, a.tokens, a.tokens};
    if (!runtime_f32(k) || val(k).consumers.size() != 1) return false;
    int x = q;
    const int mul0 = consumer(q, "Mul");
    if (mul0 >= 0) {
      if (!scale_of(mul0, q, a.key_dim, &a.scale)) return false;
      x = node(mul0).out[0];
      if (!head_shape(x, a, a.key_dim)) return false;
      nodes_.push_back(mul0);
    }
    const int tr = consumer(x, "Transpose");
    if (tr < 0 || !perm_swaps_last(tr) || !shape_is(node(tr).out[0], {a.batch, a.heads, a.tokens, a.key_dim})) return false;
    const int mm = consumer(node(tr).out[0], "MatMul");
    if (mm < 0 || node(mm).in.size() != 2 || node(mm).in[0] != node(tr).out[0] || node(mm).in[1] != k) return false;
    *scores = node(mm).out[0];
    if (!runtime_f32(*scores) || !shape_is(*scores, sq)) return false;
    nodes_.push_back(tr);
    nodes_.push_back(mm);
    if (mul0 >= 0) return true;
    const int mul1 = consumer(*scores, "Mul");
    if (mul1 < 0 || !scale_of(mul1, *scores, a.key_dim, &a.scale)) return false;
    *scores = node(mul1).out[0];
    nodes_.push_back(mul1);
    return runtime_f32(*scores) && shape_is(*scores, sq);
  }
};

}  // namespace

bool match_attention(const Plan& plan, int reshape_idx, AttentionBlock* block) {
  if (reshape_idx < 0 || reshape_idx >= static_cast<int>(plan.nodes.size())) return false;
  return AttentionMatcher(plan).match(reshape_idx, block);
}

std::vector<AttentionBlock> find_attention_blocks(const Plan& plan) {
  std::vector<AttentionBlock> blocks;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    AttentionBlock a;
    if (match_attention(plan, static_cast<int>(i), &a)) blocks.push_back(std::move(a));
  }
  return blocks;
}

}  // namespace yolocu::engine

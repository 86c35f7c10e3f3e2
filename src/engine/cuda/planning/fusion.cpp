// Planning pass: the fused Detect tails and SPPF blocks (planning/passes.hpp).
#include "core/check.hpp"
#include "engine/cuda/planning/passes.hpp"
#include "engine/attention.hpp"
#include "engine/v8_tail.hpp"

namespace yolocu::engine::planning {
namespace {

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

}  // namespace

Fusions find_fusions(GpuStepPlan& sp, const GpuStepOptions& options) {
  const Plan& plan = sp.plan;
  Fusions f;
  f.absorbed.assign(plan.nodes.size(), false);
  f.head_at.assign(plan.nodes.size(), -1);
  if (options.fuse_detect_tail) sp.heads = find_detect_heads(plan);
  for (size_t k = 0; k < sp.heads.size(); ++k) {
    const DetectHead& h = sp.heads[k];
    for (int n : h.absorbed) f.absorbed[static_cast<size_t>(n)] = true;
    f.absorbed[static_cast<size_t>(h.concat)] = false;
    f.head_at[static_cast<size_t>(h.concat)] = static_cast<int>(k);
    sp.fused_tail_nodes += static_cast<int>(h.absorbed.size());
  }
  f.v8_head_at.assign(plan.nodes.size(), -1);
  if (options.fuse_v8_tail)
    for (V8Head& h : find_v8_heads(plan)) {
      // The kernel takes the levels in one launch and the class scores of at least one pixel.
      bool free = v8tail::tile_pixels_for(h.nc) > 0 && h.levels.size() <= static_cast<size_t>(v8tail::kMaxLevels);
      for (int n : h.absorbed) free = free && !f.absorbed[static_cast<size_t>(n)];
      if (!free) continue;
      for (int n : h.absorbed) f.absorbed[static_cast<size_t>(n)] = true;
      f.absorbed[static_cast<size_t>(h.concat)] = false;
      f.v8_head_at[static_cast<size_t>(h.concat)] = static_cast<int>(sp.v8_heads.size());
      sp.fused_tail_nodes += static_cast<int>(h.absorbed.size());
      sp.v8_heads.push_back(std::move(h));
    }
  f.sppf_at.assign(plan.nodes.size(), 0);
  for (size_t i = 0; options.fuse_sppf && i < plan.nodes.size(); ++i) {
    int pools[3] = {-1, -1, -1};
    const int k = f.absorbed[i] ? 0 : match_sppf(plan, static_cast<int>(i), pools);
    if (k == 0 || f.absorbed[static_cast<size_t>(pools[0])] || f.absorbed[static_cast<size_t>(pools[1])] ||
        f.absorbed[static_cast<size_t>(pools[2])])
      continue;
    for (int p : pools) f.absorbed[static_cast<size_t>(p)] = true;
    f.sppf_at[i] = k;
    ++sp.fused_sppf;
  }
  f.attention_at.assign(plan.nodes.size(), -1);
  if (options.fuse_attention)
    for (AttentionBlock& a : find_attention_blocks(plan)) {
      // The head's keys and values must fit the block's shared memory.
      const int es = static_cast<int>(options.act_elem_size);
      bool free = a.tokens <= (int64_t{1} << 20) && attn::smem_bytes(static_cast<int>(a.key_dim), static_cast<int>(a.head_dim),
                                                                      static_cast<int>(a.tokens), es) <= options.attention_smem;
      for (int n : a.absorbed) free = free && !f.absorbed[static_cast<size_t>(n)];
      if (!free) continue;
      for (int n : a.absorbed) f.absorbed[static_cast<size_t>(n)] = true;
      f.absorbed[static_cast<size_t>(a.first)] = false;
      f.attention_at[static_cast<size_t>(a.first)] = static_cast<int>(sp.attention.size());
      sp.fused_attention_nodes += static_cast<int>(a.absorbed.size());
      sp.attention.push_back(std::move(a));
    }
  return f;
}

}  // namespace yolocu::engine::planning

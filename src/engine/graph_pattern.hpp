// What the fused-step matchers (v8_head.cpp, attention_block.cpp) read of a plan while they walk
// a pattern: values and nodes by index, the runtime fp32 test, shapes and axes. Host only.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/plan.hpp"

namespace yolocu::engine {

class GraphPattern {
 protected:
  explicit GraphPattern(const Plan& plan) : plan_(plan) {}

  const PlanValue& val(int id) const { return plan_.values[static_cast<size_t>(id)]; }
  const PlanNode& node(int idx) const { return plan_.nodes[static_cast<size_t>(idx)]; }
  // A runtime fp32 value made by a node, no graph input or output.
  bool runtime_f32(int id) const {
    if (id < 0) return false;
    const PlanValue& v = val(id);
    return !v.constant && !v.graph_input && !v.graph_output && v.producer >= 0 && v.dtype == DType::kFloat32;
  }
  bool shape_is(int id, const Shape& s) const { return val(id).shape == s; }
  // Node n's `axis` attribute (default 0) is `axis` of a rank-`rank` value, counted either way.
  static bool axis_is(const Node& n, int64_t axis, int64_t rank) {
    const int64_t a = n.attr_int("axis", 0);
    return a == axis || a == axis - rank;
  }

  const Plan& plan_;
  std::vector<int> nodes_;  // absorbed so far
};

}  // namespace yolocu::engine

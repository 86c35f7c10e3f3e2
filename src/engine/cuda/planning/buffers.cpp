// Planning passes on buffers (planning/passes.hpp): channel pitches, buffer roots and the copy-free
// Concat placement, the arena.
#include <algorithm>
#include <functional>
#include <utility>

#include "engine/cuda/planning/passes.hpp"
#include "engine/cuda/planning/step_graph.hpp"
#include "engine/memory_plan.hpp"

namespace yolocu::engine::planning {
namespace {

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

// GpuStepOptions::branch_arena: may root `earlier`'s buffer be reused by root `later`'s? Only if
// every step using the earlier is an ancestor, in the data dependencies alone, of every step using
// the later (so the reuse's ordering is implied already). A channel Concat counts here as waiting
// for every input's producer: counted by its copies alone, it may run before the producers of its
// in-place inputs, and its output buffer could then reuse none of their inputs' bytes (the arena
// grows, StepGraph.BranchArenaAddsNoEdge*). Where a Concat's bytes do follow a step it no longer
// waits for, the engine's accesses at the planned addresses order the two.
std::function<bool(int, int)> branch_sharing(const GpuStepPlan& sp, const std::vector<std::vector<int>>& step_values) {
  const std::vector<StepAccess> acc = root_accesses(sp, ConcatAccess::kEveryInput);
  std::vector<std::vector<bool>> anc;
  step_dependencies(acc, &anc);
  std::vector<std::vector<int>> users(sp.plan.values.size());  // per root: the launching steps using it
  for (size_t i = 0; i < step_values.size(); ++i) {
    if (!acc[i].launches) continue;
    for (int id : step_values[i])
      if (id >= 0) users[static_cast<size_t>(sp.root[static_cast<size_t>(id)])].push_back(static_cast<int>(i));
  }
  return [anc = std::move(anc), users = std::move(users)](int earlier, int later) {
    for (int t : users[static_cast<size_t>(later)])
      for (int s : users[static_cast<size_t>(earlier)])
        if (!anc[static_cast<size_t>(t)][static_cast<size_t>(s)]) return false;
    return true;
  };
}

}  // namespace

void plan_channel_pitches(GpuStepPlan& sp, const GpuStepOptions& options) {
  // A head convolution whose output only the fused Detect tail reads stores its channels padded to
  // a multiple of 8.
  const Plan& plan = sp.plan;
  const size_t nv = plan.values.size();
  sp.channel_pitch.assign(nv, 0);
  for (size_t v = 0; v < nv; ++v)
    if (sp.layout[v] == Layout::kNhwc && plan.values[v].shape.size() == 4) sp.channel_pitch[v] = plan.values[v].shape[1];
  if (!options.pad_tail_channels) return;
  std::vector<int> readers(nv, 0), tail_readers(nv, 0), conv_writer(nv, 0);
  for (const auto& s : sp.steps) {
    for (int id : s.in)
      if (id >= 0) {
        ++readers[static_cast<size_t>(id)];
        if (s.kind == GpuStepKind::kDetectTail || s.kind == GpuStepKind::kV8Tail) ++tail_readers[static_cast<size_t>(id)];
      }
    if (s.kind == GpuStepKind::kConv) ++conv_writer[static_cast<size_t>(s.out[0])];
  }
  for (size_t v = 0; v < nv; ++v)
    if (conv_writer[v] == 1 && readers[v] > 0 && readers[v] == tail_readers[v] && !plan.values[v].graph_output)
      sp.channel_pitch[v] = (sp.channel_pitch[v] + 7) / 8 * 8;
}

void plan_buffer_roots(GpuStepPlan& sp, const GpuStepOptions& options) {
  // Views alias their input (a chain resolves to the first real buffer).
  const size_t nv = sp.plan.values.size();
  sp.root.resize(nv);
  for (size_t v = 0; v < nv; ++v) sp.root[v] = static_cast<int>(v);
  for (const auto& s : sp.steps)
    if (s.kind == GpuStepKind::kView) sp.root[static_cast<size_t>(s.out[0])] = sp.root[static_cast<size_t>(s.in[0])];
  sp.channel_offset.assign(nv, -1);
  if (options.copy_free_concat) place_concat_inputs(sp, options.act_elem_size);
  if (options.copy_free_concat && options.channel_views) plan_channel_views(sp, options);
}

void plan_arena(GpuStepPlan& sp, const GpuStepOptions& options) {
  const Plan& plan = sp.plan;
  const size_t nv = plan.values.size();
  std::vector<int64_t> root_off(nv, 0);
  for (size_t v = 0; v < nv; ++v)
    if (sp.channel_offset[v] > 0)
      root_off[v] = sp.channel_offset[v] * (sp.layout[v] == Layout::kNhwcInt8 ? 1 : static_cast<int64_t>(options.act_elem_size));
  std::vector<bool> is_const(nv);
  for (size_t v = 0; v < nv; ++v) is_const[v] = plan.values[v].constant;
  std::vector<std::vector<int>> step_values;
  for (const auto& s : sp.steps) {
    step_values.push_back(s.in);
    step_values.back().insert(step_values.back().end(), s.out.begin(), s.out.end());
  }
  const ValueArena arena = plan_value_arena(
      sp.root, root_off, is_const, step_values, plan.inputs, plan.outputs,
      [&](int v) { return value_bytes(sp, v, options.act_elem_size); }, options.alignment,
      options.branch_arena ? branch_sharing(sp, step_values) : std::function<bool(int, int)>());
  sp.offset = arena.offset;
  sp.arena_bytes = arena.total_bytes;
  sp.naive_bytes = arena.naive_bytes;
}

}  // namespace yolocu::engine::planning

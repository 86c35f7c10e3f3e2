// Channel views (GpuStepOptions::channel_views; planning/passes.hpp): YOLOv8's C2f and YOLO11's
// C3k2 without copies. Runs after the copy-free Concat placement. For each channel Concat C that
// owns its buffer:
//   - a group of its consecutive inputs that are, in order, all the outputs of one channel Split
//     of a Conv's output u read only by that Split: u is written into C's buffer at the group's
//     channel offset, and each Split output becomes a view of its channels there (root, channel
//     offset, C's pitch); the Split's steps are removed;
//   - an input made by a Conv or a nearest Resize that other steps read too (a bottleneck's output
//     that the next bottleneck reads): written in its slice like a single-reader input.
// Then each channel Split left whose input is a Conv's output u read only by it: its outputs become
// views of u's own buffer (root u, their channel offsets, u's pitch) where every reader reads a
// pitch, a channel Concat copying them included (YOLO11's C2PSA: Split(cv1) -> a into the Concat,
// b into the attention block's qkv convolution and proj's residual); the Split's steps are removed.
// A value becomes a view only if every step reading it, C aside, is a Conv reading it as its input
// or residual (Conv tactics read pitched buffers: ConvProblem::xp / rp) or a nearest Resize (reads
// its input's pitch), and it is C's input once.
// Then a Concat step with every input in place does nothing and is removed. Plans without a channel
// Split step (YOLOv5) are left as they are.
#include <algorithm>
#include <utility>

#include "engine/cuda/planning/passes.hpp"

namespace yolocu::engine::planning {
namespace {

class ChannelViews {
 public:
  ChannelViews(GpuStepPlan& sp, size_t es) : sp_(sp), es_(static_cast<int64_t>(es)) {
    const size_t nv = sp.plan.values.size();
    readers_.assign(nv, {});
    writer_.assign(nv, -1);
    for (size_t i = 0; i < sp.steps.size(); ++i) {
      const GpuStep& s = sp.steps[i];
      for (size_t k = 0; k < s.in.size(); ++k)
        if (s.in[k] >= 0) readers_[static_cast<size_t>(s.in[k])].push_back({static_cast<int>(i), static_cast<int>(k)});
      for (int id : s.out)
        if (id >= 0) writer_[static_cast<size_t>(id)] = static_cast<int>(i);
    }
    removed_.assign(sp.steps.size(), false);
  }

  void run() {
    for (size_t i = 0; i < sp_.steps.size(); ++i)
      if (sp_.steps[i].kind == GpuStepKind::kConcatNhwc) place_inputs(static_cast<int>(i));
    for (size_t i = 0; i < sp_.steps.size(); ++i)
      if (sp_.steps[i].kind == GpuStepKind::kSplitNhwc && !removed_[i] && sp_.steps[i].out_index == 0)
        view_split_in_producer(static_cast<int>(i));
    remove_idle_concats();
    std::vector<GpuStep> kept;
    for (size_t i = 0; i < sp_.steps.size(); ++i)
      if (!removed_[i]) kept.push_back(std::move(sp_.steps[i]));
      else ++sp_.copy_steps_removed;
    sp_.steps = std::move(kept);
  }

 private:
  struct Use {
    int step, slot;  // the step reading the value, and which of its inputs
  };

  const PlanValue& val(int v) const { return sp_.plan.values[static_cast<size_t>(v)]; }
  int64_t channels(int v) const { return val(v).shape[1]; }
  bool aligned(int64_t c) const { return c * es_ % 16 == 0; }
  const GpuStep* writer_step(int v) const {
    const int w = writer_[static_cast<size_t>(v)];
    return w >= 0 ? &sp_.steps[static_cast<size_t>(w)] : nullptr;
  }

  // A runtime NHWC value that owns its unpadded buffer.
  bool owns_buffer(int v) const {
    const size_t i = static_cast<size_t>(v);
    const PlanValue& pv = val(v);
    return !pv.graph_output && !pv.graph_input && !pv.constant && sp_.layout[i] == Layout::kNhwc &&
           pv.shape.size() == 4 && sp_.root[i] == v && sp_.channel_offset[i] < 0 && sp_.channel_pitch[i] == pv.shape[1];
  }

  // Every reader of v is the Concat step `concat` (exactly once), a Conv reading v as its input
  // (slot 0) or residual (slot 3), or a nearest Resize reading it (slot 0): the kinds that read a
  // pitched input.
  bool readers_ok(int v, int concat) const {
    int in_concat = 0;
    for (const Use& u : readers_[static_cast<size_t>(v)]) {
      if (u.step == concat) {
        ++in_concat;
        continue;
      }
      if (!conv_or_resize_input(u)) return false;
    }
    return in_concat == 1;
  }

  // A Conv reading its input or residual, or a nearest Resize reading its input: they read a pitch.
  bool conv_or_resize_input(const Use& u) const {
    const GpuStepKind k = sp_.steps[static_cast<size_t>(u.step)].kind;
    return (k == GpuStepKind::kConv && (u.slot == 0 || u.slot == 3)) || (k == GpuStepKind::kResize && u.slot == 0);
  }

  // The input of Split step sw (any of its outputs' steps) when it is a Conv's output u that owns its
  // buffer and that only that Split's steps (one an output, none removed) read; else -1.
  int split_of_conv_output(const GpuStep& sw) const {
    const int u = sw.in[0];
    const GpuStep* uw = writer_step(u);
    const size_t parts = sp_.plan.nodes[static_cast<size_t>(sw.node)].out.size();
    if (parts < 1 || !uw || uw->kind != GpuStepKind::kConv || !owns_buffer(u) || readers_[static_cast<size_t>(u)].size() != parts)
      return -1;
    for (const Use& r : readers_[static_cast<size_t>(u)]) {
      const GpuStep& s = sp_.steps[static_cast<size_t>(r.step)];
      if (s.kind != GpuStepKind::kSplitNhwc || s.node != sw.node || removed_[static_cast<size_t>(r.step)]) return -1;
    }
    return u;
  }

  void place(int v, int y, int64_t c0) {
    const size_t i = static_cast<size_t>(v);
    sp_.root[i] = y;
    sp_.channel_offset[i] = c0;
    sp_.channel_pitch[i] = sp_.channel_pitch[static_cast<size_t>(y)];
  }

  // Inputs `in[at..]` of Concat step `concat` that are all the outputs of one channel Split, in
  // order; their count (0: not such a group, or it cannot be placed at channel c0 of y).
  size_t place_split_group(int concat, size_t at, int y, int64_t c0) {
    const std::vector<int>& in = sp_.steps[static_cast<size_t>(concat)].in;
    const GpuStep* sw = writer_step(in[at]);
    if (!sw || sw->kind != GpuStepKind::kSplitNhwc || sw->out_index != 0) return 0;
    const PlanNode& pn = sp_.plan.nodes[static_cast<size_t>(sw->node)];
    const size_t parts = pn.out.size();
    const int u = split_of_conv_output(*sw);
    if (u < 0 || at + parts > in.size()) return 0;
    int64_t total = 0;
    for (size_t k = 0; k < parts; ++k) {
      const int o = pn.out[k];
      if (o < 0 || in[at + k] != o || !owns_buffer(o) || !readers_ok(o, concat) || !aligned(channels(o))) return 0;
      total += channels(o);
    }
    if (total != channels(u) || !aligned(c0)) return 0;
    place(u, y, c0);
    int64_t start = c0;
    for (size_t k = 0; k < parts; ++k) {
      const int o = pn.out[k];
      place(o, y, start);
      start += channels(o);
      removed_[static_cast<size_t>(writer_[static_cast<size_t>(o)])] = true;
      ++sp_.channel_views;
    }
    sp_.concat_inputs_in_place += static_cast<int>(parts);
    sp_.concat_inputs_copied -= static_cast<int>(parts);
    return parts;
  }

  // An input made by a Conv or a nearest Resize that Convs read too.
  bool place_shared_input(int concat, int v, int y, int64_t c0) {
    const GpuStep* w = writer_step(v);
    if (!w || (w->kind != GpuStepKind::kConv && w->kind != GpuStepKind::kResize) || !owns_buffer(v) ||
        !readers_ok(v, concat) || !aligned(c0) || !aligned(channels(v)))
      return false;
    place(v, y, c0);
    ++sp_.concat_inputs_in_place;
    --sp_.concat_inputs_copied;
    return true;
  }

  // Every reader of v reads a pitched input: a Conv as its input or residual, a nearest Resize, or
  // a channel Concat (which copies an input that lives in another buffer with that buffer's pitch).
  bool readers_read_pitch(int v) const {
    for (const Use& u : readers_[static_cast<size_t>(v)])
      if (!conv_or_resize_input(u) && sp_.steps[static_cast<size_t>(u.step)].kind != GpuStepKind::kConcatNhwc) return false;
    return true;
  }

  // Split step `split` (its first output's) of a Conv's output u that only this Split reads: its
  // outputs as views of u's buffer, if every reader of each reads a pitch.
  void view_split_in_producer(int split) {
    const GpuStep& sw = sp_.steps[static_cast<size_t>(split)];
    const PlanNode& pn = sp_.plan.nodes[static_cast<size_t>(sw.node)];
    const int u = split_of_conv_output(sw);
    if (u < 0) return;
    int64_t total = 0;
    for (int o : pn.out) {
      if (o < 0 || !owns_buffer(o) || !readers_read_pitch(o) || !aligned(total) || !aligned(channels(o))) return;
      total += channels(o);
    }
    if (total != channels(u)) return;
    int64_t start = 0;
    for (int o : pn.out) {
      place(o, u, start);
      start += channels(o);
      removed_[static_cast<size_t>(writer_[static_cast<size_t>(o)])] = true;
      ++sp_.channel_views;
    }
  }

  void place_inputs(int concat) {
    const GpuStep& s = sp_.steps[static_cast<size_t>(concat)];
    const int y = s.out[0];
    const size_t yi = static_cast<size_t>(y);
    if (sp_.root[yi] != y || sp_.channel_offset[yi] >= 0 || sp_.channel_pitch[yi] != val(y).shape[1] ||
        !aligned(sp_.channel_pitch[yi]))
      return;
    int64_t c0 = 0;
    for (size_t k = 0; k < s.in.size();) {
      const int v = s.in[k];
      if (sp_.channel_offset[static_cast<size_t>(v)] >= 0) {  // placed already
        c0 += channels(v);
        ++k;
        continue;
      }
      if (const size_t parts = place_split_group(concat, k, y, c0)) {
        for (size_t j = 0; j < parts; ++j) c0 += channels(s.in[k + j]);
        k += parts;
        continue;
      }
      place_shared_input(concat, v, y, c0);
      c0 += channels(v);
      ++k;
    }
  }

  void remove_idle_concats() {
    for (size_t i = 0; i < sp_.steps.size(); ++i) {
      const GpuStep& s = sp_.steps[i];
      if (s.kind != GpuStepKind::kConcatNhwc) continue;
      const int y = s.out[0];
      const bool all = std::all_of(s.in.begin(), s.in.end(), [&](int v) {
        return sp_.channel_offset[static_cast<size_t>(v)] >= 0 && sp_.root[static_cast<size_t>(v)] == y;
      });
      if (all) removed_[i] = true;
    }
  }

  GpuStepPlan& sp_;
  int64_t es_;
  std::vector<std::vector<Use>> readers_;
  std::vector<int> writer_;
  std::vector<bool> removed_;
};

}  // namespace

void plan_channel_views(GpuStepPlan& sp, const GpuStepOptions& options) {
  // Only C2f / C3k2 graphs (a channel Split step): where there is none (YOLOv5) the neck's Concat
  // placements alone are not measured to gain, and the plan stays as copy-free Concat made it.
  const bool has_split = std::any_of(sp.steps.begin(), sp.steps.end(),
                                     [](const GpuStep& s) { return s.kind == GpuStepKind::kSplitNhwc; });
  if (!has_split) return;
  ChannelViews(sp, options.act_elem_size).run();
}

}  // namespace yolocu::engine::planning

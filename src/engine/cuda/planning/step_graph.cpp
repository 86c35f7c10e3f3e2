// The dependency edges between a forward's steps (step_graph.hpp).
#include "engine/cuda/planning/step_graph.hpp"

#include <algorithm>
#include <cstddef>

namespace yolocu::engine {
namespace {

bool overlap(const ByteRange& a, const ByteRange& b) {
  if (!(a.begin < b.end && b.begin < a.end && a.begin < a.end && b.begin < b.end)) return false;
  if (a.c0 < 0 || b.c0 < 0 || a.begin != b.begin || a.end != b.end || a.pitch != b.pitch) return true;
  return a.c0 < b.c1 && b.c0 < a.c1;
}

bool any_overlap(const std::vector<ByteRange>& a, const std::vector<ByteRange>& b) {
  for (const ByteRange& x : a)
    for (const ByteRange& y : b)
      if (overlap(x, y)) return true;
  return false;
}

// A set of step indices as bits.
class Bits {
 public:
  explicit Bits(size_t n) : w_((n + 63) / 64, 0) {}
  void set(size_t i) { w_[i / 64] |= uint64_t{1} << (i % 64); }
  bool test(size_t i) const { return (w_[i / 64] >> (i % 64)) & 1; }
  void merge(const Bits& o) {
    for (size_t k = 0; k < w_.size(); ++k) w_[k] |= o.w_[k];
  }

 private:
  std::vector<uint64_t> w_;
};

// Value id's channel slice of range r when it lives inside its root's NHWC buffer.
ByteRange sliced(const GpuStepPlan& sp, int id, ByteRange r) {
  const auto v = static_cast<size_t>(id);
  if (sp.channel_offset[v] < 0) return r;
  r.c0 = sp.channel_offset[v];
  r.c1 = r.c0 + sp.plan.values[v].shape[1];
  r.pitch = sp.channel_pitch[v];
  return r;
}

// A channel Concat step that owns its output buffer reads and writes only the inputs it copies
// (steps/concat_nhwc.cpp): those its producers wrote in place are theirs. Adds the copied inputs'
// ranges to a.reads and their slices of the output's range `whole` to a.writes; false (nothing
// added) for a Concat whose output is itself a slice of another buffer or has a padded pitch: it
// then counts as reading every input and writing its whole output.
template <typename Range>
bool concat_copies(const GpuStepPlan& sp, const GpuStep& st, const ByteRange& whole, const Range& range, StepAccess& a) {
  const auto y = static_cast<size_t>(st.out[0]);
  const int64_t pitch = sp.channel_pitch[y];
  if (sp.channel_offset[y] >= 0 || pitch != sp.plan.values[y].shape[1]) return false;
  int64_t c0 = 0;
  for (int id : st.in) {
    const int64_t c = sp.plan.values[static_cast<size_t>(id)].shape[1];
    if (!written_in_place(sp, id, st.out[0])) {  // copied: read, and written at c0
      range(id, a.reads);
      ByteRange r = whole;
      r.c0 = c0;
      r.c1 = c0 + c;
      r.pitch = pitch;
      a.writes.push_back(r);
    }
    c0 += c;
  }
  return true;
}

// Each step's reads (inputs, residual) and writes (outputs) through range(id, to).
template <typename Range>
std::vector<StepAccess> accesses(const GpuStepPlan& sp, ConcatAccess concat, const Range& range) {
  std::vector<StepAccess> acc(sp.steps.size());
  for (size_t i = 0; i < sp.steps.size(); ++i) {
    const GpuStep& st = sp.steps[i];
    acc[i].launches = st.kind != GpuStepKind::kView;
    if (concat == ConcatAccess::kCopiedInputs && st.kind == GpuStepKind::kConcatNhwc && st.out.size() == 1) {
      std::vector<ByteRange> whole;
      range(st.out[0], whole);
      if (whole.size() == 1 && concat_copies(sp, st, whole[0], range, acc[i])) continue;
    }
    for (int id : st.in) range(id, acc[i].reads);
    range(st.residual, acc[i].reads);
    for (int id : st.out) range(id, acc[i].writes);
  }
  return acc;
}

}  // namespace

bool steps_conflict(const StepAccess& earlier, const StepAccess& later) {
  return any_overlap(earlier.writes, later.reads) || any_overlap(earlier.writes, later.writes) ||
         any_overlap(earlier.reads, later.writes);
}

std::vector<StepAccess> value_accesses(const GpuStepPlan& sp, size_t act_elem_size, uintptr_t base) {
  return accesses(sp, ConcatAccess::kCopiedInputs, [&](int id, std::vector<ByteRange>& to) {
    if (id < 0 || sp.plan.values[static_cast<size_t>(id)].constant) return;
    const int r = sp.root[static_cast<size_t>(id)];
    const int64_t off = sp.offset[static_cast<size_t>(r)];
    if (off < 0) return;
    const uintptr_t b = base + static_cast<uintptr_t>(off);
    to.push_back(sliced(sp, id, {b, b + value_bytes(sp, r, act_elem_size)}));
  });
}

std::vector<StepAccess> root_accesses(const GpuStepPlan& sp, ConcatAccess concat) {
  return accesses(sp, concat, [&](int id, std::vector<ByteRange>& to) {
    if (id < 0 || sp.plan.values[static_cast<size_t>(id)].constant) return;
    const auto r = static_cast<uintptr_t>(sp.root[static_cast<size_t>(id)]);
    to.push_back(sliced(sp, id, {r, r + 1}));
  });
}

std::vector<std::vector<int>> step_dependencies(const std::vector<StepAccess>& steps,
                                               std::vector<std::vector<bool>>* ancestors) {
  const size_t n = steps.size();
  std::vector<std::vector<int>> deps(n);
  std::vector<Bits> before(n, Bits(n));  // every step a step waits for, directly or not
  for (size_t i = 0; i < n; ++i) {
    if (!steps[i].launches) continue;
    // the nearest conflicting steps first: a farther one they already wait for needs no edge
    for (size_t j = i; j-- > 0;) {
      if (!steps[j].launches || before[i].test(j) || !steps_conflict(steps[j], steps[i])) continue;
      deps[i].push_back(static_cast<int>(j));
      before[i].set(j);
      before[i].merge(before[j]);
    }
    std::sort(deps[i].begin(), deps[i].end());
  }
  if (ancestors) {
    ancestors->assign(n, std::vector<bool>(n, false));
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < i; ++j) (*ancestors)[i][j] = before[i].test(j);
  }
  return deps;
}

std::vector<int> longest_chain(const std::vector<std::vector<int>>& deps, const std::vector<StepAccess>& steps) {
  std::vector<int> depth(steps.size(), 0), from(steps.size(), -1);
  int last = -1;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].launches) continue;
    for (int j : deps[i])
      if (depth[static_cast<size_t>(j)] > depth[i]) depth[i] = depth[static_cast<size_t>(j)], from[i] = j;
    ++depth[i];
    if (last < 0 || depth[i] > depth[static_cast<size_t>(last)]) last = static_cast<int>(i);
  }
  std::vector<int> chain;
  for (int i = last; i >= 0; i = from[static_cast<size_t>(i)]) chain.push_back(i);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

int dependency_depth(const std::vector<std::vector<int>>& deps, const std::vector<StepAccess>& steps) {
  return static_cast<int>(longest_chain(deps, steps).size());
}

std::vector<int> workspace_slots(const std::vector<std::vector<bool>>& waits, const std::vector<size_t>& needs,
                                 std::vector<size_t>& capacity, int max_slots, bool grow) {
  std::vector<int> slot(needs.size(), -1);
  std::vector<std::vector<int>> users(capacity.size());  // per workspace, its steps so far
  for (size_t i = 0; i < needs.size(); ++i) {
    if (needs[i] == 0) continue;
    const auto fits = [&](size_t s) { return needs[i] <= capacity[s] || (grow && s > 0); };
    const auto free = [&](size_t s) {
      return std::all_of(users[s].begin(), users[s].end(), [&](int j) { return waits[i][static_cast<size_t>(j)]; });
    };
    int pick = -1;
    for (size_t s = 0; s < users.size() && pick < 0; ++s)
      if (fits(s) && free(s)) pick = static_cast<int>(s);
    if (pick < 0 && grow && static_cast<int>(users.size()) < max_slots) {
      pick = static_cast<int>(users.size());
      users.emplace_back();
      capacity.push_back(0);
    }
    if (pick < 0) {  // the fitting workspace whose last user came first (the first one fits every need)
      pick = 0;
      for (size_t s = 1; s < users.size(); ++s)
        if (fits(s) && !users[s].empty() && (users[pick].empty() || users[s].back() < users[static_cast<size_t>(pick)].back()))
          pick = static_cast<int>(s);
    }
    capacity[static_cast<size_t>(pick)] = std::max(capacity[static_cast<size_t>(pick)], needs[i]);
    users[static_cast<size_t>(pick)].push_back(static_cast<int>(i));
    slot[i] = pick;
  }
  return slot;
}

}  // namespace yolocu::engine

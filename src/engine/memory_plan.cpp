#include "engine/memory_plan.hpp"

#include <algorithm>
#include <numeric>

namespace yolocu::engine {

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, size_t alignment, const MayShare& may_share) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  auto align = [alignment](size_t v) { return (v + alignment - 1) / alignment * alignment; };
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const BufferRequest& r = requests[i];
    plan.naive_bytes += align(r.bytes);
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of conflicting buffers
    for (size_t j : placed) {
      const BufferRequest& q = requests[j];
      if (q.last < r.first && (!may_share || may_share(j, i))) continue;
      if (r.last < q.first && (!may_share || may_share(i, j))) continue;
      busy.emplace_back(plan.offsets[j], plan.offsets[j] + align(q.bytes));
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& b : busy) {
      if (offset + align(r.bytes) <= b.first) break;
      offset = std::max(offset, b.second);
    }
    plan.offsets[i] = offset;
    plan.total_bytes = std::max(plan.total_bytes, offset + align(r.bytes));
    placed.push_back(i);
  }
  return plan;
}

ValueArena plan_value_arena(const std::vector<int>& root, const std::vector<int64_t>& root_off,
                            const std::vector<bool>& is_const, const std::vector<std::vector<int>>& step_values,
                            const std::vector<int>& inputs, const std::vector<int>& outputs,
                            const std::function<size_t(int)>& bytes, size_t alignment,
                            const std::function<bool(int, int)>& may_share) {
  const size_t nv = root.size();
  const int nsteps = static_cast<int>(step_values.size());
  std::vector<int> first(nv, -2), last(nv, -2);
  auto touch = [&](int id, int step) {
    if (id < 0 || is_const[static_cast<size_t>(id)]) return;
    const size_t r = static_cast<size_t>(root[static_cast<size_t>(id)]);
    if (first[r] == -2 || step < first[r]) first[r] = step;
    last[r] = std::max(last[r], step);
  };
  for (int id : inputs) touch(id, -1);
  for (int i = 0; i < nsteps; ++i)
    for (int id : step_values[static_cast<size_t>(i)]) touch(id, i);
  for (int id : outputs) touch(id, nsteps);
  std::vector<BufferRequest> reqs;
  std::vector<int> req_of(nv, -1), root_of_req;
  for (size_t v = 0; v < nv; ++v) {
    if (root[v] != static_cast<int>(v) || first[v] == -2) continue;
    req_of[v] = static_cast<int>(reqs.size());
    root_of_req.push_back(static_cast<int>(v));
    reqs.push_back({bytes(static_cast<int>(v)), first[v] + 1, last[v] + 1});
  }
  MayShare share;
  if (may_share) share = [&](size_t a, size_t b) { return may_share(root_of_req[a], root_of_req[b]); };
  const MemoryPlan mp = plan_memory(reqs, alignment, share);
  ValueArena a;
  a.offset.assign(nv, -1);
  for (size_t v = 0; v < nv; ++v) {
    const int r = root[v];
    if (req_of[static_cast<size_t>(r)] >= 0)
      a.offset[v] = static_cast<int64_t>(mp.offsets[static_cast<size_t>(req_of[static_cast<size_t>(r)])]) +
                    (root_off.empty() ? 0 : root_off[v]);
  }
  a.total_bytes = mp.total_bytes;
  a.naive_bytes = mp.naive_bytes;
  return a;
}

}  // namespace yolocu::engine

#include "engine/memory_plan.hpp"

#include <algorithm>
#include <numeric>

namespace yolocu::engine {

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, size_t alignment) {
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
      if (q.last < r.first || r.last < q.first) continue;
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

}  // namespace yolocu::engine

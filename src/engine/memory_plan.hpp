// Activation memory planning: buffers whose lifetimes do not overlap share bytes of one arena.
#pragma once

#include <cstddef>
#include <vector>

namespace yolocu::engine {

struct BufferRequest {
  size_t bytes = 0;
  int first = 0;  // first step that writes it
  int last = 0;   // last step that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request, aligned
  size_t total_bytes = 0;       // arena size
  size_t naive_bytes = 0;       // sum of all requests (one buffer per value)
};

// Greedy best-fit by decreasing size (the TFLite / ORT arena strategy): each buffer goes to the
// lowest aligned offset that does not overlap a placed buffer with an overlapping lifetime.
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, size_t alignment = 64);

}  // namespace yolocu::engine

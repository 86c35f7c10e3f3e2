// Activation memory planning: buffers whose lifetimes do not overlap share bytes of one arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// May request `earlier` (its lifetime ends before `later`'s begins) share bytes with `later`?
// Empty: always (lifetimes alone decide).
using MayShare = std::function<bool(size_t earlier, size_t later)>;

// Greedy best-fit by decreasing size (the TFLite / ORT arena strategy): each buffer goes to the
// lowest aligned offset that does not overlap a placed buffer with an overlapping lifetime (or
// one may_share refuses).
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, size_t alignment = 64,
                       const MayShare& may_share = {});

// The activation arena of an engine's steps (both engines): value v lives in the buffer of value
// root[v], root_off[v] bytes into it (views, in-place slices; empty root_off: all 0). A root's
// buffer is live from the first step that reads or writes a value in it to the last; graph inputs
// from before step 0, graph outputs past the last step; constants and negative ids have none.
// bytes(r): size of root r's buffer. may_share (optional): by root ids, as plan_memory's.
struct ValueArena {
  std::vector<int64_t> offset;  // per value, -1: no buffer
  size_t total_bytes = 0;
  size_t naive_bytes = 0;
};
ValueArena plan_value_arena(const std::vector<int>& root, const std::vector<int64_t>& root_off,
                            const std::vector<bool>& is_const, const std::vector<std::vector<int>>& step_values,
                            const std::vector<int>& inputs, const std::vector<int>& outputs,
                            const std::function<size_t(int)>& bytes, size_t alignment,
                            const std::function<bool(int earlier_root, int later_root)>& may_share = {});

}  // namespace yolocu::engine

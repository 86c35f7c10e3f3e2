// The order a forward's steps must keep when they run as a graph of their data dependencies
// instead of one chain (CudaEngineOptions::graph_branches): host-side, no CUDA, unit-tested on the
// CPU. A step's accesses are byte ranges of one address space (device pointers: the activation
// arena, the workspace, the stem's input); two steps conflict when one writes a range the other
// reads or writes. Every conflicting pair stays ordered, through an edge or a chain of edges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/cuda/gpu_steps.hpp"

namespace yolocu::engine {

struct ByteRange {
  uintptr_t begin = 0, end = 0;  // [begin, end)
  // A channel slice of an NHWC buffer of `pitch` channels a pixel that spans [begin, end): only
  // channels [c0, c1) of each pixel (c0 < 0: every byte of the range). Two slices of the same
  // range and pitch with disjoint channels touch disjoint bytes.
  int64_t c0 = -1, c1 = -1, pitch = 0;
};

struct StepAccess {
  std::vector<ByteRange> reads, writes;
  bool launches = true;  // false: the step enqueues nothing (a view): no node, no edges
};

// The arena values each step of `sp` reads (its inputs, a convolution's residual) and writes (its
// outputs), each as its buffer root's range at arena address `base`, a value inside its root's
// NHWC buffer (a copy-free Concat input, a channel view) as its channel slice of it; constants
// (never written while the engine runs) and values without a buffer are left out. A channel
// Concat reads and writes only the inputs it copies (not those written in place by their
// producers, which then run beside it). Views (kView) launch nothing. The engine adds what
// only it knows (a tactic's workspace, the stem's input, steps launching nothing at a batch size).
std::vector<StepAccess> value_accesses(const GpuStepPlan& sp, size_t act_elem_size, uintptr_t base);

// How a channel Concat step's accesses are counted: only the inputs it copies (what it does), or
// every input read and its whole output written (as if it waited for every input's producer).
enum class ConcatAccess { kCopiedInputs, kEveryInput };

// The same accesses with every buffer root on a range of its own (as if no two roots shared
// memory): the steps' data dependencies alone, before the arena is planned.
std::vector<StepAccess> root_accesses(const GpuStepPlan& sp, ConcatAccess concat = ConcatAccess::kCopiedInputs);

// Must step `later` wait for step `earlier`? One writes bytes the other reads or writes.
bool steps_conflict(const StepAccess& earlier, const StepAccess& later);

// For each step, the earlier launching steps it must wait for directly: every earlier step whose
// accesses conflict with its own, less those another of them already waits for (the transitive
// reduction). Steps that launch nothing get none and are no one's. ancestors (optional):
// (*ancestors)[i][j] is whether step i waits for step j, directly or through others.
std::vector<std::vector<int>> step_dependencies(const std::vector<StepAccess>& steps,
                                               std::vector<std::vector<bool>>* ancestors = nullptr);

// The longest chain of launching steps through those edges (1 for one step, 0 for none): how many
// steps run one after the other at the least.
int dependency_depth(const std::vector<std::vector<int>>& deps, const std::vector<StepAccess>& steps);

// That chain's steps, first to last (the first of several equally long ones; empty for none): where
// a forward whose steps run as branches spends its time when each step is short (batch 1).
std::vector<int> longest_chain(const std::vector<std::vector<int>>& deps, const std::vector<StepAccess>& steps);

// Workspaces for steps that need scratch memory of their own while they run (a tactic's workspace),
// so that steps the data lets run side by side do not wait for each other through one shared
// buffer. waits: step_dependencies' ancestor sets of the steps' accesses without any workspace;
// needs[i]: the bytes step i needs (0: none, and for a step that launches nothing); capacity: the
// bytes of each workspace there is, the first (which fits every need) at least. Step i takes the
// first workspace that fits it and whose every earlier user it waits for already (through the
// data); else, with `grow`, a new one (up to max_slots; capacity grows to its users' largest need)
// or, without, the one whose last user came first (the shared bytes then add an edge). Returns
// each step's workspace (-1: none needed).
std::vector<int> workspace_slots(const std::vector<std::vector<bool>>& waits, const std::vector<size_t>& needs,
                                 std::vector<size_t>& capacity, int max_slots, bool grow);

}  // namespace yolocu::engine

// The dependency edges between the GPU engine's steps (planning/step_graph.hpp), host side: which
// steps the graph capture by branches lets run side by side, and that every conflicting pair of
// accesses stays ordered.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "engine/cuda/gpu_steps.hpp"
#include "engine/cuda/planning/step_graph.hpp"
#include "engine/plan.hpp"
#include "engine/v8_synth.hpp"
#include "test_util.hpp"
#include "yolocu/model.hpp"

namespace yolocu {
namespace {

using engine::ByteRange;
using engine::StepAccess;

StepAccess access(std::vector<ByteRange> reads, std::vector<ByteRange> writes, bool launches = true) {
  StepAccess a;
  a.reads = std::move(reads);
  a.writes = std::move(writes);
  a.launches = launches;
  return a;
}

// Is `to` reachable from `from` through the edges (deps[i]: the steps i waits for)?
bool ordered(const std::vector<std::vector<int>>& deps, int from, int to) {
  if (from == to) return true;
  for (int j : deps[static_cast<size_t>(to)])
    if (j >= from && ordered(deps, from, j)) return true;
  return false;
}

// Every pair of launching steps whose accesses conflict is ordered by a path of edges.
void expect_conflicts_ordered(const std::vector<StepAccess>& acc, const std::vector<std::vector<int>>& deps) {
  for (size_t j = 0; j < acc.size(); ++j)
    for (size_t i = 0; i < j; ++i) {
      if (!acc[i].launches || !acc[j].launches || !engine::steps_conflict(acc[i], acc[j])) continue;
      EXPECT_TRUE(ordered(deps, static_cast<int>(i), static_cast<int>(j))) << "steps " << i << " and " << j;
    }
}

TEST(StepGraph, ReadAfterWriteWriteAfterReadAndReduction) {
  const ByteRange r1{0, 100}, r2{100, 200}, r3{200, 300}, r4{300, 400};
  // 0 writes r1; 1 and 2 read it (side by side); 3 reads both their outputs; 4 overwrites r1
  // (after both readers, and so after 0 without an edge of its own); 5 reads r4 only.
  const std::vector<StepAccess> acc = {access({}, {r1}), access({r1}, {r2}), access({r1}, {r3}),
                                       access({r2, r3}, {r4}), access({}, {r1}), access({r4}, {})};
  const auto deps = engine::step_dependencies(acc);
  EXPECT_EQ(deps[0], std::vector<int>{});
  EXPECT_EQ(deps[1], std::vector<int>{0});
  EXPECT_EQ(deps[2], std::vector<int>{0});
  EXPECT_EQ(deps[3], (std::vector<int>{1, 2}));
  EXPECT_EQ(deps[4], (std::vector<int>{1, 2}));
  EXPECT_EQ(deps[5], std::vector<int>{3});
  EXPECT_EQ(engine::dependency_depth(deps, acc), 4);  // 0, 1, 3, 5
  EXPECT_EQ(engine::longest_chain(deps, acc), (std::vector<int>{0, 1, 3, 5}));  // the first of 0-1-3-5, 0-2-3-5
  expect_conflicts_ordered(acc, deps);
}

TEST(StepGraph, ReadersOfOneBufferAndStepsLaunchingNothing) {
  const ByteRange a{0, 64}, b{64, 128}, c{128, 192};
  // two readers of a never wait for each other; a step launching nothing (a view) gets no edge and
  // is nobody's; an empty range conflicts with nothing
  const std::vector<StepAccess> acc = {access({a}, {b}), access({a}, {c}), access({b}, {a}, false),
                                       access({ByteRange{10, 10}}, {ByteRange{70, 70}}), access({b, c}, {a})};
  const auto deps = engine::step_dependencies(acc);
  EXPECT_TRUE(deps[1].empty());
  EXPECT_TRUE(deps[2].empty());
  EXPECT_TRUE(deps[3].empty());
  EXPECT_EQ(deps[4], (std::vector<int>{0, 1}));
  EXPECT_EQ(engine::dependency_depth(deps, acc), 2);
  EXPECT_EQ(engine::longest_chain(deps, acc), (std::vector<int>{0, 4}));  // the view (2) is on no chain
  EXPECT_TRUE(engine::longest_chain({}, {}).empty());
}

// Channel slices of one NHWC buffer (copy-free Concat inputs, channel views): writers of disjoint
// channels run side by side; overlapping channels, another pitch, or the whole buffer wait.
TEST(StepGraph, ChannelSlicesOfOneBuffer) {
  const auto slice = [](int64_t c0, int64_t c1, int64_t pitch = 64) { return ByteRange{0, 4096, c0, c1, pitch}; };
  const ByteRange whole{0, 4096};
  const ByteRange x{8192, 9000};
  const std::vector<StepAccess> acc = {
      access({x}, {slice(0, 32)}),    // 0: the first half
      access({x}, {slice(32, 64)}),   // 1: the second half, beside 0
      access({x}, {slice(16, 48)}),   // 2: overlaps both
      access({x}, {slice(0, 16, 128)}),  // 3: another pitch over the same bytes
      access({whole}, {x}),           // 4: reads the whole buffer
  };
  const auto deps = engine::step_dependencies(acc);
  EXPECT_TRUE(deps[1].empty());
  EXPECT_EQ(deps[2], (std::vector<int>{0, 1}));
  EXPECT_EQ(deps[3], std::vector<int>{2});
  EXPECT_EQ(deps[4], std::vector<int>{3});
  expect_conflicts_ordered(acc, deps);
}

// A synthetic v8 head: the six level convolutions read the input and run side by side; the fused
// tail waits for all six.
TEST(StepGraph, V8HeadConvolutionsRunSideBySide) {
  test::SynthV8 o;
  engine::GpuStepOptions opt;
  opt.act_elem_size = 2;
  opt.fuse_v8_tail = true;
  const auto sp = engine::plan_gpu_steps(engine::build_plan(*test::synth_v8_head(o), {{2, 3, 64, 64}}), opt);
  const auto acc = engine::value_accesses(sp, 2, 4096);
  const auto deps = engine::step_dependencies(acc);
  expect_conflicts_ordered(acc, deps);
  int convs = 0, tails = 0;
  for (size_t i = 0; i < sp.steps.size(); ++i) {
    const auto kind = sp.steps[i].kind;
    if (kind == engine::GpuStepKind::kConv) {
      ++convs;
      for (int j : deps[i]) EXPECT_NE(sp.steps[static_cast<size_t>(j)].kind, engine::GpuStepKind::kConv) << "conv step " << i;
    } else if (kind == engine::GpuStepKind::kV8Tail) {
      ++tails;
      int conv_deps = 0;
      for (int j : deps[i]) conv_deps += sp.steps[static_cast<size_t>(j)].kind == engine::GpuStepKind::kConv;
      EXPECT_EQ(conv_deps, 6);
    }
  }
  EXPECT_EQ(convs, 6);
  EXPECT_EQ(tails, 1);
  int launching = 0;
  for (const auto& a : acc) launching += a.launches;
  EXPECT_EQ(engine::dependency_depth(deps, acc), launching - 5);
}

// The steps' accesses with each workspace user writing its workspace (workspace w at 1 MiB * (w + 1)).
std::vector<StepAccess> with_workspaces(std::vector<StepAccess> acc, const std::vector<size_t>& needs,
                                        const std::vector<int>& slot) {
  for (size_t i = 0; i < acc.size(); ++i)
    if (slot[i] >= 0) {
      const uintptr_t at = (uintptr_t{1} << 20) * static_cast<uintptr_t>(slot[i] + 1);
      acc[i].writes.push_back(ByteRange{at, at + needs[i]});
    }
  return acc;
}

int depth_of(const std::vector<StepAccess>& acc) { return engine::dependency_depth(engine::step_dependencies(acc), acc); }

// step_dependencies' ancestor sets (whether step i waits for step j).
std::vector<std::vector<bool>> waits_of(const std::vector<StepAccess>& acc) {
  std::vector<std::vector<bool>> waits;
  engine::step_dependencies(acc, &waits);
  return waits;
}

// Workspaces for graph branches: two convolutions side by side take two workspaces (the graph
// keeps the data's depth), one after the other share the first; the first fits every need, later
// ones grow to their users' largest only while they may; at most max_slots.
TEST(StepGraph, WorkspaceSlotsKeepBranchesApart) {
  const ByteRange in{0, 100}, a{100, 200}, b{200, 300}, c{300, 400}, out{400, 500};
  // 0 writes in; 1, 2 and 3 read it side by side (each with a workspace); 4 reads their outputs
  // and uses a workspace after all of them
  const std::vector<StepAccess> data = {access({}, {in}), access({in}, {a}), access({in}, {b}), access({in}, {c}),
                                        access({a, b, c}, {out})};
  const std::vector<size_t> needs = {0, 100, 300, 50, 400};
  const int data_depth = depth_of(data);
  EXPECT_EQ(data_depth, 3);

  std::vector<size_t> capacity = {1000};
  std::vector<int> slot = engine::workspace_slots(waits_of(data), needs, capacity, 4, true);
  EXPECT_EQ(slot, (std::vector<int>{-1, 0, 1, 2, 0}));  // step 4 waits for every user of the first
  EXPECT_EQ(capacity, (std::vector<size_t>{1000, 300, 50}));
  const auto acc = with_workspaces(data, needs, slot);
  EXPECT_EQ(depth_of(acc), data_depth);
  expect_conflicts_ordered(acc, engine::step_dependencies(acc));
  // one workspace: the three side-by-side steps one after the other
  EXPECT_EQ(depth_of(with_workspaces(data, needs, {-1, 0, 0, 0, 0})), 5);

  // at most two: step 3 shares the one whose last user came first (the first, step 1's)
  capacity = {1000};
  slot = engine::workspace_slots(waits_of(data), needs, capacity, 2, true);
  EXPECT_EQ(slot, (std::vector<int>{-1, 0, 1, 0, 0}));
  EXPECT_EQ(depth_of(with_workspaces(data, needs, slot)), 4);

  // no growing (a batch size derived after the build): a workspace too small for step 2 is passed
  // over, step 3's need fits the second
  capacity = {1000, 60};
  slot = engine::workspace_slots(waits_of(data), needs, capacity, 4, false);
  EXPECT_EQ(slot, (std::vector<int>{-1, 0, 0, 1, 0}));
  EXPECT_EQ(capacity, (std::vector<size_t>{1000, 60}));
  expect_conflicts_ordered(with_workspaces(data, needs, slot), engine::step_dependencies(with_workspaces(data, needs, slot)));

  // a chain shares the first throughout
  const std::vector<StepAccess> chain = {access({in}, {a}), access({a}, {b}), access({b}, {c})};
  capacity = {1000};
  EXPECT_EQ(engine::workspace_slots(waits_of(chain), {10, 20, 30}, capacity, 4, true), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(capacity.size(), 1u);
}

// yolov5n's real plan (its arena reuses buffers: a later step overwriting what an earlier one
// reads must wait for it): every conflicting pair ordered, and the Detect head's convolutions off
// the critical path.
TEST(StepGraph, Yolov5nPlanKeepsEveryConflictOrdered) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  const Model m = load_onnx(path);
  engine::GpuStepOptions opt;
  opt.act_elem_size = 2;
  opt.fuse_detect_tail = true;
  const auto sp = engine::plan_gpu_steps(engine::build_plan(m, {{4, 3, 640, 640}}), opt);
  const auto acc = engine::value_accesses(sp, 2, 1 << 20);
  const auto deps = engine::step_dependencies(acc);
  expect_conflicts_ordered(acc, deps);
  int launching = 0;
  for (const auto& a : acc) launching += a.launches;
  const int depth = engine::dependency_depth(deps, acc);
  std::printf("yolov5n: %d launching steps, longest chain %d\n", launching, depth);
  EXPECT_LE(depth, launching - 2);
}

// GpuStepOptions::branch_arena: buffers share memory only along the data dependencies, so the
// arena adds no edge: the graph's longest chain is that of the data alone (root_accesses), and
// every conflict of the planned arena is still ordered. Without it, reuse may lengthen the chain.
void expect_branch_arena_adds_no_edge(const Model& m, bool v8) {
  engine::GpuStepOptions opt;
  opt.act_elem_size = 2;
  opt.fuse_detect_tail = true;
  opt.fuse_v8_tail = v8;
  opt.fuse_attention = v8;
  opt.attention_smem = size_t{200} << 10;
  const auto plan = engine::build_plan(m, {{1, 3, 640, 640}});
  const auto chain_sp = engine::plan_gpu_steps(plan, opt);
  opt.branch_arena = true;
  const auto sp = engine::plan_gpu_steps(plan, opt);
  const auto data = engine::root_accesses(sp);
  const int data_depth = engine::dependency_depth(engine::step_dependencies(data), data);
  const auto acc = engine::value_accesses(sp, 2, 1 << 20);
  const auto deps = engine::step_dependencies(acc);
  expect_conflicts_ordered(acc, deps);
  const auto chain_acc = engine::value_accesses(chain_sp, 2, 1 << 20);
  const int chain_depth = engine::dependency_depth(engine::step_dependencies(chain_acc), chain_acc);
  int launching = 0;
  for (const auto& a : acc) launching += a.launches;
  std::printf("%d launching steps; longest chain: data %d, branch arena %d (%.1f MiB), plain arena %d (%.1f MiB)\n",
              launching, data_depth,
              engine::dependency_depth(deps, acc), sp.arena_bytes / 1048576.0, chain_depth, chain_sp.arena_bytes / 1048576.0);
  EXPECT_EQ(engine::dependency_depth(deps, acc), data_depth);
  EXPECT_LE(data_depth, chain_depth);
  EXPECT_GE(sp.arena_bytes, chain_sp.arena_bytes);
  EXPECT_LE(sp.arena_bytes, sp.naive_bytes);
  // A Concat written in place saves memory under the branch arena too: it is planned as if the
  // Concat waited for every input's producer, so the freedom of a Concat that runs beside them
  // never keeps buffers apart.
  opt.copy_free_concat = false;
  const auto copies_sp = engine::plan_gpu_steps(plan, opt);
  std::printf("branch arena with every Concat copying: %.1f MiB\n", copies_sp.arena_bytes / 1048576.0);
  EXPECT_LE(sp.arena_bytes, copies_sp.arena_bytes);
}

// A channel Concat reads and writes only the inputs it copies: it waits for an input's in-place
// producer only where one of its copied inputs depends on that producer (YOLO11's C2PSA: copying
// cv1's first half runs beside the attention branch that writes the second half; YOLOv5's neck:
// copying the backbone feature runs beside the Resize or convolution writing the rest), and every
// step reading the Concat's output waits for both.
void expect_concat_waits_only_for_what_it_copies(const Model& m, bool v8, int* concats_checked) {
  engine::GpuStepOptions opt;
  opt.act_elem_size = 2;
  opt.fuse_detect_tail = true;
  opt.fuse_v8_tail = opt.fuse_attention = v8;
  opt.attention_smem = size_t{200} << 10;
  opt.branch_arena = true;
  const auto sp = engine::plan_gpu_steps(engine::build_plan(m, {{1, 3, 640, 640}}), opt);
  const auto acc = engine::root_accesses(sp);
  std::vector<std::vector<bool>> anc;
  const auto deps = engine::step_dependencies(acc, &anc);
  expect_conflicts_ordered(acc, deps);
  std::vector<int> writer(sp.plan.values.size(), -1);
  for (size_t i = 0; i < sp.steps.size(); ++i)
    for (int id : sp.steps[i].out) writer[static_cast<size_t>(id)] = static_cast<int>(i);
  for (size_t c = 0; c < sp.steps.size(); ++c) {
    const auto& st = sp.steps[c];
    if (st.kind != engine::GpuStepKind::kConcatNhwc) continue;
    std::vector<int> placed, copied;  // producers of the inputs in place / copied
    for (int id : st.in) {
      (engine::written_in_place(sp, id, st.out[0]) ? placed : copied).push_back(writer[static_cast<size_t>(id)]);
    }
    if (placed.empty() || copied.empty()) continue;
    ++*concats_checked;
    for (int p : placed) {
      const auto pu = static_cast<size_t>(p);
      bool through_copied = false;
      for (int q : copied) through_copied = through_copied || q == p || (q > p && anc[static_cast<size_t>(q)][pu]);
      EXPECT_EQ(anc[c][pu], through_copied) << st.label << ": producer " << sp.steps[pu].label;
      for (size_t r = c + 1; r < sp.steps.size(); ++r)  // every reader of the output waits for both
        if (std::count(sp.steps[r].in.begin(), sp.steps[r].in.end(), st.out[0])) {
          EXPECT_TRUE(anc[r][c]) << sp.steps[r].label;
          EXPECT_TRUE(anc[r][pu]) << sp.steps[r].label;
        }
    }
  }
}

TEST(StepGraph, ConcatWaitsOnlyForWhatItCopies) {
  int checked = 0;
  expect_concat_waits_only_for_what_it_copies(load_onnx(test::data_file("models/yolov5n.onnx")), false, &checked);
  EXPECT_GT(checked, 0) << "yolov5n's neck: Concats with an input in place and one copied";
  YOLOCU_REQUIRE_V8(path, "yolo11n.onnx");
  checked = 0;
  expect_concat_waits_only_for_what_it_copies(load_onnx(path), true, &checked);
  EXPECT_GT(checked, 0) << "YOLO11's C2PSA Concat";
}

TEST(StepGraph, BranchArenaAddsNoEdgeYolov5n) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  expect_branch_arena_adds_no_edge(load_onnx(path), false);
}

TEST(StepGraph, BranchArenaAddsNoEdgeYolo11n) {
  YOLOCU_REQUIRE_V8(path, "yolo11n.onnx");
  expect_branch_arena_adds_no_edge(load_onnx(path), true);
}

TEST(StepGraph, BranchArenaAddsNoEdgeYolov8n) {
  YOLOCU_REQUIRE_V8(path, "yolov8n.onnx");
  expect_branch_arena_adds_no_edge(load_onnx(path), true);
}

}  // namespace
}  // namespace yolocu

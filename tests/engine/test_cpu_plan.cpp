// Host-side planning of the CPU engine (cpu_plan.hpp): the layouts each step reads, the arena, the
// fusions, for both block sizes, without running anything.
#include <gtest/gtest.h>

#include <map>

#include "engine/cpu/cpu_layout.hpp"
#include "engine/cpu/cpu_plan.hpp"
#include "engine/plan.hpp"
#include "test_util.hpp"
#include "yolocu/model.hpp"

namespace yolocu {
namespace {

using engine::cpu::CpuStepKind;
using engine::cpu::CpuStepPlan;

CpuStepPlan plan_for(const std::string& path, int block, bool fuse_head, int64_t batch = 1) {
  engine::cpu::CpuStepOptions o;
  o.block = block;
  o.fuse_detect_head = fuse_head;
  return engine::cpu::plan_cpu_steps(engine::build_plan(load_onnx(path), {{batch, 3, 640, 640}}), o);
}

// Every step reads the layout its kind runs on; every buffer lies inside the arena.
void check_consistent(const CpuStepPlan& sp) {
  auto layout = [&](int id) { return sp.blocked[static_cast<size_t>(id)]; };
  auto runtime = [&](int id) { return id >= 0 && !sp.plan.values[static_cast<size_t>(id)].constant; };
  for (const auto& s : sp.steps) {
    const char* kind = engine::cpu::cpu_step_kind_name(s.kind);
    switch (s.kind) {
      case CpuStepKind::kConv: EXPECT_NE(layout(s.in[0]), 2) << kind; break;  // a padded source gets a plain copy
      case CpuStepKind::kMaxPoolBlocked:
      case CpuStepKind::kResizeBlocked:
      case CpuStepKind::kSplitBlocked:
        EXPECT_EQ(layout(s.in[0]), 1) << kind;
        for (int id : s.out) EXPECT_EQ(layout(id), 1) << kind;
        break;
      case CpuStepKind::kReorder: EXPECT_NE(layout(s.in[0]) != 0, layout(s.out[0]) != 0) << kind; break;
      case CpuStepKind::kNode:
        for (int id : s.in)
          if (runtime(id) && layout(s.out[0]) == 0) {
            EXPECT_EQ(layout(id), 0) << kind << " node " << s.node;
          }
        break;
      default: break;
    }
  }
  for (int id : sp.plan.outputs) EXPECT_EQ(layout(id), 0);
  for (size_t v = 0; v < sp.plan.values.size(); ++v) {
    if (sp.offset[v] < 0) continue;
    EXPECT_LE(static_cast<size_t>(sp.offset[v]) + engine::cpu::cpu_value_bytes(sp, static_cast<int>(v)), sp.arena_bytes)
        << sp.plan.values[v].name;
    EXPECT_EQ(sp.offset[v] % 64, 0);
  }
  EXPECT_LT(sp.arena_bytes, sp.naive_bytes);
}

std::map<CpuStepKind, int> count_kinds(const CpuStepPlan& sp) {
  std::map<CpuStepKind, int> n;
  for (const auto& s : sp.steps) ++n[s.kind];
  return n;
}

TEST(CpuPlan, Yolov5nBothBlockSizes) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  for (int block : {16, 8}) {
    SCOPED_TRACE(block);
    const CpuStepPlan sp = plan_for(path, block, true);
    check_consistent(sp);
    auto n = count_kinds(sp);
    EXPECT_EQ(n[CpuStepKind::kConv], 60);
    EXPECT_EQ(n[CpuStepKind::kDetectHead], 1);
    EXPECT_EQ(n[CpuStepKind::kNode], 0) << "every op of yolov5n runs as a dedicated step";
    EXPECT_GT(n[CpuStepKind::kNoop], 0) << "channel Concats written in place";
    // 57 SiLU pairs (2 nodes each), 7 residual Adds, the Detect tail (3 levels x 12 + 1 - 1), and
    // one node per in-place Concat
    EXPECT_EQ(sp.fused_nodes, 57 * 2 + 7 + 36 + n[CpuStepKind::kNoop]);
  }
}

// YOLO11's C2PSA attention: its two MatMuls and the scores' last-axis Softmax run as oneDNN
// primitives; the DFL's Softmax over an inner axis (oneDNN's slow reference kernel there) stays the
// reference op, as does everything in YOLOv8n, which has no attention.
TEST(CpuPlan, Yolo11nAttentionOnOneDnn) {
  YOLOCU_REQUIRE_V8(path, "yolo11n.onnx");
  const CpuStepPlan sp = plan_for(path, 16, true);
  check_consistent(sp);
  auto n = count_kinds(sp);
  EXPECT_EQ(n[CpuStepKind::kMatMul], 2);
  EXPECT_EQ(n[CpuStepKind::kSoftmax], 1);
  int node_softmax = 0;
  for (const auto& s : sp.steps)
    node_softmax += s.kind == CpuStepKind::kNode && sp.plan.nodes[static_cast<size_t>(s.node)].node.op_type == "Softmax";
  EXPECT_EQ(node_softmax, 1) << "the DFL's";
  YOLOCU_REQUIRE_V8(v8, "yolov8n.onnx");
  auto m = count_kinds(plan_for(v8, 16, true));
  EXPECT_EQ(m[CpuStepKind::kMatMul] + m[CpuStepKind::kSoftmax], 0);
}

TEST(CpuPlan, DetectHeadNodeByNode) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  const CpuStepPlan sp = plan_for(path, 16, false, 2);
  check_consistent(sp);
  auto n = count_kinds(sp);
  EXPECT_EQ(n[CpuStepKind::kDetectHead], 0);
  EXPECT_EQ(n[CpuStepKind::kEltwise], 3) << "the heads' Sigmoids run as oneDNN's logistic";
  EXPECT_GT(n[CpuStepKind::kNode], 0);
  EXPECT_EQ(n[CpuStepKind::kNoop], 0) << "batch 2: no Concat in place";
}

// The planner's buffer size of a blocked value is oneDNN's (the padded channels included).
TEST(CpuPlan, BlockedBytesAreOneDnnBytes) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  const int block = engine::cpu::block_size();
  const CpuStepPlan sp = plan_for(path, block, true);
  int blocked = 0, padded = 0;
  for (size_t v = 0; v < sp.plan.values.size(); ++v) {
    if (!sp.blocked[v]) continue;
    ++blocked;
    padded += sp.blocked[v] == 2;
    EXPECT_EQ(engine::cpu::cpu_value_bytes(sp, static_cast<int>(v)),
              engine::cpu::act_md(sp.plan.values[v].shape, true).get_size())
        << sp.plan.values[v].name;
  }
  EXPECT_GT(blocked, 50);
  EXPECT_EQ(padded, 3) << "the three 255-channel head convolutions";
}

}  // namespace
}  // namespace yolocu

// The Detect-head tail matcher (engine::match_detect_head) on the shared exports, and the CPU
// engine's fused Detect step against the node-by-node execution of the same graph.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/engine_test_util.hpp"
#include "engine/plan.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;
using engine::DetectHead;

namespace {

// The Concat whose output is the model's first output, or -1.
int output_concat(const engine::Plan& plan) {
  const int v = plan.outputs[0];
  const int p = plan.values[static_cast<size_t>(v)].producer;
  return p >= 0 && plan.nodes[static_cast<size_t>(p)].node.op_type == "Concat" ? p : -1;
}

int count_matches(const engine::Plan& plan) {
  int n = 0;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    DetectHead h;
    if (engine::match_detect_head(plan, static_cast<int>(i), &h)) ++n;
  }
  return n;
}

// What ultralytics' yolov5n / yolov5s (models/*.yaml, v7.0) define: strides 8/16/32, anchors
// P3 10,13 16,30 33,23; P4 30,61 62,45 59,119; P5 116,90 156,198 373,326 (pixels); the export's
// grid is (x - 0.5, y - 0.5) and the tail is (2s + grid) * stride, (2s)^2 * anchor.
void expect_yolov5_head(const DetectHead& h, int64_t size) {
  static const float kAnchors[3][6] = {{10, 13, 16, 30, 33, 23}, {30, 61, 62, 45, 59, 119}, {116, 90, 156, 198, 373, 326}};
  ASSERT_EQ(h.levels.size(), 3u);
  int64_t row = 0;
  for (size_t l = 0; l < 3; ++l) {
    SCOPED_TRACE("level " + std::to_string(l));
    const engine::DetectLevel& L = h.levels[l];
    const float stride = static_cast<float>(8 << l);
    const int64_t g = size / (8 << l);
    EXPECT_EQ(L.na, 3);
    EXPECT_EQ(L.no, 85);
    EXPECT_EQ(L.ny, g);
    EXPECT_EQ(L.nx, g);
    EXPECT_EQ(L.row_begin, row);
    EXPECT_EQ(L.wh_pow, 2.f);
    row += 3 * g * g;
    int bad = 0;
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t y = 0; y < g; ++y)
        for (int64_t x = 0; x < g; ++x)
          for (int64_t k = 0; k < 2; ++k) {
            const size_t i = static_cast<size_t>(((a * g + y) * g + x) * 2 + k);
            const float grid = static_cast<float>(k == 0 ? x : y) - 0.5f;
            bad += L.xy_scale[i] != 2.f || L.wh_scale[i] != 2.f || L.stride[i] != stride || L.grid[i] != grid ||
                   L.anchor_grid[i] != kAnchors[l][2 * a + k];
          }
    EXPECT_EQ(bad, 0) << "constants differ from ultralytics' grid / anchors";
  }
  EXPECT_EQ(h.rows, row);
  EXPECT_EQ(h.absorbed.size(), 3u * 12u + 1u);
}

std::shared_ptr<Model> load(const std::string& path) { return std::make_shared<Model>(load_onnx(path)); }

// Fused and node-by-node runs of the same model: the same float operations in the same order,
// except that the sigmoid runs as the convolution's post-op instead of a separate oneDNN
// eltwise; relative L2 <= 1e-7 and every element within 1e-6 + 1e-6 * |value|.
void expect_fused_equals_unfused(const std::string& path, const Tensor& x) {
  CpuEngineOptions off;
  off.fuse_detect_head = false;
  const auto model = load(path);
  CpuEngine fused(model), plain(model, off);
  const auto a = fused.run({x}), b = plain.run({x});
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a[0].shape(), b[0].shape());
  EXPECT_TRUE(test::close_to(a[0], b[0], 1e-6, 1e-6, 1e-7));
  EXPECT_EQ(fused.stats().fused_nodes - plain.stats().fused_nodes, 36) << "12 tail nodes x 3 levels + the Concat";
  EXPECT_LT(fused.stats().runtime_nodes, plain.stats().runtime_nodes);
  std::printf("%s %s: fused vs node-by-node %s\n", path.substr(path.find_last_of('/') + 1).c_str(),
              shape_str(x.shape()).c_str(),
              std::memcmp(a[0].data(), b[0].data(), a[0].nbytes()) == 0 ? "bit-identical" : "not bit-identical");
}

}  // namespace

TEST(DetectHead, MatchesTheStaticExport) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  const Model m = load_onnx(path);
  const engine::Plan plan = engine::build_plan(m, {{1, 3, 640, 640}});
  const int c = output_concat(plan);
  ASSERT_GE(c, 0);
  DetectHead h;
  ASSERT_TRUE(engine::match_detect_head(plan, c, &h));
  expect_yolov5_head(h, 640);
  EXPECT_EQ(count_matches(plan), 1);
}

TEST(DetectHead, MatchesTheDynamicExportAtAnyShape) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  const Model m = load_onnx(path);
  for (const Shape& s : {Shape{1, 3, 640, 640}, Shape{2, 3, 320, 320}}) {
    SCOPED_TRACE(shape_str(s));
    const engine::Plan plan = engine::build_plan(m, {s});  // the grid subgraph folds to constants
    DetectHead h;
    ASSERT_TRUE(engine::match_detect_head(plan, output_concat(plan), &h));
    expect_yolov5_head(h, s[2]);
  }
}

TEST(DetectHead, MatchesTheFp16ExportComputedInFp32) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5s_random_fp16.onnx");
  const engine::Plan plan = engine::build_plan(load_onnx(path), {{1, 3, 640, 640}});  // fp16_as_fp32
  DetectHead h;
  ASSERT_TRUE(engine::match_detect_head(plan, output_concat(plan), &h));
  expect_yolov5_head(h, 640);
  engine::PlanOptions native;
  native.fp16_as_fp32 = false;  // fp16 values: not this fp32 pattern
  EXPECT_EQ(count_matches(engine::build_plan(load_onnx(path), {{1, 3, 640, 640}}, native)), 0);
}

TEST(DetectHead, RefusesWhatIsNotTheTail) {
  YOLOCU_REQUIRE_DATA(raw, "models/yolov5n_raw_heads.onnx");
  EXPECT_EQ(count_matches(engine::build_plan(load_onnx(raw), {{1, 3, 640, 640}})), 0) << "raw heads have no tail";

  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  const engine::Plan base = engine::build_plan(load_onnx(path), {{1, 3, 640, 640}});
  DetectHead h;
  ASSERT_TRUE(engine::match_detect_head(base, output_concat(base), &h));
  // Each mutation of one node or value on the pattern must make the whole head fall back.
  const auto by_name = [&](const engine::Plan& p, const std::string& op, int nth) {
    int seen = 0;
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (p.nodes[i].node.op_type == op && p.nodes[i].node.name.find("model.24") != std::string::npos && seen++ == nth)
        return static_cast<int>(i);
    return -1;
  };
  {
    engine::Plan p = base;  // an intermediate that is also a graph output
    const int sig = by_name(p, "Sigmoid", 1);
    ASSERT_GE(sig, 0);
    p.values[static_cast<size_t>(p.nodes[static_cast<size_t>(sig)].out[0])].graph_output = true;
    EXPECT_FALSE(engine::match_detect_head(p, output_concat(p), &h));
  }
  {
    engine::Plan p = base;  // another permutation
    const int tr = by_name(p, "Transpose", 2);
    ASSERT_GE(tr, 0);
    p.nodes[static_cast<size_t>(tr)].node.attributes.at("perm").ints = {0, 1, 3, 2, 4};
    EXPECT_FALSE(engine::match_detect_head(p, output_concat(p), &h));
  }
  {
    engine::Plan p = base;  // a second consumer of a Split output
    const int sp = by_name(p, "Split", 0);
    ASSERT_GE(sp, 0);
    p.values[static_cast<size_t>(p.nodes[static_cast<size_t>(sp)].out[2])].consumers.push_back(0);
    EXPECT_FALSE(engine::match_detect_head(p, output_concat(p), &h));
  }
  {
    engine::Plan p = base;  // Pow's exponent and base swapped (not commutative)
    const int pw = by_name(p, "Pow", 0);
    ASSERT_GE(pw, 0);
    auto& in = p.nodes[static_cast<size_t>(pw)].in;
    std::swap(in[0], in[1]);
    EXPECT_FALSE(engine::match_detect_head(p, output_concat(p), &h));
  }
  {
    engine::Plan p = base;  // a grid constant that does not broadcast to [3, 80, 80, 2]
    const int add = by_name(p, "Add", 0);
    ASSERT_GE(add, 0);
    for (int id : p.nodes[static_cast<size_t>(add)].in)
      if (p.values[static_cast<size_t>(id)].constant) p.values[static_cast<size_t>(id)].value = Tensor(DType::kFloat32, {1, 3, 7, 80, 2});
    EXPECT_FALSE(engine::match_detect_head(p, output_concat(p), &h));
  }
}

TEST(DetectHead, FusedStepEqualsNodeByNode) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  expect_fused_equals_unfused(path, load_npz(bus)["input"]);
  YOLOCU_REQUIRE_DATA(dyn, "models/yolov5n_dyn.onnx");
  expect_fused_equals_unfused(dyn, test::uniform_input({2, 3, 320, 256}, 7));  // batch 2, non-square
}

// The YOLOv8 / YOLO11 Detect tail: the matcher (engine::match_v8_head) on the package's exports
// (scripts/v8/make_refs.sh) and on small synthetic heads, its refusals of altered graphs, and the
// fused tail's host instantiation (engine::v8_tail_reference: the GPU kernel's math and tiling)
// against the graph computed node by node by the CPU engine. What this cannot cover (the launch,
// the device's expf) test_cuda_engine's CudaV8Tail cases check on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "engine/engine_test_util.hpp"
#include "engine/plan.hpp"
#include "engine/v8_head.hpp"
#include "engine/v8_tail.hpp"
#include "engine/v8_tail_ref.hpp"
#include "engine/v8_synth.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;
using engine::V8Head;

namespace {

// The producer of the plan's first output, or -1.
int output_node(const engine::Plan& plan) { return plan.values[static_cast<size_t>(plan.outputs[0])].producer; }

int count_matches(const engine::Plan& plan) { return static_cast<int>(engine::find_v8_heads(plan).size()); }

bool matches(const engine::Plan& plan) {
  V8Head h;
  return engine::match_v8_head(plan, output_node(plan), &h);
}

// What ultralytics' Detect head is at an h x w input: levels of strides 8, 16, 32 with
// ceil(size / stride) cells each, one after the other, nc classes.
void expect_head(const V8Head& h, int64_t height, int64_t width, int64_t nc, bool concatenated = false,
                 const std::vector<int64_t>& strides = {8, 16, 32}) {
  ASSERT_EQ(h.levels.size(), strides.size());
  EXPECT_EQ(h.nc, nc);
  int64_t begin = 0;
  for (size_t l = 0; l < strides.size(); ++l) {
    SCOPED_TRACE("level " + std::to_string(l));
    const engine::V8Level& L = h.levels[l];
    EXPECT_EQ(L.stride, static_cast<float>(strides[l]));
    EXPECT_EQ(L.ny, (height - 1) / strides[l] + 1);
    EXPECT_EQ(L.nx, (width - 1) / strides[l] + 1);
    EXPECT_EQ(L.anchor_begin, begin);
    EXPECT_GE(L.box, 0);
    EXPECT_EQ(L.cls == L.box, concatenated);
    EXPECT_EQ(L.cls_channel, concatenated ? 64 : 0);
    begin += L.ny * L.nx;
  }
  EXPECT_EQ(h.anchors, begin);
  // Per level 2 Reshapes, 2 Concats (concatenated: 1 Reshape per level, a Concat and a Split); DFL
  // 5, Slice 2, decode 7 (Sub, Add, Add, Sub, Div, Concat, Mul), Sigmoid, the final Concat.
  EXPECT_EQ(h.absorbed.size(), (concatenated ? 1 : 2) * strides.size() + 2 + 5 + 2 + 7 + 2);
}

// NCHW -> NHWC with `pitch` >= C channels per pixel; padding channels hold NaN, which would
// reach the output if the tail read them.
Tensor to_nhwc(const Tensor& t, int64_t pitch) {
  const int64_t n = t.dim(0), c = t.dim(1), hw = t.dim(2) * t.dim(3);
  Tensor y(DType::kFloat32, {n, t.dim(2), t.dim(3), pitch});
  float* d = y.data_as<float>();
  for (int64_t i = 0; i < y.numel(); ++i) d[i] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p) d[(b * hw + p) * pitch + k] = t.data_as<float>()[(b * c + k) * hw + p];
  return y;
}

struct TailRun {
  Tensor got, graph;
};

// The host instantiation of the fused tail on the CPU engine's head convolution outputs (NHWC,
// channels padded to a multiple of `pad`), tiles of `tile` pixels (0: the kernel's), and the
// graph's output computed node by node.
TailRun tail_and_graph(const std::shared_ptr<Model>& m, const Tensor& x, int64_t pad = 1, int tile = 0) {
  TailRun r;
  const engine::Plan plan = engine::build_plan(*m, {x.shape()});
  V8Head head;
  EXPECT_TRUE(engine::match_v8_head(plan, output_node(plan), &head));
  if (head.levels.empty()) return r;
  // The levels' sources (bias added, before any sigmoid), as the GPU engine has them.
  auto heads = std::make_shared<Model>(*m);
  heads->graph.outputs.clear();
  std::vector<int> ids;
  for (const auto& L : head.levels)
    for (int id : {L.box, L.cls})
      if (ids.empty() || ids.back() != id) {
        ids.push_back(id);
        ValueInfo vi;
        vi.name = plan.values[static_cast<size_t>(id)].name;
        heads->graph.outputs.push_back(vi);
      }
  const std::vector<Tensor> out = CpuEngine(heads).run({x});
  r.graph = CpuEngine(m).run({x})[0];
  std::vector<Tensor> nhwc;
  for (const Tensor& t : out) nhwc.push_back(to_nhwc(t, (t.dim(1) + pad - 1) / pad * pad));
  const auto at = [&](int id) -> const Tensor& {
    size_t k = 0;
    while (ids[k] != id) ++k;
    return nhwc[k];
  };
  std::vector<engine::V8TailSource> sources;
  for (const auto& L : head.levels)
    sources.push_back({at(L.box).data_as<float>(), at(L.cls).data_as<float>(), at(L.box).dim(3), at(L.cls).dim(3)});
  r.got = Tensor(DType::kFloat32, r.graph.shape());
  float* g = r.got.data_as<float>();
  for (int64_t i = 0; i < r.got.numel(); ++i) g[i] = std::numeric_limits<float>::quiet_NaN();
  const int64_t writes = engine::v8_tail_reference(head, sources, x.dim(0), g, tile);
  EXPECT_EQ(writes, r.got.numel()) << "every output element written once";
  int64_t unwritten = 0;
  for (int64_t i = 0; i < r.got.numel(); ++i) unwritten += std::isnan(g[i]) ? 1 : 0;
  EXPECT_EQ(unwritten, 0) << "NaN: an element left out, or a padding channel read";
  return r;
}

// Tolerance: the same float operations in the graph's order but for the DFL's softmax and
// projection (the CPU engine sums the exponentials in double and runs the 1x1 convolution in
// oneDNN; the tail sums in float and divides once) and the sigmoid (oneDNN's logistic against
// 1 / (1 + exp(-v))): a few ulps on each distance and score. The decode adds a distance to a cell
// coordinate of up to 80 and multiplies by the stride, so a box value moves by up to a few ulps
// of the pixel coordinate (<= 640 px: 6.1e-5 per ulp), hence atol 5e-4; relative to the whole
// output that is ~1e-7, within the bound rel L2 <= 1e-6.
::testing::AssertionResult tail_close(const TailRun& r) { return test::close_to(r.got, r.graph, 5e-4, 1e-6, 1e-6); }

void print_diff(const char* what, const TailRun& r) {
  const test::Diff d = test::compare(r.got, r.graph);
  std::printf("[ v8 tail  ] %-40s rel L2 %.3g  max abs %.3g\n", what, d.rel_l2, d.max_abs);
}

std::shared_ptr<Model> load(const std::string& path) { return std::make_shared<Model>(load_onnx(path)); }

class V8HeadExports : public ::testing::TestWithParam<std::string> {};

TEST_P(V8HeadExports, MatchesStaticAndDynamicExports) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(path, name + ".onnx");
  {
    const engine::Plan plan = engine::build_plan(load_onnx(path), {{1, 3, 640, 640}});
    V8Head h;
    ASSERT_TRUE(engine::match_v8_head(plan, output_node(plan), &h));
    expect_head(h, 640, 640, 80);
    EXPECT_EQ(count_matches(plan), 1);
    EXPECT_EQ(engine::find_detect_heads(plan).size(), 0u) << "not YOLOv5's tail";
  }
  YOLOCU_REQUIRE_V8(dyn, name + "_dyn.onnx");
  for (const Shape& s : {Shape{1, 3, 640, 640}, Shape{2, 3, 480, 640}, Shape{1, 3, 224, 96}}) {
    SCOPED_TRACE(shape_str(s));
    const engine::Plan plan = engine::build_plan(load_onnx(dyn), {s});  // the anchors subgraph folds
    V8Head h;
    ASSERT_TRUE(engine::match_v8_head(plan, output_node(plan), &h));
    expect_head(h, s[2], s[3], 80);
  }
}

TEST_P(V8HeadExports, Opset18ExportMatches) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(path, name + "_op18.onnx");
  const engine::Plan plan = engine::build_plan(load_onnx(path), {{1, 3, 640, 640}});
  V8Head h;
  ASSERT_TRUE(engine::match_v8_head(plan, output_node(plan), &h));
  expect_head(h, 640, 640, 80);
}

// Each alteration of one node or constant of a real export makes the whole head fall back.
TEST(V8Head, RefusesAlteredExports) {
  YOLOCU_REQUIRE_V8(path, "yolov8n.onnx");
  const engine::Plan base = engine::build_plan(load_onnx(path), {{1, 3, 640, 640}});
  ASSERT_TRUE(matches(base));
  const auto nth = [](const engine::Plan& p, const std::string& op, int n) {
    int seen = 0;
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (p.nodes[i].node.op_type == op && p.nodes[i].node.name.find("model.22") != std::string::npos && seen++ == n)
        return static_cast<int>(i);
    return -1;
  };
  const auto constant_of = [](engine::Plan& p, int node) -> Tensor* {
    for (int id : p.nodes[static_cast<size_t>(node)].in)
      if (id >= 0 && p.values[static_cast<size_t>(id)].constant) return &p.values[static_cast<size_t>(id)].value;
    return nullptr;
  };
  const auto named = [](const engine::Plan& p, const std::string& name) {
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (p.nodes[i].node.name == name) return static_cast<int>(i);
    return -1;
  };
  const int dfl_conv = named(base, "/model.22/dfl/conv/Conv");
  ASSERT_GE(dfl_conv, 0);
  {
    engine::Plan p = base;  // a DFL projection weight other than its bin index
    constant_of(p, dfl_conv)->data_as<float>()[5] = 5.5f;
    EXPECT_FALSE(matches(p)) << "wrong DFL weights";
  }
  {
    engine::Plan p = base;  // no sigmoid on the classes: the final Concat reads the class logits
    const int s = named(p, "/model.22/Sigmoid");
    ASSERT_GE(s, 0);
    auto& fin = p.nodes[static_cast<size_t>(output_node(p))];
    fin.in[1] = p.nodes[static_cast<size_t>(s)].in[0];
    p.values[static_cast<size_t>(fin.in[1])].consumers.push_back(output_node(p));
    EXPECT_FALSE(matches(p)) << "missing sigmoid";
  }
  {
    engine::Plan p = base;  // another Softmax axis
    const int sm = nth(p, "Softmax", 0);
    ASSERT_GE(sm, 0);
    p.nodes[static_cast<size_t>(sm)].node.attributes.at("axis").i = 2;
    EXPECT_FALSE(matches(p));
  }
  {
    engine::Plan p = base;  // another DFL permutation
    const int tr = nth(p, "Transpose", 0);
    ASSERT_GE(tr, 0);
    p.nodes[static_cast<size_t>(tr)].node.attributes.at("perm").ints = {0, 1, 2, 3};
    EXPECT_FALSE(matches(p));
  }
  {
    engine::Plan p = base;  // anchors moved off the cell centres
    const int sub = named(p, "/model.22/Sub");
    ASSERT_GE(sub, 0);
    Tensor* a = constant_of(p, sub);
    ASSERT_NE(a, nullptr);
    a->data_as<float>()[7] += 0.25f;
    EXPECT_FALSE(matches(p)) << "anchor convention";
  }
  {
    engine::Plan p = base;  // a stride that changes inside a level
    const int last_mul = named(p, "/model.22/Mul_2");
    ASSERT_GE(last_mul, 0);
    Tensor* s = constant_of(p, last_mul);
    ASSERT_NE(s, nullptr);
    s->data_as<float>()[10] = 9.f;
    EXPECT_FALSE(matches(p)) << "non-uniform stride";
  }
  {
    engine::Plan p = base;  // Sub(x2y2, x1y1) with its operands swapped
    const int wh = named(p, "/model.22/Sub_1");
    ASSERT_GE(wh, 0);
    auto& in = p.nodes[static_cast<size_t>(wh)].in;
    std::swap(in[0], in[1]);
    EXPECT_FALSE(matches(p));
  }
  {
    engine::Plan p = base;  // an intermediate that is also a graph output
    const int sm = nth(p, "Softmax", 0);
    p.values[static_cast<size_t>(p.nodes[static_cast<size_t>(sm)].out[0])].graph_output = true;
    EXPECT_FALSE(matches(p));
  }
  {
    engine::Plan p = base;  // opset < 13: Softmax(axis 1) normalises over all trailing axes
    p.opset = 12;
    EXPECT_FALSE(matches(p));
  }
  YOLOCU_REQUIRE_DATA(v5, "models/yolov5n.onnx");
  EXPECT_EQ(count_matches(engine::build_plan(load_onnx(v5), {{1, 3, 640, 640}})), 0) << "YOLOv5's tail";
}

TEST(V8Head, SyntheticHeadsMatchOrAreRefused) {
  test::SynthV8 o;
  const Shape x{1, 3, 64, 64};
  EXPECT_EQ(count_matches(engine::build_plan(*test::synth_v8_head(o), {x})), 1);
  o.split = true;  // lt / rb by one Split
  EXPECT_EQ(count_matches(engine::build_plan(*test::synth_v8_head(o), {x})), 1) << "Split [2, 2]";
  o = {};
  o.reg_max = 8;
  EXPECT_EQ(count_matches(engine::build_plan(*test::synth_v8_head(o), {x})), 0) << "reg_max 8";
  o = {};
  o.dfl_bin3 = 3.5f;
  EXPECT_EQ(count_matches(engine::build_plan(*test::synth_v8_head(o), {x})), 0) << "DFL weights";
  o = {};
  o.sigmoid = false;
  EXPECT_EQ(count_matches(engine::build_plan(*test::synth_v8_head(o), {x})), 0) << "no sigmoid";
  o = {};
  o.anchor_offset = 0.f;
  EXPECT_EQ(count_matches(engine::build_plan(*test::synth_v8_head(o), {x})), 0) << "anchor offset 0";
  o = {};
  o.concatenated = true;  // older exports of the package: per-level Concat, then a Split
  {
    const engine::Plan plan = engine::build_plan(*test::synth_v8_head(o), {x});
    V8Head h;
    ASSERT_TRUE(engine::match_v8_head(plan, output_node(plan), &h));
    expect_head(h, 64, 64, 80, true);
  }
  o.split = true;
  EXPECT_EQ(count_matches(engine::build_plan(*test::synth_v8_head(o), {x})), 1) << "concatenated, Split [2, 2]";
  o = {};
  o.h = 40;  // levels of 5 x 9, 3 x 5 and 2 x 3 cells, batch 2
  o.w = 72;
  const engine::Plan plan = engine::build_plan(*test::synth_v8_head(o), {{2, 3, 40, 72}});
  V8Head h;
  ASSERT_TRUE(engine::match_v8_head(plan, output_node(plan), &h));
  expect_head(h, 40, 72, 80);
}

// The real exports: the fused tail on the CPU engine's head convolutions against the graph.
TEST_P(V8HeadExports, HostReferenceEqualsTheGraph) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(path, name + ".onnx");
  YOLOCU_REQUIRE_V8(bus, name + "_bus.npz");
  auto ref = load_npz(bus);
  const TailRun r = tail_and_graph(load(path), ref["input"]);
  ASSERT_FALSE(r.got.empty());
  print_diff((name + " static b1 bus").c_str(), r);
  EXPECT_TRUE(tail_close(r));
  EXPECT_TRUE(test::close_to(r.got, ref["output"], 1e-2, 1e-4, 1e-5)) << "against ultralytics' own output";
  YOLOCU_REQUIRE_V8(dyn, name + "_dyn.onnx");
  const TailRun d = tail_and_graph(load(dyn), test::uniform_input({2, 3, 480, 640}, 3), 8, 16);
  ASSERT_FALSE(d.got.empty());
  print_diff((name + " dynamic b2 480x640 tile 16").c_str(), d);
  EXPECT_TRUE(tail_close(d));
}

// Synthetic heads: class counts that make the kernel's tile 32 (3, 80 classes) or 16 (500), levels
// whose cells are no multiple of the tile, padded sources, single-pixel tiles.
TEST(V8Tail, HostReferenceSyntheticHeads) {
  struct Case {
    int64_t nc, h, w, batch, pad;
    int tile;
    bool concatenated;
  };
  for (const Case& c : {Case{80, 64, 64, 1, 1, 0, false}, Case{3, 72, 40, 2, 8, 0, false}, Case{500, 48, 80, 1, 8, 0, false},
                        Case{80, 72, 40, 2, 8, 1, false}, Case{7, 100, 36, 3, 4, 4, false}, Case{80, 64, 96, 2, 1, 0, true},
                        Case{5, 72, 40, 1, 8, 0, true}}) {
    const std::string what = "nc " + std::to_string(c.nc) + " " + std::to_string(c.h) + "x" + std::to_string(c.w) + " b" +
                             std::to_string(c.batch) + " tile " + std::to_string(c.tile) + (c.concatenated ? " concat" : "");
    SCOPED_TRACE(what);
    test::SynthV8 o;
    o.nc = c.nc;
    o.h = c.h;
    o.w = c.w;
    o.concatenated = c.concatenated;
    const TailRun r = tail_and_graph(test::synth_v8_head(o), test::uniform_input({c.batch, 3, c.h, c.w}, 9), c.pad, c.tile);
    ASSERT_FALSE(r.got.empty());
    print_diff(what.c_str(), r);
    EXPECT_TRUE(tail_close(r));
  }
}

// The kernel's tile: 32 pixels while their class scores fit 32 KB, a smaller power of two for wide
// heads, none when one pixel does not fit.
TEST(V8Tail, TilePixels) {
  EXPECT_EQ(engine::v8tail::tile_pixels_for(80), 32);
  EXPECT_EQ(engine::v8tail::tile_pixels_for(255), 32);  // 256 floats x 32 = 32 KB
  EXPECT_EQ(engine::v8tail::tile_pixels_for(256), 16);
  EXPECT_EQ(engine::v8tail::tile_pixels_for(500), 16);
  EXPECT_EQ(engine::v8tail::tile_pixels_for(8191), 1);
  EXPECT_EQ(engine::v8tail::tile_pixels_for(8192), 0);
  EXPECT_EQ(engine::v8tail::class_stride(80) % 2, 1);
  EXPECT_EQ(engine::v8tail::class_stride(81), 81);
}

INSTANTIATE_TEST_SUITE_P(Exports, V8HeadExports, ::testing::Values("yolov8n", "yolo11n", "yolov8s", "yolo11s"));

}  // namespace

// YOLO11's C2PSA attention: the matcher (engine::match_attention) on the package's exports
// (scripts/v8/make_refs.sh) and on small synthetic blocks, its refusals of altered graphs, and the
// fused attention's host instantiation (engine::attention_reference: the GPU kernel's math, blocks
// and reductions) against the graph computed node by node by the CPU engine. What this cannot
// cover (the launch, fp16 storage, the device's expf) test_cuda_engine's CudaAttention cases check
// on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>

#include "engine/attention_block.hpp"
#include "engine/attention_ref.hpp"
#include "engine/attention_synth.hpp"
#include "engine/engine_test_util.hpp"
#include "engine/plan.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;
using engine::AttentionBlock;

namespace {

std::vector<AttentionBlock> blocks(const engine::Plan& plan) { return engine::find_attention_blocks(plan); }

// yolo11n's one C2PSA attention at an h x w input: 2 heads (yolo11s: 4), key_dim 32, head_dim 64
// on the stride-32 map; ten nodes (Reshape, Split, Mul, Transpose, MatMul, Softmax, Transpose,
// MatMul, Reshape, pe's Reshape).
void expect_yolo11n_block(const AttentionBlock& a, int64_t batch, int64_t height, int64_t width, int64_t heads = 2) {
  EXPECT_EQ(a.batch, batch);
  EXPECT_EQ(a.heads, heads);
  EXPECT_EQ(a.key_dim, 32);
  EXPECT_EQ(a.head_dim, 64);
  EXPECT_EQ(a.height, (height - 1) / 32 + 1);
  EXPECT_EQ(a.width, (width - 1) / 32 + 1);
  EXPECT_EQ(a.tokens, a.height * a.width);
  EXPECT_EQ(a.scale, static_cast<float>(std::pow(32.0, -0.5)));
  EXPECT_GE(a.qkv, 0);
  EXPECT_GE(a.out, 0);
  EXPECT_GE(a.v_image, 0);
  EXPECT_EQ(a.absorbed.size(), 10u);
}

std::shared_ptr<Model> load(const std::string& path) { return std::make_shared<Model>(load_onnx(path)); }

TEST(Attention, MatchesYolo11nExports) {
  YOLOCU_REQUIRE_V8(path, "yolo11n.onnx");
  {
    const auto found = blocks(engine::build_plan(load_onnx(path), {{1, 3, 640, 640}}));
    ASSERT_EQ(found.size(), 1u);
    expect_yolo11n_block(found[0], 1, 640, 640);
    EXPECT_EQ(found[0].tokens, 400);
  }
  YOLOCU_REQUIRE_V8(dyn, "yolo11n_dyn.onnx");
  for (const Shape& s : {Shape{1, 3, 640, 640}, Shape{4, 3, 640, 640}, Shape{2, 3, 480, 640}, Shape{1, 3, 224, 96}}) {
    SCOPED_TRACE(shape_str(s));
    const auto found = blocks(engine::build_plan(load_onnx(dyn), {s}));
    ASSERT_EQ(found.size(), 1u);
    expect_yolo11n_block(found[0], s[0], s[2], s[3]);
  }
  YOLOCU_REQUIRE_V8(op18, "yolo11n_op18.onnx");
  const auto found = blocks(engine::build_plan(load_onnx(op18), {{1, 3, 640, 640}}));
  ASSERT_EQ(found.size(), 1u);
  expect_yolo11n_block(found[0], 1, 640, 640);
  YOLOCU_REQUIRE_V8(v8, "yolov8n.onnx");
  EXPECT_TRUE(blocks(engine::build_plan(load_onnx(v8), {{1, 3, 640, 640}})).empty()) << "YOLOv8 has no attention";
}

TEST(Attention, MatchesYolo11sExport) {
  YOLOCU_REQUIRE_V8(path, "yolo11s.onnx");
  const auto found = blocks(engine::build_plan(load_onnx(path), {{1, 3, 640, 640}}));
  ASSERT_EQ(found.size(), 1u);
  expect_yolo11n_block(found[0], 1, 640, 640, 4);
}

// Each alteration of one node or constant of the real export makes the block fall back.
TEST(Attention, RefusesAlteredExports) {
  YOLOCU_REQUIRE_V8(path, "yolo11n.onnx");
  const engine::Plan base = engine::build_plan(load_onnx(path), {{1, 3, 640, 640}});
  ASSERT_EQ(blocks(base).size(), 1u);
  const auto named = [](const engine::Plan& p, const std::string& name) {
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (p.nodes[i].node.name == "/model.10/m/m.0/attn/" + name) return static_cast<int>(i);
    return -1;
  };
  const auto at = [&](engine::Plan& p, const std::string& name) -> engine::PlanNode& {
    const int i = named(p, name);
    EXPECT_GE(i, 0) << name;
    return p.nodes[static_cast<size_t>(std::max(i, 0))];
  };
  {
    engine::Plan p = base;  // a scale other than key_dim ** -0.5
    for (int id : at(p, "Mul").in)
      if (p.values[static_cast<size_t>(id)].constant) p.values[static_cast<size_t>(id)].value.data_as<float>()[0] = 0.2f;
    EXPECT_TRUE(blocks(p).empty()) << "wrong scale";
  }
  {
    engine::Plan p = base;  // the softmax over the queries
    at(p, "Softmax").node.attributes["axis"].kind = Attribute::Kind::kInt;
    at(p, "Softmax").node.attributes["axis"].i = 2;
    EXPECT_TRUE(blocks(p).empty()) << "softmax axis 2";
  }
  for (const char* mm : {"MatMul", "MatMul_1"}) {
    engine::Plan p = base;  // transposed operands
    auto& in = at(p, mm).in;
    std::swap(in[0], in[1]);
    EXPECT_TRUE(blocks(p).empty()) << mm << " operands swapped";
  }
  for (const char* tr : {"Transpose", "Transpose_1"}) {
    engine::Plan p = base;  // no transpose
    at(p, tr).node.attributes.at("perm").ints = {0, 1, 2, 3};
    EXPECT_TRUE(blocks(p).empty()) << tr << " identity permutation";
  }
  {
    engine::Plan p = base;  // the probabilities are also a graph output
    p.values[static_cast<size_t>(at(p, "Softmax").out[0])].graph_output = true;
    EXPECT_TRUE(blocks(p).empty()) << "intermediate graph output";
  }
  {
    engine::Plan p = base;  // k read by another node too
    engine::PlanNode& split = at(p, "Split");
    p.values[static_cast<size_t>(split.out[1])].consumers.push_back(named(p, "Softmax"));
    EXPECT_TRUE(blocks(p).empty()) << "k with a second reader";
  }
}

TEST(Attention, SyntheticBlocksMatchOrAreRefused) {
  const Shape x{1, 32, 5, 7};
  test::SynthAttention o;
  auto one = [&](const Shape& s = {1, 32, 5, 7}) { return blocks(engine::build_plan(*test::synth_attention(o), {s})); };
  ASSERT_EQ(one().size(), 1u);
  EXPECT_EQ(one()[0].tokens, 35);
  EXPECT_EQ(one(Shape{3, 32, 5, 7})[0].batch, 3);
  o.scale_after = true;  // the module's order: (q^T k) * scale
  EXPECT_EQ(one().size(), 1u) << "scale after the MatMul";
  o = {};
  o.pe = false;
  ASSERT_EQ(one().size(), 1u) << "no pe";
  EXPECT_EQ(one()[0].v_image, -1);
  o = {};
  o.scale = 0.5f;
  EXPECT_TRUE(one().empty()) << "scale 0.5 at key_dim 8";
  o.scale_after = true;
  EXPECT_TRUE(one().empty()) << "scale 0.5 after the MatMul";
  o = {};
  o.softmax_axis = 2;
  EXPECT_TRUE(one().empty()) << "softmax over the queries";
  o = {};
  o.softmax_axis = 3;
  EXPECT_EQ(one().size(), 1u) << "axis 3 is the last";
  o = {};
  o.key_dim = 35;  // q and k of 35 rows: N x 35 @ 35 x N stays valid with the operands swapped
  o.swap_scores = true;
  EXPECT_TRUE(one().empty()) << "MatMul(k, q^T)";
}

// NCHW -> NHWC with `pitch` >= C channels per pixel; padding channels hold NaN.
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
// NHWC [N, H, W, pitch] -> NCHW with `c` channels.
Tensor to_nchw(const Tensor& t, int64_t c) {
  const int64_t n = t.dim(0), hw = t.dim(1) * t.dim(2), pitch = t.dim(3);
  Tensor y(DType::kFloat32, {n, c, t.dim(1), t.dim(2)});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p) y.data_as<float>()[(b * c + k) * hw + p] = t.data_as<float>()[(b * hw + p) * pitch + k];
  return y;
}

struct AttnRun {
  Tensor x, x_graph, v, v_graph;
};

// The host instantiation on the CPU engine's qkv (NHWC, `pad` NaN channels after the heads') and
// the graph's x and pe input computed node by node.
AttnRun attention_and_graph(const std::shared_ptr<Model>& m, const Tensor& input, int64_t pad) {
  AttnRun r;
  const engine::Plan plan = engine::build_plan(*m, {input.shape()});
  const auto found = blocks(plan);
  EXPECT_EQ(found.size(), 1u);
  if (found.empty()) return r;
  const AttentionBlock& a = found[0];
  auto probe = std::make_shared<Model>(*m);
  probe->graph.outputs.clear();
  for (int id : {a.qkv, a.out, a.v_image}) {
    ValueInfo vi;
    vi.name = plan.values[static_cast<size_t>(id)].name;
    probe->graph.outputs.push_back(vi);
  }
  const std::vector<Tensor> g = CpuEngine(probe).run({input});
  r.x_graph = g[1];
  r.v_graph = g[2];
  const int64_t c = a.heads * a.head_dim;
  const Tensor qkv = to_nhwc(g[0], g[0].dim(1) + pad);
  Tensor x = to_nhwc(r.x_graph, c + pad), v = to_nhwc(r.v_graph, c + pad);  // shapes; the values are overwritten
  for (Tensor* t : {&x, &v})
    for (int64_t i = 0; i < t->numel(); ++i) t->data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  engine::attn::Geometry geo;
  geo.heads = static_cast<int>(a.heads);
  geo.key_dim = static_cast<int>(a.key_dim);
  geo.head_dim = static_cast<int>(a.head_dim);
  geo.tokens = static_cast<int>(a.tokens);
  geo.scale = a.scale;
  geo.qkv_pitch = static_cast<int>(qkv.dim(3));
  geo.out_pitch = geo.v_pitch = static_cast<int>(c + pad);
  const int64_t writes = engine::attention_reference(geo, qkv.data_as<float>(), a.batch, x.data_as<float>(), v.data_as<float>());
  EXPECT_EQ(writes, a.batch * a.tokens * c) << "every element of x written once";
  r.x = to_nchw(x, c);
  r.v = to_nchw(v, c);
  int64_t unwritten = 0;
  for (const Tensor* t : {&r.x, &r.v})
    for (int64_t i = 0; i < t->numel(); ++i) unwritten += std::isnan(t->data_as<float>()[i]) ? 1 : 0;
  EXPECT_EQ(unwritten, 0) << "NaN: an element left out, or a padding channel read";
  return r;
}

// Tolerance: the same fp32 operations as the graph (q * scale, dot products over kd, softmax with
// the maximum subtracted, p / sum, dot products over N), only summed in another order (the CPU
// engine's MatMul and Softmax kernels against the lanes' strided sums and the warp butterfly) and
// with another exp: a few ulps on each score and probability, averaged over N keys in x: rel L2
// <= 1e-6 (measured ~1e-7). pe's input is a copy: equal.
void expect_close(const AttnRun& r, const std::string& what) {
  ASSERT_FALSE(r.x.empty()) << what;
  const test::Diff d = test::compare(r.x, r.x_graph);
  std::printf("[ attention ] %-40s rel L2 %.3g  max abs %.3g\n", what.c_str(), d.rel_l2, d.max_abs);
  EXPECT_LE(d.rel_l2, 1e-6) << what;
  EXPECT_EQ(test::compare(r.v, r.v_graph).max_abs, 0.0) << what << ": pe's input is v as it is";
}

TEST(Attention, HostReferenceEqualsTheGraphOnYolo11n) {
  YOLOCU_REQUIRE_V8(path, "yolo11n.onnx");
  YOLOCU_REQUIRE_V8(bus, "yolo11n_bus.npz");
  expect_close(attention_and_graph(load(path), load_npz(bus)["input"], 0), "yolo11n static b1 bus");
  YOLOCU_REQUIRE_V8(dyn, "yolo11n_dyn.onnx");
  expect_close(attention_and_graph(load(dyn), test::uniform_input({2, 3, 480, 640}, 3), 8), "yolo11n dynamic b2 480x640 pad 8");
}

// Synthetic blocks: token counts below one warp, not a multiple of the query block, several heads,
// odd key / head dims, batch 3, the module's scale order.
TEST(Attention, HostReferenceSyntheticBlocks) {
  struct Case {
    int64_t heads, kd, hd, h, w, batch;
    bool scale_after;
  };
  for (const Case& c : {Case{2, 8, 16, 5, 7, 1, false}, Case{1, 32, 64, 20, 20, 1, false}, Case{4, 5, 7, 3, 11, 3, false},
                        Case{3, 16, 40, 1, 5, 2, true}, Case{2, 33, 65, 9, 8, 1, false}}) {
    test::SynthAttention o;
    o.heads = c.heads;
    o.key_dim = c.kd;
    o.head_dim = c.hd;
    o.h = c.h;
    o.w = c.w;
    o.scale_after = c.scale_after;
    const std::string what = std::to_string(c.heads) + " heads kd " + std::to_string(c.kd) + " hd " + std::to_string(c.hd) +
                             " " + std::to_string(c.h) + "x" + std::to_string(c.w) + " b" + std::to_string(c.batch) +
                             (c.scale_after ? " scale after" : "");
    SCOPED_TRACE(what);
    const Tensor x = test::synth_detail::weights({c.batch, o.channels, c.h, c.w}, 5, 1.f);
    expect_close(attention_and_graph(test::synth_attention(o), x, 3), what);
  }
}

TEST(Attention, SharedMemoryLayout) {
  // Key rows of an odd number of words (distinct banks per lane), fp16 and fp32.
  EXPECT_EQ(engine::attn::key_pitch(32, 2), 34);
  EXPECT_EQ(engine::attn::key_pitch(32, 4), 33);
  EXPECT_EQ(engine::attn::key_pitch(5, 2), 6);
  EXPECT_EQ(engine::attn::key_pitch(6, 2), 6);
  EXPECT_EQ(engine::attn::key_pitch(8, 2), 10);
  // yolo11n at 640: 400 tokens fit 99 KiB in fp16 (sm_86 / sm_89's opt-in limit), 227 KiB in fp32 (sm_90).
  EXPECT_LE(engine::attn::smem_bytes(32, 64, 400, 2), size_t{99} << 10);
  EXPECT_LE(engine::attn::smem_bytes(32, 64, 400, 4), size_t{227} << 10);
  EXPECT_GT(engine::attn::smem_bytes(32, 64, 400, 4), size_t{99} << 10);
}

}  // namespace

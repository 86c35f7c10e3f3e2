// Channel views in the GPU engine's plan (GpuStepOptions::channel_views; host-only, no GPU): C2f /
// C3k2 blocks lose their Split and Concat steps, the views sit where the copies would have put
// their data, no two live buffers overlap, and the layer signature names pitched inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "engine/c2f_synth.hpp"
#include "engine/cuda/gpu_steps.hpp"
#include "engine/cuda/tactics/conv_problem.hpp"
#include "engine/cuda/tactics/tactic_cache.hpp"
#include "engine/cuda/tactics/tune_select.hpp"
#include "engine/plan.hpp"
#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/model.hpp"

namespace yolocu {
namespace {

using engine::GpuStepKind;
using engine::GpuStepPlan;

GpuStepPlan plan_of(const Model& m, int64_t batch, int64_t h, int64_t w, size_t es, bool views) {
  engine::GpuStepOptions o;
  o.act_elem_size = es;
  o.fuse_v8_tail = o.fuse_attention = true;
  o.channel_views = views;
  return engine::plan_gpu_steps(engine::build_plan(m, {{batch, 3, h, w}}), o);
}

int count_kind(const GpuStepPlan& sp, GpuStepKind k) {
  return static_cast<int>(std::count_if(sp.steps.begin(), sp.steps.end(), [&](const auto& s) { return s.kind == k; }));
}

// Each root's lifetime as plan_value_arena computes it: first and last step touching a value in it.
std::map<int, std::pair<int, int>> root_lifetimes(const GpuStepPlan& sp) {
  std::map<int, std::pair<int, int>> life;
  auto touch = [&](int id, int step) {
    if (id < 0 || sp.plan.values[static_cast<size_t>(id)].constant) return;
    const int r = sp.root[static_cast<size_t>(id)];
    auto it = life.find(r);
    if (it == life.end()) life[r] = {step, step};
    else it->second = {std::min(it->second.first, step), std::max(it->second.second, step)};
  };
  for (int id : sp.plan.inputs) touch(id, -1);
  for (size_t i = 0; i < sp.steps.size(); ++i) {
    for (int id : sp.steps[i].in) touch(id, static_cast<int>(i));
    for (int id : sp.steps[i].out) touch(id, static_cast<int>(i));
  }
  for (int id : sp.plan.outputs) touch(id, static_cast<int>(sp.steps.size()));
  return life;
}

// The Split node input of each Split output (-1: none).
std::vector<int> split_inputs(const GpuStepPlan& sp) {
  std::vector<int> of(sp.plan.values.size(), -1);
  for (const auto& n : sp.plan.nodes)
    if (n.node.op_type == "Split")
      for (int o : n.out)
        if (o >= 0) of[static_cast<size_t>(o)] = n.in[0];
  return of;
}

// Values inside another value's buffer: where their root's buffer has them, read only by Convs (as
// input or residual, with the root's pitch), nearest Resizes or Concats (the one they are in, or
// one copying them with the root's pitch); live buffers disjoint;
// channel ranges inside one root disjoint except a Split output inside its Split's input.
void check_views(const GpuStepPlan& sp, size_t es) {
  const size_t nv = sp.plan.values.size();
  const std::vector<int> split_in = split_inputs(sp);
  std::map<int, std::vector<int>> in_root;
  for (size_t v = 0; v < nv; ++v) {
    if (sp.channel_offset[v] < 0) continue;
    const auto& pv = sp.plan.values[v];
    const size_t r = static_cast<size_t>(sp.root[v]);
    ASSERT_NE(r, v) << pv.name;
    EXPECT_EQ(sp.root[r], static_cast<int>(r)) << pv.name;
    EXPECT_LT(sp.channel_offset[r], 0) << pv.name;
    EXPECT_EQ(sp.channel_pitch[v], sp.channel_pitch[r]) << pv.name;
    EXPECT_EQ(sp.channel_pitch[r], sp.plan.values[r].shape[1]) << pv.name;
    EXPECT_LE(sp.channel_offset[v] + pv.shape[1], sp.channel_pitch[r]) << pv.name;
    EXPECT_EQ(sp.offset[v], sp.offset[r] + sp.channel_offset[v] * static_cast<int64_t>(es)) << pv.name;
    EXPECT_EQ(sp.channel_offset[v] * static_cast<int64_t>(es) % 16, 0) << pv.name;
    EXPECT_EQ(engine::view_pitch(sp, static_cast<int>(v)), sp.channel_pitch[r]) << pv.name;
    in_root[static_cast<int>(r)].push_back(static_cast<int>(v));
    for (const auto& s : sp.steps)
      for (size_t k = 0; k < s.in.size(); ++k) {
        if (s.in[k] != static_cast<int>(v)) continue;
        const bool conv_in = (s.kind == GpuStepKind::kConv && (k == 0 || k == 3)) ||
                             (s.kind == GpuStepKind::kResize && k == 0);
        // its Concat (in place), or a Concat that copies it from its root (a Split output viewed in
        // its producer's buffer)
        const bool a_concat = s.kind == GpuStepKind::kConcatNhwc;
        EXPECT_TRUE(conv_in || a_concat) << pv.name << " read by " << s.label;
      }
  }
  for (const auto& [r, vs] : in_root)
    for (size_t i = 0; i < vs.size(); ++i)
      for (size_t j = i + 1; j < vs.size(); ++j) {
        const int a = vs[i], b = vs[j];
        const int64_t a0 = sp.channel_offset[static_cast<size_t>(a)], b0 = sp.channel_offset[static_cast<size_t>(b)];
        const int64_t a1 = a0 + sp.plan.values[static_cast<size_t>(a)].shape[1];
        const int64_t b1 = b0 + sp.plan.values[static_cast<size_t>(b)].shape[1];
        if (a1 <= b0 || b1 <= a0) continue;
        const bool nested = split_in[static_cast<size_t>(a)] == b || split_in[static_cast<size_t>(b)] == a;
        EXPECT_TRUE(nested) << sp.plan.values[static_cast<size_t>(a)].name << " overlaps "
                            << sp.plan.values[static_cast<size_t>(b)].name;
      }
  // Split outputs in views sit at their channels of the Split's input.
  for (size_t v = 0; v < nv; ++v) {
    const int u = split_in[v];
    if (u < 0 || sp.channel_offset[v] < 0) continue;
    // in u's own buffer (root u), or both in a Concat's
    const bool in_u = sp.root[v] == u;
    if (!in_u) {
      ASSERT_GE(sp.channel_offset[static_cast<size_t>(u)], 0) << sp.plan.values[v].name;
    }
    int64_t start = in_u ? 0 : sp.channel_offset[static_cast<size_t>(u)];
    for (const auto& n : sp.plan.nodes) {
      if (n.node.op_type != "Split" || n.in[0] != u) continue;
      for (int o : n.out) {
        if (o == static_cast<int>(v)) break;
        start += sp.plan.values[static_cast<size_t>(o)].shape[1];
      }
    }
    EXPECT_EQ(sp.channel_offset[v], start) << sp.plan.values[v].name;
  }
  // Live roots never share bytes.
  const auto life = root_lifetimes(sp);
  for (auto a = life.begin(); a != life.end(); ++a)
    for (auto b = std::next(a); b != life.end(); ++b) {
      if (a->second.second < b->second.first || b->second.second < a->second.first) continue;
      const int64_t ao = sp.offset[static_cast<size_t>(a->first)], bo = sp.offset[static_cast<size_t>(b->first)];
      if (ao < 0 || bo < 0) continue;
      const int64_t ae = ao + static_cast<int64_t>(engine::value_bytes(sp, a->first, es));
      const int64_t be = bo + static_cast<int64_t>(engine::value_bytes(sp, b->first, es));
      EXPECT_TRUE(ae <= bo || be <= ao) << sp.plan.values[static_cast<size_t>(a->first)].name << " and "
                                        << sp.plan.values[static_cast<size_t>(b->first)].name << " overlap while live";
    }
}

// Convolutions reading a view as input or residual.
int convs_reading_views(const GpuStepPlan& sp) {
  int n = 0;
  for (const auto& s : sp.steps)
    if (s.kind == GpuStepKind::kConv && (engine::view_pitch(sp, s.in[0]) > 0 || engine::view_pitch(sp, s.residual) > 0))
      ++n;
  return n;
}

// YOLOv8n / YOLO11n: every C2f / C3k2 block's Split and Concat steps go (YOLO11's C2PSA keeps its
// Concat, which copies the first half of cv1's output: the Split's outputs are views of cv1's own
// buffer, its second half not being a Concat input), and so do the head's Concats, whose inputs are a
// nearest Resize's output and a C2f output that a Conv or the Resize reads too.
TEST(ChannelViews, V8Exports) {
  for (const std::string name : {"yolov8n", "yolo11n"}) {
    YOLOCU_REQUIRE_V8(path, name + "_dyn.onnx");
    const Model m = load_onnx(path);
    const bool v8 = name == "yolov8n";
    for (size_t es : {size_t{2}, size_t{4}}) {
      SCOPED_TRACE(name + (es == 2 ? " fp16" : " fp32"));
      const GpuStepPlan off = plan_of(m, 8, 640, 640, es, false), on = plan_of(m, 8, 640, 640, es, true);
      const int split_off = count_kind(off, GpuStepKind::kSplitNhwc), cat_off = count_kind(off, GpuStepKind::kConcatNhwc);
      const int split_on = count_kind(on, GpuStepKind::kSplitNhwc), cat_on = count_kind(on, GpuStepKind::kConcatNhwc);
      std::printf("%s %s: Split steps %d -> %d, Concat steps %d -> %d, views %d, convs reading views %d, "
                  "arena %.1f -> %.1f MiB\n", name.c_str(), es == 2 ? "fp16" : "fp32", split_off, split_on, cat_off,
                  cat_on, on.channel_views, convs_reading_views(on), off.arena_bytes / 1048576.0,
                  on.arena_bytes / 1048576.0);
      EXPECT_EQ(split_off, v8 ? 16 : 18);
      EXPECT_EQ(split_on, 0) << "YOLO11's C2PSA Split: views of cv1's own buffer";
      EXPECT_EQ(on.channel_views, split_off - split_on);
      EXPECT_EQ(cat_on, v8 ? 0 : 1) << "only YOLO11's C2PSA Concat stays (it copies the first half from cv1's buffer)";
      EXPECT_EQ(on.copy_steps_removed, (split_off - split_on) + (cat_off - cat_on));
      EXPECT_EQ(on.steps.size() + static_cast<size_t>(on.copy_steps_removed), off.steps.size());
      EXPECT_GT(convs_reading_views(on), 0);
      EXPECT_EQ(convs_reading_views(off), 0);
      EXPECT_EQ(off.channel_views, 0);
      // A backbone output that the head's Concat reads lives in that Concat's buffer from the
      // backbone on: that buffer's other half is then held that long too (YOLO11n: +32%).
      EXPECT_LE(on.arena_bytes, off.arena_bytes * 3 / 2);
      check_views(on, es);
      check_views(off, es);
    }
  }
}

// On by default (CudaEngineOptions and GpuStepOptions), and only for graphs with a channel Split:
// YOLOv5 (C3 blocks, no Split) is planned step for step and byte for byte as with views off.
TEST(ChannelViews, OnByDefaultAndYoloV5Unchanged) {
#if defined(YOLOCU_WITH_CUDA)
  EXPECT_TRUE(CudaEngineOptions{}.channel_views);
#endif
  EXPECT_TRUE(engine::GpuStepOptions{}.channel_views);
  const Model m = load_onnx(test::data_file("models/yolov5n.onnx"));
  for (size_t es : {size_t{2}, size_t{4}}) {
    const GpuStepPlan off = plan_of(m, 1, 640, 640, es, false), on = plan_of(m, 1, 640, 640, es, true);
    ASSERT_EQ(count_kind(off, GpuStepKind::kSplitNhwc), 0);
    ASSERT_GT(count_kind(off, GpuStepKind::kConcatNhwc), 0);
    EXPECT_EQ(on.channel_views, 0);
    EXPECT_EQ(on.copy_steps_removed, 0);
    ASSERT_EQ(on.steps.size(), off.steps.size());
    for (size_t i = 0; i < on.steps.size(); ++i) {
      EXPECT_EQ(on.steps[i].kind, off.steps[i].kind) << "step " << i;
      EXPECT_EQ(on.steps[i].in, off.steps[i].in) << "step " << i;
      EXPECT_EQ(on.steps[i].out, off.steps[i].out) << "step " << i;
    }
    EXPECT_EQ(on.root, off.root);
    EXPECT_EQ(on.offset, off.offset);
    EXPECT_EQ(on.arena_bytes, off.arena_bytes);
    EXPECT_EQ(on.concat_inputs_in_place, off.concat_inputs_in_place);
  }
}

// The synthetic C2f (1 and 2 bottlenecks, shortcut on and off): no Split and no Concat step; cv1
// writes into the Concat's buffer; each bottleneck's first convolution reads a view, and with the
// shortcut its second one reads a view as residual.
TEST(ChannelViews, SyntheticC2f) {
  for (int64_t n : {1, 2})
    for (bool shortcut : {true, false})
      for (size_t es : {size_t{2}, size_t{4}}) {
        SCOPED_TRACE("n " + std::to_string(n) + (shortcut ? " shortcut" : "") + (es == 2 ? " fp16" : " fp32"));
        test::SynthC2f o;
        o.n = n;
        o.shortcut = shortcut;
        const auto m = test::synth_c2f(o);
        const GpuStepPlan off = plan_of(*m, 2, o.h, o.w, es, false), on = plan_of(*m, 2, o.h, o.w, es, true);
        EXPECT_EQ(count_kind(off, GpuStepKind::kSplitNhwc), 2);
        EXPECT_EQ(count_kind(off, GpuStepKind::kConcatNhwc), 1);
        EXPECT_EQ(count_kind(on, GpuStepKind::kSplitNhwc), 0);
        EXPECT_EQ(count_kind(on, GpuStepKind::kConcatNhwc), 0);
        EXPECT_EQ(on.channel_views, 2);
        EXPECT_EQ(on.copy_steps_removed, 3);
        EXPECT_EQ(on.concat_inputs_copied, 0);
        EXPECT_EQ(on.concat_inputs_in_place, 2 + n);
        int x_views = 0, r_views = 0;
        for (const auto& s : on.steps) {
          if (s.kind != GpuStepKind::kConv) continue;
          x_views += engine::view_pitch(on, s.in[0]) > 0;
          r_views += engine::view_pitch(on, s.residual) > 0;
          if (engine::view_pitch(on, s.in[0]) > 0) {
            EXPECT_GT(engine::view_pitch(on, s.in[0]), on.plan.values[static_cast<size_t>(s.in[0])].shape[1]);
          }
        }
        EXPECT_EQ(x_views, n) << "each bottleneck's first convolution";
        EXPECT_EQ(r_views, shortcut ? n : 0) << "each bottleneck's residual";
        check_views(on, es);
      }
}

// A Split output that another kind of step reads too (here: the graph output's layout conversion)
// keeps the Split's copies.
TEST(ChannelViews, UnsupportedReaderKeepsCopies) {
  test::SynthC2f o;
  const auto m = test::synth_c2f(o);
  m->graph.outputs.push_back(ValueInfo{});
  m->graph.outputs.back().name = "y1";
  const GpuStepPlan on = plan_of(*m, 1, o.h, o.w, 2, true);
  EXPECT_EQ(count_kind(on, GpuStepKind::kSplitNhwc), 2);
  EXPECT_EQ(on.channel_views, 0);
  check_views(on, 2);
}

// Pitched inputs are layers of their own in the tactic cache; packed() and packed_inputs() drop them.
TEST(ChannelViews, PitchedSignature) {
  engine::ConvProblem p;
  p.n = 8, p.c = 16, p.h = p.w = p.p = p.q = 160, p.k = 16, p.r = p.s = 3, p.pad_h = p.pad_w = 1;
  p.bias = p.silu = p.residual = true;
  const std::string base = p.signature();
  engine::ConvProblem q = p;
  q.xp = 16, q.rp = 16;  // pitches equal to the channels: packed, the same layer
  EXPECT_EQ(q.signature(), base);
  EXPECT_TRUE(q.inputs_packed());
  q.xp = 48;
  EXPECT_EQ(q.signature(), base + " xp48");
  EXPECT_FALSE(q.inputs_packed());
  q.rp = 64, q.yp = 64;
  EXPECT_EQ(q.signature(), base + " yp64 xp48 rp64");
  EXPECT_EQ(q.packed().signature(), base);
  EXPECT_EQ(q.packed_inputs().signature(), base + " yp64");
  EXPECT_EQ(q.x_pitch(), 48);
  EXPECT_EQ(q.r_pitch(), 64);
  q.residual = false;  // no residual: its pitch names nothing
  EXPECT_EQ(q.signature().find(" rp"), std::string::npos);
  // The packed-input wrapper counts as its inner tactic's family.
  EXPECT_EQ(engine::family_of("packin:cudnn-graph:e12;3=1"), engine::TacticFamily::kCudnnGraph);
  EXPECT_EQ(engine::family_of("packin:cutlass:tb128x64x32-s3"), engine::TacticFamily::kCutlass);
  EXPECT_EQ(engine::family_of("packin:cudnn:IMPLICIT_GEMM"), engine::TacticFamily::kCudnnLegacy);
  // A pitched layer's record round-trips through the file under its own signature.
  const std::string path = test::scratch_dir("channel_views") + "/pitched.json";
  std::remove(path.c_str());
  std::string warning;
  engine::TacticCache a("GPU");
  ASSERT_TRUE(a.load(path, &warning));
  const std::string sig = p.signature() + " xp48";
  a.put(sig, 8, {"packin:cudnn:IMPLICIT_GEMM", "packed copy + cudnn IMPLICIT_GEMM", 12.5});
  ASSERT_TRUE(a.save(path, &warning)) << warning;
  engine::TacticCache b("GPU");
  ASSERT_TRUE(b.load(path, &warning)) << warning;
  ASSERT_NE(b.find(sig, 8), nullptr);
  EXPECT_EQ(b.find(sig, 8)->tactic, "packin:cudnn:IMPLICIT_GEMM");
  EXPECT_EQ(b.find(base, 8), nullptr);
}

}  // namespace
}  // namespace yolocu

// Host-side planning of the GPU engine (no GPU needed): layouts, fusion and the arena.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "engine/cuda/gpu_steps.hpp"
#include "engine/v8_synth.hpp"
#include "engine/plan.hpp"
#include "test_util.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

using engine::GpuStepKind;
using engine::Layout;

engine::GpuStepPlan plan_for(const std::string& path, int64_t batch, size_t es = 2, bool fuse_tail = false,
                             bool copy_free_concat = true, bool fuse_sppf = true, int64_t size = 640,
                             bool channel_views = true) {
  const Model m = load_onnx(path);
  engine::GpuStepOptions o;
  o.act_elem_size = es;
  o.fuse_detect_tail = fuse_tail;
  o.copy_free_concat = copy_free_concat;
  o.channel_views = channel_views;
  o.fuse_sppf = fuse_sppf;
  return engine::plan_gpu_steps(engine::build_plan(m, {{batch, 3, size, size}}), o);
}

// Every step reads the layouts its kernel expects, and every buffer pair with overlapping
// lifetimes is disjoint in the arena.
void check_consistent(const engine::GpuStepPlan& sp, size_t es) {
  auto lay = [&](int id) { return sp.layout[static_cast<size_t>(id)]; };
  auto is_const = [&](int id) { return sp.plan.values[static_cast<size_t>(id)].constant; };
  for (const auto& s : sp.steps) {
    for (size_t k = 0; k < s.in.size(); ++k) {
      const int id = s.in[k];
      if (id < 0 || is_const(id)) continue;
      switch (s.kind) {
        case GpuStepKind::kConv:
        case GpuStepKind::kToPlain:
        case GpuStepKind::kEltwiseNhwc:
        case GpuStepKind::kConcatNhwc:
        case GpuStepKind::kMaxPool:
        case GpuStepKind::kSppf:
        case GpuStepKind::kResize:
        case GpuStepKind::kSplitNhwc:
        case GpuStepKind::kDetectTail:
        case GpuStepKind::kV8Tail:
        case GpuStepKind::kAttention: EXPECT_EQ(lay(id), Layout::kNhwc) << s.label; break;
        default: EXPECT_EQ(lay(id), Layout::kPlain) << s.label; break;
      }
    }
    EXPECT_GE(sp.offset[static_cast<size_t>(s.out[0])], 0) << s.label;
  }
  for (int id : sp.plan.outputs) EXPECT_EQ(lay(id), Layout::kPlain);
  // Arena bounds.
  for (size_t v = 0; v < sp.plan.values.size(); ++v) {
    if (sp.offset[v] < 0 || sp.root[v] != static_cast<int>(v)) continue;
    EXPECT_LE(static_cast<size_t>(sp.offset[v]) + engine::value_bytes(sp, static_cast<int>(v), es), sp.arena_bytes)
        << sp.plan.values[v].name;
    EXPECT_EQ(sp.offset[v] % 256, 0);
  }
  EXPECT_LT(sp.arena_bytes, sp.naive_bytes);
}

TEST(GpuSteps, Yolov5nStatic) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  const auto sp = plan_for(path, 1);
  EXPECT_EQ(sp.convs, 60);
  EXPECT_EQ(sp.fused_silu, 57);      // all but the three Detect convolutions
  EXPECT_EQ(sp.fused_residual, 7);   // the bottleneck shortcuts of the backbone C3 blocks
  int nhwc_eltwise = 0, to_plain = 0;
  for (const auto& s : sp.steps) {
    nhwc_eltwise += s.kind == GpuStepKind::kEltwiseNhwc;
    to_plain += s.kind == GpuStepKind::kToPlain;
  }
  EXPECT_EQ(nhwc_eltwise, 0);  // every Sigmoid/Mul of the backbone is fused
  EXPECT_EQ(to_plain, 3);      // one per Detect head
  check_consistent(sp, 2);
  std::printf("yolov5n: %zu steps, arena %.1f MiB (naive %.1f MiB)\n", sp.steps.size(), sp.arena_bytes / 1048576.0,
              sp.naive_bytes / 1048576.0);
}

TEST(GpuSteps, AllModels) {
  for (const char* name : {"yolov5n_dyn.onnx", "yolov5n_raw_heads.onnx", "yolov5s_random_fp16.onnx"}) {
    YOLOCU_REQUIRE_DATA(path, std::string("models/") + name);
    for (size_t es : {size_t{2}, size_t{4}}) {
      SCOPED_TRACE(name);
      const int64_t batch = std::string(name) == "yolov5n_dyn.onnx" ? 8 : 1;
      const auto sp = plan_for(path, batch, es);
      EXPECT_EQ(sp.convs, 60);
      check_consistent(sp, es);
    }
  }
}

// YOLOv8n / YOLO11n exports plan for the GPU: C2f's channel Split stays NHWC (a copy per output,
// no layout round trip), the DFL's Softmax and YOLO11's attention MatMuls run on plain values.
TEST(GpuSteps, V8Exports) {
  for (const std::string name : {"yolov8n", "yolo11n"}) {
    SCOPED_TRACE(name);
    YOLOCU_REQUIRE_V8(path, name + ".onnx");
    for (size_t es : {size_t{2}, size_t{4}}) {
      // The lowering itself, before channel views take the Split steps away (test_channel_views.cpp)
      const auto sp = plan_for(path, 1, es, false, true, true, 640, false);
      int split_nhwc = 0, softmax = 0, matmul = 0, gathers_of_nhwc = 0;
      for (const auto& s : sp.steps) {
        split_nhwc += s.kind == GpuStepKind::kSplitNhwc;
        softmax += s.kind == GpuStepKind::kSoftmax;
        matmul += s.kind == GpuStepKind::kMatMul;
        if (s.kind == GpuStepKind::kSplitNhwc) {
          const auto& x = sp.plan.values[static_cast<size_t>(s.in[0])];
          const auto& y = sp.plan.values[static_cast<size_t>(s.out[0])];
          EXPECT_EQ(x.shape.size(), 4u);
          EXPECT_EQ(y.shape[0], x.shape[0]);
          EXPECT_LT(y.shape[1], x.shape[1]) << "a channel part";
          EXPECT_EQ(y.shape[2], x.shape[2]);
        }
        gathers_of_nhwc += s.kind == GpuStepKind::kGather && sp.plan.nodes[static_cast<size_t>(s.node)].node.op_type == "Split";
      }
      const bool v8 = name == "yolov8n";
      EXPECT_EQ(split_nhwc, v8 ? 16 : 18) << "every C2f / C3k2 / C2PSA channel split (8 / 9 nodes, 2 outputs each)";
      EXPECT_EQ(gathers_of_nhwc, v8 ? 0 : 3) << "only the attention's q / k / v split (3 outputs) is plain";
      EXPECT_EQ(softmax, v8 ? 1 : 2) << "the DFL (and the C2PSA attention)";
      EXPECT_EQ(matmul, v8 ? 0 : 2) << "C2PSA: q^T k and v attn^T";
      EXPECT_EQ(sp.fused_sppf, 1) << "SPPF: one kernel";
      check_consistent(sp, es);
      std::printf("%s (%zu-byte activations): %zu steps, %d convs, arena %.1f MiB\n", name.c_str(), es, sp.steps.size(),
                  sp.convs, sp.arena_bytes / 1048576.0);
    }
  }
}

// The fused Detect tail: one step reading the three head convolutions (NHWC) and writing the
// merged output (plain); none of the tail's generic steps or layout conversions remain.
TEST(GpuSteps, FusedDetectTail) {
  for (const char* name : {"yolov5n.onnx", "yolov5n_dyn.onnx", "yolov5s_random_fp16.onnx"}) {
    YOLOCU_REQUIRE_DATA(path, std::string("models/") + name);
    SCOPED_TRACE(name);
    const int64_t batch = std::string(name) == "yolov5n_dyn.onnx" ? 8 : 1;
    const auto plain = plan_for(path, batch, 2);
    const auto fused = plan_for(path, batch, 2, true);
    check_consistent(fused, 2);
    ASSERT_EQ(fused.heads.size(), 1u);
    EXPECT_EQ(fused.fused_tail_nodes, 37);  // 3 levels x 12 + the merging Concat
    int tails = 0, generic = 0, to_plain = 0;
    for (const auto& s : fused.steps) {
      tails += s.kind == GpuStepKind::kDetectTail;
      generic += s.kind == GpuStepKind::kGather || s.kind == GpuStepKind::kBinary || s.kind == GpuStepKind::kUnary ||
                 s.kind == GpuStepKind::kConcat;
      to_plain += s.kind == GpuStepKind::kToPlain;
      if (s.kind != GpuStepKind::kDetectTail) continue;
      ASSERT_EQ(s.in.size(), 3u);
      for (size_t l = 0; l < 3; ++l) {
        EXPECT_EQ(s.in[l], fused.plan.nodes[static_cast<size_t>(fused.heads[0].levels[l].conv)].out[0]);
        // Read by the tail alone: stored with 256 channels per pixel, and its buffer sized for them.
        const auto& v = fused.plan.values[static_cast<size_t>(s.in[l])];
        EXPECT_EQ(v.shape[1], 255);
        EXPECT_EQ(fused.channel_pitch[static_cast<size_t>(s.in[l])], 256);
        EXPECT_EQ(engine::value_bytes(fused, s.in[l], 2), static_cast<size_t>(v.shape[0] * v.shape[2] * v.shape[3] * 256 * 2));
      }
      ASSERT_EQ(fused.plan.outputs.size(), 1u);
      EXPECT_EQ(s.out[0], fused.plan.outputs[0]);
      EXPECT_EQ(fused.layout[static_cast<size_t>(s.out[0])], Layout::kPlain);
    }
    EXPECT_EQ(tails, 1);
    EXPECT_EQ(generic, 0);
    EXPECT_EQ(to_plain, 0);
    EXPECT_EQ(plain.steps.size() - fused.steps.size(), 3u * 15u + 1u - 1u)
        << "12 tail nodes (Split: 3 gather steps) + 1 ToPlain per level, the Concat -> one step";
    EXPECT_LE(fused.arena_bytes, plain.arena_bytes);
    // Without the fused tail nothing is padded (the heads feed generic kernels and the outputs).
    for (size_t v = 0; v < plain.plan.values.size(); ++v)
      if (plain.layout[v] == Layout::kNhwc && plain.channel_offset[v] < 0) {
        EXPECT_EQ(plain.channel_pitch[v], plain.plan.values[v].shape[1]);
      }
  }
  YOLOCU_REQUIRE_DATA(raw, "models/yolov5n_raw_heads.onnx");
  EXPECT_TRUE(plan_for(raw, 1, 2, true).heads.empty());
}

// YOLOv8 / YOLO11's fused tail (GpuStepOptions::fuse_v8_tail): one step reading the levels' box
// and class convolutions (NHWC, read by it alone) and writing the output (plain); none of the
// tail's generic steps remain. Skips without scripts/v8/make_refs.sh's exports.
TEST(GpuSteps, FusedV8Tail) {
  for (const char* name : {"yolov8n.onnx", "yolo11n_dyn.onnx"}) {
    YOLOCU_REQUIRE_V8(path, name);
    SCOPED_TRACE(name);
    const Model m = load_onnx(path);
    engine::GpuStepOptions o;
    o.act_elem_size = 2;
    const auto plain = engine::plan_gpu_steps(engine::build_plan(m, {{1, 3, 640, 640}}), o);
    o.fuse_v8_tail = true;
    const auto fused = engine::plan_gpu_steps(engine::build_plan(m, {{1, 3, 640, 640}}), o);
    check_consistent(fused, 2);
    ASSERT_EQ(fused.v8_heads.size(), 1u);
    EXPECT_TRUE(plain.v8_heads.empty());
    EXPECT_EQ(fused.fused_tail_nodes, 24);  // 6 Reshapes, 2 Concats, DFL 5, 2 Slices, decode 7, Sigmoid, Concat
    const engine::V8Head& h = fused.v8_heads[0];
    int tails = 0, softmax_plain = 0, generic = 0;
    for (const auto& s : fused.steps) {
      tails += s.kind == GpuStepKind::kV8Tail;
      softmax_plain += s.kind == GpuStepKind::kSoftmax;
      generic += s.kind == GpuStepKind::kGather || s.kind == GpuStepKind::kBinary || s.kind == GpuStepKind::kConcat;
      if (s.kind != GpuStepKind::kV8Tail) continue;
      ASSERT_EQ(s.in.size(), 6u);
      for (size_t l = 0; l < 3; ++l) {
        const int box = h.levels[l].box, cls = h.levels[l].cls;
        EXPECT_EQ(fused.plan.nodes[static_cast<size_t>(fused.plan.values[static_cast<size_t>(box)].producer)].node.op_type, "Conv");
        EXPECT_EQ(s.in[2 * l], box);
        EXPECT_EQ(s.in[2 * l + 1], cls);
        EXPECT_EQ(fused.channel_pitch[static_cast<size_t>(box)], 64);
        EXPECT_EQ(fused.channel_pitch[static_cast<size_t>(cls)], 80);
      }
      EXPECT_EQ(s.out[0], fused.plan.outputs[0]);
      EXPECT_EQ(fused.layout[static_cast<size_t>(s.out[0])], Layout::kPlain);
    }
    EXPECT_EQ(tails, 1);
    const bool v8 = std::string(name).find("yolov8") == 0;
    EXPECT_EQ(softmax_plain, v8 ? 0 : 1) << "the DFL's Softmax is gone (YOLO11's C2PSA attention keeps its own)";
    if (v8) {
      EXPECT_EQ(generic, 0) << "no plain-layout step left in YOLOv8n";
    }
    const auto launching = [](const engine::GpuStepPlan& sp) {  // steps other than views (no kernel)
      int n = 0;
      for (const auto& s : sp.steps) n += s.kind != GpuStepKind::kView;
      return n;
    };
    std::printf("%s: %zu steps (%d not views) unfused, %zu (%d) with the fused tail\n", name, plain.steps.size(),
                launching(plain), fused.steps.size(), launching(fused));
    EXPECT_LT(fused.steps.size() + 20, plain.steps.size());
    EXPECT_LE(fused.arena_bytes, plain.arena_bytes);
  }
}

// YOLO11's C2PSA attention (GpuStepOptions::fuse_attention): one step reading the qkv convolution's
// NHWC output and writing x and pe's input in NHWC, which the Add, pe and proj read as they are: no
// Softmax, MatMul, gather or layout reorder remains (with the fused v8 tail: none in the network;
// the input's conversion is no step). A block whose shared memory exceeds the limit keeps its steps.
TEST(GpuSteps, FusedAttention) {
  YOLOCU_REQUIRE_V8(path, "yolo11n.onnx");
  const Model m = load_onnx(path);
  engine::GpuStepOptions o;
  o.act_elem_size = 2;
  o.fuse_v8_tail = true;
  o.attention_smem = size_t{99} << 10;
  const auto plain = engine::plan_gpu_steps(engine::build_plan(m, {{1, 3, 640, 640}}), o);
  o.fuse_attention = true;
  const auto fused = engine::plan_gpu_steps(engine::build_plan(m, {{1, 3, 640, 640}}), o);
  check_consistent(fused, 2);
  EXPECT_TRUE(plain.attention.empty());
  ASSERT_EQ(fused.attention.size(), 1u);
  EXPECT_EQ(fused.fused_attention_nodes, 10);
  const engine::AttentionBlock& a = fused.attention[0];
  std::map<GpuStepKind, int> kinds;
  for (const auto& s : fused.steps) {
    ++kinds[s.kind];
    if (s.kind != GpuStepKind::kAttention) continue;
    ASSERT_EQ(s.in.size(), 1u);
    ASSERT_EQ(s.out.size(), 2u);
    EXPECT_EQ(s.in[0], a.qkv);
    EXPECT_EQ(fused.plan.nodes[static_cast<size_t>(fused.plan.values[static_cast<size_t>(a.qkv)].producer)].node.op_type, "Conv");
    EXPECT_EQ(s.out[0], a.out);
    EXPECT_EQ(s.out[1], a.v_image);
    for (int id : {s.in[0], s.out[0], s.out[1]}) {
      EXPECT_EQ(fused.layout[static_cast<size_t>(id)], Layout::kNhwc);
      EXPECT_EQ(fused.channel_offset[static_cast<size_t>(id)], -1);
    }
    EXPECT_EQ(fused.channel_pitch[static_cast<size_t>(s.in[0])], 256);
    EXPECT_EQ(fused.channel_pitch[static_cast<size_t>(s.out[0])], 128);
  }
  EXPECT_EQ(kinds[GpuStepKind::kAttention], 1);
  for (GpuStepKind k : {GpuStepKind::kSoftmax, GpuStepKind::kMatMul, GpuStepKind::kGather, GpuStepKind::kBinary,
                        GpuStepKind::kToPlain, GpuStepKind::kToNhwc})
    EXPECT_EQ(kinds[k], 0) << engine::gpu_step_kind_name(k);
  const auto launching = [](const engine::GpuStepPlan& sp) {  // steps other than views (no kernel)
    int n = 0;
    for (const auto& s : sp.steps) n += s.kind != GpuStepKind::kView;
    return n;
  };
  std::printf("yolo11n: %zu steps (%d not views) unfused attention, %zu (%d) fused\n", plain.steps.size(),
              launching(plain), fused.steps.size(), launching(fused));
  // Unfused: qkv to plain, 3 Split gathers, Mul, 2 Transposes, 2 MatMuls, Softmax, x and pe's input
  // back to NHWC (13 kernels; 3 Reshapes are views). Fused: 1. And the Add x + pe(v): fused into pe
  // as its residual, since the attention step has made x before pe runs (unfused, x comes after).
  EXPECT_EQ(launching(plain) - launching(fused), 13);
  int pe_with_x = 0;
  for (const auto& s : fused.steps) pe_with_x += s.kind == GpuStepKind::kConv && s.residual == a.out;
  EXPECT_EQ(pe_with_x, 1);
  // fp32 keys and values of 400 tokens need 165 KiB: over 99 KiB unfused, under sm_90's 227 KiB fused.
  o.act_elem_size = 4;
  EXPECT_TRUE(engine::plan_gpu_steps(engine::build_plan(m, {{1, 3, 640, 640}}), o).attention.empty());
  o.attention_smem = size_t{227} << 10;
  EXPECT_EQ(engine::plan_gpu_steps(engine::build_plan(m, {{1, 3, 640, 640}}), o).attention.size(), 1u);
}

// The concatenated form (ultralytics < 8.3.x, engine/v8_head.hpp): the tail reads each level's
// channel Concat of its two convolutions (NHWC, the convolutions written into it in place) as both
// its box and its class source.
TEST(GpuSteps, FusedV8TailConcatenatedForm) {
  test::SynthV8 o;
  o.concatenated = true;
  engine::GpuStepOptions opt;
  opt.act_elem_size = 2;
  opt.fuse_v8_tail = true;
  const auto sp = engine::plan_gpu_steps(engine::build_plan(*test::synth_v8_head(o), {{2, 3, 64, 64}}), opt);
  check_consistent(sp, 2);
  ASSERT_EQ(sp.v8_heads.size(), 1u);
  int tails = 0, concats = 0;
  for (const auto& s : sp.steps) {
    concats += s.kind == GpuStepKind::kConcatNhwc;
    if (s.kind != GpuStepKind::kV8Tail) continue;
    ++tails;
    ASSERT_EQ(s.in.size(), 6u);
    for (size_t l = 0; l < 3; ++l) {
      EXPECT_EQ(s.in[2 * l], s.in[2 * l + 1]);
      EXPECT_EQ(sp.layout[static_cast<size_t>(s.in[2 * l])], Layout::kNhwc);
      EXPECT_EQ(sp.channel_pitch[static_cast<size_t>(s.in[2 * l])], 144);
      EXPECT_EQ(sp.v8_heads[0].levels[l].cls_channel, 64);
    }
  }
  EXPECT_EQ(tails, 1);
  EXPECT_EQ(concats, 3) << "the levels' channel Concats stay";
  EXPECT_EQ(sp.steps.size(), 6u + 3u + 1u) << "6 convolutions, 3 Concats, the tail";
}

TEST(GpuSteps, RawHeadsOutputsArePlain) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_raw_heads.onnx");
  const auto sp = plan_for(path, 1);
  ASSERT_EQ(sp.plan.outputs.size(), 3u);
  for (int id : sp.plan.outputs) EXPECT_EQ(sp.plan.values[static_cast<size_t>(id)].shape.size(), 4u);
}

}  // namespace
}  // namespace yolocu

namespace yolocu {
namespace {

// Copy-free Concat: YOLOv5's C3 blocks concatenate two convolutions that nothing else reads (both
// written in place: 8 blocks x 2), the neck's four Concats one input each (the upsample, or the
// stride-2 convolution) and copy the backbone / neck feature that other layers read too (SPPF's
// Concat is its kernel's output: no Concat step). Each in-place input lives in the Concat's
// buffer at its channel offset with the Concat's channel count as pitch, is written by a Conv or a
// Resize and read by nothing but the Concat; the arena is the same or smaller.
TEST(GpuSteps, CopyFreeConcat) {
  for (const char* name : {"yolov5n.onnx", "yolov5n_dyn.onnx", "yolov5s_random_fp16.onnx"}) {
    YOLOCU_REQUIRE_DATA(path, std::string("models/") + name);
    for (size_t es : {size_t{2}, size_t{4}}) {
      SCOPED_TRACE(std::string(name) + (es == 2 ? " fp16" : " fp32"));
      const int64_t batch = std::string(name) == "yolov5n_dyn.onnx" ? 8 : 1;
      const auto on = plan_for(path, batch, es, true);
      const auto off = plan_for(path, batch, es, true, false);
      check_consistent(on, es);
      EXPECT_EQ(on.concat_inputs_in_place, 20);
      EXPECT_EQ(on.concat_inputs_copied, 4);
      EXPECT_EQ(off.concat_inputs_in_place, 0);
      EXPECT_LE(on.arena_bytes, off.arena_bytes);
      std::vector<int> readers(on.plan.values.size(), 0), writer(on.plan.values.size(), -1);
      for (size_t i = 0; i < on.steps.size(); ++i) {
        for (int id : on.steps[i].in)
          if (id >= 0) ++readers[static_cast<size_t>(id)];
        for (int id : on.steps[i].out)
          if (id >= 0) writer[static_cast<size_t>(id)] = static_cast<int>(i);
      }
      int placed = 0;
      for (const auto& s : on.steps) {
        if (s.kind != GpuStepKind::kConcatNhwc) continue;
        const size_t y = static_cast<size_t>(s.out[0]);
        const int64_t cy = on.plan.values[y].shape[1];
        int64_t c0 = 0;
        for (int id : s.in) {
          const size_t v = static_cast<size_t>(id);
          const auto& pv = on.plan.values[v];
          if (on.channel_offset[v] >= 0) {
            ++placed;
            EXPECT_EQ(on.root[v], static_cast<int>(y)) << pv.name;
            EXPECT_EQ(on.channel_offset[v], c0) << pv.name;
            EXPECT_EQ(on.channel_pitch[v], cy) << pv.name;
            EXPECT_EQ(on.offset[v], on.offset[y] + c0 * static_cast<int64_t>(es)) << pv.name;
            EXPECT_EQ(readers[v], 1) << pv.name;
            ASSERT_GE(writer[v], 0);
            const GpuStepKind wk = on.steps[static_cast<size_t>(writer[v])].kind;
            EXPECT_TRUE(wk == GpuStepKind::kConv || wk == GpuStepKind::kResize) << pv.name;
            EXPECT_EQ(c0 * static_cast<int64_t>(es) % 16, 0) << pv.name;
          } else {
            EXPECT_EQ(on.root[v], static_cast<int>(v)) << pv.name;
          }
          c0 += pv.shape[1];
        }
        EXPECT_EQ(c0, cy);
      }
      EXPECT_EQ(placed, 20);
    }
  }
}

// SPPF as one step: yolov5's three chained 5x5 max pools and their Concat with the pools' input
// become one kSppf step (pool 5) reading the NHWC input and writing the 4c-channel output; with the
// option off, or a map too large for the kernel (896 px input: 28x28), the steps stay.
TEST(GpuSteps, FusedSppf) {
  for (const char* name : {"yolov5n.onnx", "yolov5s_random_fp16.onnx"}) {
    YOLOCU_REQUIRE_DATA(path, std::string("models/") + name);
    for (size_t es : {size_t{2}, size_t{4}}) {
      SCOPED_TRACE(std::string(name) + (es == 2 ? " fp16" : " fp32"));
      const auto on = plan_for(path, 1, es, true);
      const auto off = plan_for(path, 1, es, true, true, false);
      check_consistent(on, es);
      auto count = [](const engine::GpuStepPlan& sp, GpuStepKind k) {
        int n = 0;
        for (const auto& s : sp.steps) n += s.kind == k;
        return n;
      };
      EXPECT_EQ(on.fused_sppf, 1);
      EXPECT_EQ(count(on, GpuStepKind::kSppf), 1);
      EXPECT_EQ(count(on, GpuStepKind::kMaxPool), 0);
      EXPECT_EQ(count(off, GpuStepKind::kMaxPool), 3);
      EXPECT_EQ(off.fused_sppf, 0);
      EXPECT_EQ(count(on, GpuStepKind::kConcatNhwc) + 1, count(off, GpuStepKind::kConcatNhwc));
      for (const auto& s : on.steps) {
        if (s.kind != GpuStepKind::kSppf) continue;
        EXPECT_EQ(s.pool, 5);
        ASSERT_EQ(s.in.size(), 1u);
        const auto& x = on.plan.values[static_cast<size_t>(s.in[0])];
        const auto& y = on.plan.values[static_cast<size_t>(s.out[0])];
        EXPECT_EQ(on.layout[static_cast<size_t>(s.in[0])], Layout::kNhwc);
        EXPECT_EQ(y.shape[1], 4 * x.shape[1]);
        EXPECT_EQ(y.shape[2], 20);
      }
    }
  }
  YOLOCU_REQUIRE_DATA(dyn, "models/yolov5n_dyn.onnx");
  EXPECT_EQ(plan_for(dyn, 1, 2, true, true, true, 832).fused_sppf, 1) << "26x26 fits the kernel";
  EXPECT_EQ(plan_for(dyn, 1, 4, true, true, true, 896).fused_sppf, 0) << "28x28 does not";
}

// The SPPF matcher on small graphs made for it (tests/python/make_op_cases.py, sppf_cases; the
// CPU engine runs the same models against ONNX Runtime in Ops.*): the exact pattern with 5x5 and
// 3x3 pools is one kSppf step; a chain of mixed kernel sizes, a pool that one more op reads, the
// Concat's inputs in another order, or a pool that is a graph output keep their pools.
TEST(GpuSteps, SppfPatterns) {
  YOLOCU_REQUIRE_OP_CASES(dir, "sppfcases", "Sppf");
  const std::map<std::string, std::pair<int, int>> expected = {  // name: fused blocks, pool size
      {"SppfExact", {1, 5}},        {"SppfKernel3", {1, 3}}, {"SppfMixedKernels", {0, 0}},
      {"SppfExtraReader", {0, 0}},  {"SppfOrder", {0, 0}},   {"SppfPoolIsOutput", {0, 0}}};
  std::ifstream manifest(dir + "/manifest.txt");
  std::string line;
  int cases = 0;
  while (std::getline(manifest, line)) {
    std::istringstream is(line);
    std::string name;
    is >> name;
    SCOPED_TRACE(name);
    const auto e = expected.find(name.substr(0, name.rfind("_op")));
    ASSERT_NE(e, expected.end()) << "a case without an expectation";
    const Model m = load_onnx(dir + "/" + name + "/model.onnx");
    const Tensor x = load_npy(dir + "/" + name + "/in0.npy");
    for (size_t es : {size_t{2}, size_t{4}}) {
      engine::GpuStepOptions o;
      o.act_elem_size = es;
      const auto sp = engine::plan_gpu_steps(engine::build_plan(m, {x.shape()}), o);
      check_consistent(sp, es);
      EXPECT_EQ(sp.fused_sppf, e->second.first);
      int pools = 0, sppf = 0;
      for (const auto& st : sp.steps) {
        pools += st.kind == GpuStepKind::kMaxPool;
        if (st.kind == GpuStepKind::kSppf) {
          ++sppf;
          EXPECT_EQ(st.pool, e->second.second);
        }
      }
      EXPECT_EQ(sppf, e->second.first);
      EXPECT_EQ(pools, e->second.first ? 0 : 3);
    }
    ++cases;
  }
  EXPECT_EQ(cases, 6 * 8) << "6 patterns at opsets 11-18";
}

// An already quantised (QDQ) export: its activations are int8 between QuantizeLinear and
// DequantizeLinear, which the GPU engine does not run; planning refuses it as kUnsupported (so a
// detector on device auto falls back to the CPU engine, which runs it) and says what to do.
TEST(GpuSteps, QuantisedModelRefusedNamingTheCpuEngine) {
  YOLOCU_REQUIRE_OP_CASES(dir, "qdqconvcases", "QdqConv");
  std::ifstream manifest(dir + "/manifest.txt");
  std::string line;
  int cases = 0;
  while (std::getline(manifest, line)) {
    const std::string name = line.substr(0, line.find(' '));
    SCOPED_TRACE(name);
    const Model m = load_onnx(dir + "/" + name + "/model.onnx");
    const Tensor x = load_npy(dir + "/" + name + "/in0.npy");
    try {
      engine::plan_gpu_steps(engine::build_plan(m, {x.shape()}), engine::GpuStepOptions{});
      ADD_FAILURE() << "planned a quantised model";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      const std::string what = e.what();
      EXPECT_NE(what.find("has type int8"), std::string::npos) << what;
      EXPECT_NE(what.find("quantised (QDQ) model runs on the CPU engine"), std::string::npos) << what;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 6) << "the QDQ convolution at opsets 13-18";
}

}  // namespace
}  // namespace yolocu

// The INT8 lowering of the GPU engine's step plan (src/engine/cuda/planning/int8_lowering.cpp) on
// yolov5n, YOLOv8n and YOLO11n with real calibrations: every INT8 convolution reads an int8 copy at
// its calibrated input scale, written once before it by the convolution producing the value or by
// a Quantize step; every other convolution keeps its float step and a reason; the copies have
// their bytes in the arena.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/gpu_steps.hpp"
#include "int8_fixture.hpp"
#include "test_util.hpp"
#include "yolocu/int8.hpp"

namespace yolocu {
namespace {

using engine::GpuStep;
using engine::GpuStepKind;
using engine::GpuStepPlan;
using engine::Layout;
using int8_test::Fixture;

GpuStepPlan lower(const Fixture& f, const Int8Calibration& cal, size_t act_elem_size = 2, bool int8_residuals = false) {
  engine::GpuStepOptions o;
  o.act_elem_size = act_elem_size;
  o.int8_residuals = int8_residuals;
  o.fuse_detect_tail = o.fuse_v8_tail = o.fuse_attention = true;
  o.int8 = &cal;
  return engine::plan_gpu_steps(f.plan, o);
}

bool reads(const GpuStep& st, int v) {
  return st.residual == v || std::find(st.in.begin(), st.in.end(), v) != st.in.end();
}

// The step writing value v (-1: none), and how many steps write it.
int writer_of(const GpuStepPlan& sp, int v, int* writers = nullptr) {
  int w = -1, n = 0;
  for (size_t i = 0; i < sp.steps.size(); ++i)
    if (std::find(sp.steps[i].out.begin(), sp.steps[i].out.end(), v) != sp.steps[i].out.end()) {
      w = static_cast<int>(i);
      ++n;
    }
  if (writers) *writers = n;
  return w;
}

const std::string& name(const GpuStepPlan& sp, int v) { return sp.plan.values[static_cast<size_t>(v)].name; }

int first_reader(const GpuStepPlan& sp, int v) {
  for (size_t i = 0; i < sp.steps.size(); ++i)
    if (reads(sp.steps[i], v)) return static_cast<int>(i);
  return -1;
}

// Does step `ws` write value `v` as an int8 copy at `scale`?
bool writes_copy_at(const GpuStepPlan& sp, const GpuStep& ws, int v, float scale) {
  if (ws.kind == GpuStepKind::kQuantize) return ws.out[0] == v && ws.scale == scale;
  if (ws.kind != GpuStepKind::kConvInt8) return false;
  const auto it = std::find(ws.out.begin(), ws.out.end(), v);
  return it != ws.out.end() && sp.int8_convs[static_cast<size_t>(ws.int8)].out_scales[static_cast<size_t>(it - ws.out.begin())] == scale;
}

// The rules of planning/passes.hpp's plan_int8, checked step by step against the calibration.
void expect_lowering_holds(const GpuStepPlan& sp, const Int8Calibration& cal, const std::string& model) {
  SCOPED_TRACE(model);
  const size_t nv = sp.plan.values.size();
  ASSERT_EQ(sp.layout.size(), nv);
  ASSERT_EQ(sp.offset.size(), nv);
  // each int8 copy: in the arena; one of its own written once before its first reader, or an int8
  // Concat's, whose slices (copies of its inputs, each written once, never read alone) tile it
  for (size_t v = 0; v < nv; ++v) {
    if (sp.layout[v] != Layout::kNhwcInt8) continue;
    const int id = static_cast<int>(v);
    int writers = 0;
    const int w = writer_of(sp, id, &writers);
    const int first_read = first_reader(sp, id);
    EXPECT_EQ(sp.plan.values[v].dtype, DType::kInt8);
    EXPECT_GE(sp.offset[v], 0) << name(sp, id);
    if (sp.root[v] != id) {  // a slice
      const size_t r = static_cast<size_t>(sp.root[v]);
      EXPECT_EQ(sp.layout[r], Layout::kNhwcInt8) << name(sp, id);
      EXPECT_EQ(sp.channel_pitch[v], sp.plan.values[r].shape[1]) << name(sp, id);
      EXPECT_EQ(writers, 1) << name(sp, id);
      EXPECT_EQ(first_read, -1) << name(sp, id) << " is read apart from its Concat";
      EXPECT_LT(w, first_reader(sp, static_cast<int>(r))) << name(sp, id);
      continue;
    }
    EXPECT_EQ(engine::value_bytes(sp, id, 2), static_cast<size_t>(shape_numel(sp.plan.values[v].shape)));
    EXPECT_GE(first_read, 0) << name(sp, id) << " is never read";
    std::vector<std::pair<int64_t, int64_t>> slices;  // (first channel, channels)
    for (size_t u = 0; u < nv; ++u)
      if (u != v && sp.root[u] == id) slices.emplace_back(sp.channel_offset[u], sp.plan.values[u].shape[1]);
    if (slices.empty()) {
      EXPECT_EQ(writers, 1) << name(sp, id);
      EXPECT_LT(w, first_read) << name(sp, id);
      continue;
    }
    EXPECT_EQ(writers, 0) << name(sp, id);
    std::sort(slices.begin(), slices.end());
    int64_t next = 0;
    for (const auto& [c0, c] : slices) {
      EXPECT_EQ(c0, next) << name(sp, id);
      next = c0 + c;
    }
    EXPECT_EQ(next, sp.plan.values[v].shape[1]) << name(sp, id);
  }
  int int8_steps = 0;
  for (const GpuStep& st : sp.steps) {
    if (st.kind == GpuStepKind::kQuantize) {
      EXPECT_EQ(sp.layout[static_cast<size_t>(st.in[0])], Layout::kNhwc) << st.label;
      EXPECT_EQ(sp.layout[static_cast<size_t>(st.out[0])], Layout::kNhwcInt8) << st.label;
      EXPECT_GT(st.scale, 0.f) << st.label;
      continue;
    }
    const Int8ConvScales* k =
        st.node >= 0 ? cal.conv(sp.plan.nodes[static_cast<size_t>(st.node)].node.name) : nullptr;
    if (st.kind == GpuStepKind::kConv) {
      ASSERT_NE(k, nullptr) << st.label;
      const bool listed = std::any_of(sp.int8_float_convs.begin(), sp.int8_float_convs.end(),
                                      [&](const engine::Int8FloatConv& f) { return f.node == st.node && !f.why.empty(); });
      EXPECT_TRUE(listed) << st.label << " runs in float without a reason";
      continue;
    }
    if (st.kind != GpuStepKind::kConvInt8) continue;
    ++int8_steps;
    ASSERT_NE(k, nullptr) << st.label;
    EXPECT_FALSE(k->keep_float) << st.label;
    ASSERT_GE(st.int8, 0);
    const engine::GpuInt8Conv& g = sp.int8_convs[static_cast<size_t>(st.int8)];
    EXPECT_EQ(g.x_scale, cal.tensor(k->input)->scale) << st.label;
    EXPECT_EQ(g.w_scales, k->weight_scales) << st.label;
    // its input: the int8 copy of the calibration's input tensor at that scale, written (or its
    // slices written) by steps that make it at that scale
    const int x = st.in[0];
    ASSERT_EQ(sp.layout[static_cast<size_t>(x)], Layout::kNhwcInt8) << st.label;
    EXPECT_EQ(name(sp, x).rfind(k->input + ":int8", 0), 0u) << st.label << " reads " << name(sp, x);
    bool sliced = false;
    for (int u = 0; u < static_cast<int>(nv); ++u) sliced = sliced || (u != x && sp.root[static_cast<size_t>(u)] == x);
    for (int u = 0; u < static_cast<int>(nv); ++u) {
      if (sp.root[static_cast<size_t>(u)] != x || (sliced && u == x)) continue;
      const int w = writer_of(sp, u);
      ASSERT_GE(w, 0) << st.label << ": nothing writes " << name(sp, u);
      EXPECT_TRUE(writes_copy_at(sp, sp.steps[static_cast<size_t>(w)], u, g.x_scale)) << st.label << ": " << name(sp, u);
    }
    // its outputs: one or two forms of the calibration's output
    ASSERT_GE(st.out.size(), 1u);
    ASSERT_LE(st.out.size(), 2u);
    ASSERT_EQ(g.out_scales.size(), st.out.size());
    for (size_t j = 0; j < st.out.size(); ++j) {
      const Layout l = sp.layout[static_cast<size_t>(st.out[j])];
      if (g.out_scales[j] == 0.f) {
        EXPECT_EQ(l, Layout::kNhwc) << st.label;
        EXPECT_EQ(name(sp, st.out[j]), k->output) << st.label;
      } else {
        EXPECT_EQ(l, Layout::kNhwcInt8) << st.label;
      }
    }
    if (st.residual >= 0) {
      EXPECT_EQ(sp.layout[static_cast<size_t>(st.residual)], g.residual_scale > 0.f ? Layout::kNhwcInt8 : Layout::kNhwc)
          << st.label;
    }
  }
  EXPECT_EQ(static_cast<size_t>(int8_steps), sp.int8_convs.size());
  EXPECT_EQ(int8_steps + sp.int8_float_convs.size(), cal.convs.size());
}

const GpuStep* step_of(const GpuStepPlan& sp, const std::string& node) {
  for (const GpuStep& st : sp.steps)
    if (st.node >= 0 && sp.plan.nodes[static_cast<size_t>(st.node)].node.name == node) return &st;
  return nullptr;
}

TEST(Int8Lowering, Yolov5nPlanHolds) {
  NEED_YOLOV5N(f);
  const GpuStepPlan sp = lower(*f, f->cal);
  expect_lowering_holds(sp, f->cal, "yolov5n");
  // every convolution but the stem and the three Detect heads (kept in float by the calibration)
  // runs INT8: nothing of yolov5n's GPU plan stops one
  EXPECT_EQ(sp.int8_convs.size(), f->cal.convs.size() - 4);
  for (const auto& fc : sp.int8_float_convs) EXPECT_EQ(fc.why, "kept in float by the calibration");
  // The C3 blocks' Concats (model.2, 4, 6, 8, 13, 17, 20, 23) run on int8 values: INT8 steps write
  // both inputs (the bottleneck's output, cv2's) read by the Concat alone. Quantised from fp16: the
  // values made by float steps that INT8 convolutions read: the stem's output, SPPF's output and
  // the four neck Concats (model.12, 16, 19, 22: one input is a Resize's).
  EXPECT_EQ(sp.int8_concats, 8);
  EXPECT_EQ(sp.quantize_steps, 6);
  const GpuStep* cv3 = step_of(sp, "/model.2/cv3/conv/Conv");
  const GpuStep* cv2 = step_of(sp, "/model.2/cv2/conv/Conv");
  ASSERT_TRUE(cv3 && cv2);
  EXPECT_EQ(cv3->kind, GpuStepKind::kConvInt8);
  EXPECT_EQ(writer_of(sp, cv3->in[0]), -1);  // its slices' writers only
  ASSERT_EQ(cv2->out.size(), 1u);            // int8 only, into its slice of the Concat's copy
  EXPECT_EQ(sp.root[static_cast<size_t>(cv2->out[0])], cv3->in[0]);
  EXPECT_EQ(sp.channel_offset[static_cast<size_t>(cv2->out[0])], 16);  // after the bottleneck's 16
  const int concat2 = int8_test::value_id(sp.plan, f->cal.conv("/model.2/cv3/conv/Conv")->input);
  EXPECT_EQ(writer_of(sp, concat2), -1) << "the fp16 Concat step of model.2 is gone";
  // model.12's Concat reads a Resize: in fp16, quantised for model.13
  const GpuStep* c13 = step_of(sp, "/model.13/cv1/conv/Conv");
  ASSERT_NE(c13, nullptr);
  const int q13 = writer_of(sp, c13->in[0]);
  ASSERT_GE(q13, 0);
  EXPECT_EQ(sp.steps[static_cast<size_t>(q13)].kind, GpuStepKind::kQuantize);
  // model.2's cv1 feeds its bottleneck: as the input of its cv1 (int8) and as the residual of its
  // cv2 (fp16, as simulated INT8 adds it): two forms from one step
  const GpuStep* cv1 = step_of(sp, "/model.2/cv1/conv/Conv");
  const GpuStep* m_cv1 = step_of(sp, "/model.2/m/m.0/cv1/conv/Conv");
  const GpuStep* m_cv2 = step_of(sp, "/model.2/m/m.0/cv2/conv/Conv");
  ASSERT_TRUE(cv1 && m_cv1 && m_cv2);
  ASSERT_EQ(cv1->out.size(), 2u);
  EXPECT_NE(std::find(cv1->out.begin(), cv1->out.end(), m_cv1->in[0]), cv1->out.end());
  EXPECT_NE(std::find(cv1->out.begin(), cv1->out.end(), m_cv2->residual), cv1->out.end());
  EXPECT_EQ(sp.layout[static_cast<size_t>(m_cv2->residual)], Layout::kNhwc);
  // the Detect head reads model.17's output in fp16; model.18 its int8 copy: two forms from one step
  const GpuStep* c17 = step_of(sp, "/model.17/cv3/conv/Conv");
  ASSERT_NE(c17, nullptr);
  EXPECT_EQ(c17->out.size(), 2u);
}

// int8_residuals on: a residual with an int8 copy is added from it, so model.2's cv1, read only by
// its bottleneck, is written in int8 alone; every other rule holds.
TEST(Int8Lowering, Int8Residuals) {
  NEED_YOLOV5N(f);
  const GpuStepPlan sp = lower(*f, f->cal, 2, true);
  expect_lowering_holds(sp, f->cal, "yolov5n, int8 residuals");
  int residuals = 0;
  for (const GpuStep& st : sp.steps) {
    if (st.kind != GpuStepKind::kConvInt8 || st.residual < 0) continue;
    ++residuals;
    EXPECT_EQ(sp.layout[static_cast<size_t>(st.residual)], Layout::kNhwcInt8) << st.label;
    EXPECT_GT(sp.int8_convs[static_cast<size_t>(st.int8)].residual_scale, 0.f) << st.label;
  }
  EXPECT_EQ(residuals, 7);  // the backbone's bottlenecks: model.2 (1), 4 (2), 6 (3), 8 (1)
  const GpuStep* cv1 = step_of(sp, "/model.2/cv1/conv/Conv");
  const GpuStep* m_cv2 = step_of(sp, "/model.2/m/m.0/cv2/conv/Conv");
  ASSERT_TRUE(cv1 && m_cv2);
  ASSERT_EQ(cv1->out.size(), 1u);
  EXPECT_EQ(m_cv2->residual, cv1->out[0]);
}

// The public summary (yolocu/int8.hpp, what `yolocu inspect --calibration` prints) says what the
// engine's plan holds.
TEST(Int8Lowering, PublicSummary) {
  NEED_YOLOV5N(f);
  const Int8EnginePlan p = plan_int8_engine(f->model, f->cal);
  const GpuStepPlan sp = lower(*f, f->cal);
  EXPECT_EQ(p.int8_convs.size(), sp.int8_convs.size());
  EXPECT_EQ(p.int8_convs.size(), f->cal.convs.size() - 4);
  ASSERT_EQ(p.float_convs.size(), 4u);
  EXPECT_EQ(p.float_convs[0].first, "/model.0/conv/Conv");
  EXPECT_EQ(p.float_convs[0].second, "kept in float by the calibration");
  EXPECT_EQ(p.quantize_steps, 6);
  EXPECT_EQ(p.int8_concats, 8);
  EXPECT_EQ(std::count(p.int8_convs.begin(), p.int8_convs.end(), "/model.2/cv3/conv/Conv"), 1);
  Int8Calibration other = f->cal;
  other.convs.pop_back();
  EXPECT_EQ(test::code_of([&] { plan_int8_engine(f->model, other); }), ErrorCode::kInvalidArgument);
}

TEST(Int8Lowering, FloatActivationsRefused) {
  NEED_YOLOV5N(f);
  std::string msg;
  EXPECT_EQ(test::code_of([&] { lower(*f, f->cal, 4); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("fp16 activations"), std::string::npos) << msg;
}

// YOLOv8n and YOLO11n: the C2f / C3k2 bottlenecks whose residual is a channel view of the block's
// Concat stay in float, named with that reason; the rules hold for the others.
TEST(Int8Lowering, V8AndV11PlansHold) {
  int models = 0;
  for (const char* file : {"yolov8n.onnx", "yolo11n.onnx"}) {
    const std::unique_ptr<Fixture> f = int8_test::make_fixture(test::v8_file(file));
    if (!f) continue;
    ++models;
    const GpuStepPlan sp = lower(*f, f->cal);
    expect_lowering_holds(sp, f->cal, file);
    EXPECT_GT(sp.int8_convs.size(), f->cal.convs.size() / 2) << file;
    const bool view_residual = std::any_of(sp.int8_float_convs.begin(), sp.int8_float_convs.end(), [](const auto& fc) {
      return fc.why == "its residual is a channel view (the INT8 kernels read a packed residual)";
    });
    EXPECT_TRUE(view_residual) << file;
  }
  if (models == 0) GTEST_SKIP() << "needs the YOLOv8 / YOLO11 exports (scripts/v8/make_refs.sh) and coco128";
}

}  // namespace
}  // namespace yolocu

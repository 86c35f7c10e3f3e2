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

GpuStepPlan lower(const Fixture& f, const Int8Calibration& cal, size_t act_elem_size = 2) {
  engine::GpuStepOptions o;
  o.act_elem_size = act_elem_size;
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

// The rules of planning/passes.hpp's plan_int8, checked step by step against the calibration.
void expect_lowering_holds(const GpuStepPlan& sp, const Int8Calibration& cal, const std::string& model) {
  SCOPED_TRACE(model);
  const size_t nv = sp.plan.values.size();
  ASSERT_EQ(sp.layout.size(), nv);
  ASSERT_EQ(sp.offset.size(), nv);
  // each int8 copy: written once, before every reader, read at least once, in the arena
  for (size_t v = 0; v < nv; ++v) {
    if (sp.layout[v] != Layout::kNhwcInt8) continue;
    int writers = 0;
    const int w = writer_of(sp, static_cast<int>(v), &writers);
    EXPECT_EQ(writers, 1) << name(sp, static_cast<int>(v));
    int first_read = -1;
    for (size_t i = 0; i < sp.steps.size() && first_read < 0; ++i)
      if (reads(sp.steps[i], static_cast<int>(v))) first_read = static_cast<int>(i);
    EXPECT_GE(first_read, 0) << name(sp, static_cast<int>(v)) << " is never read";
    EXPECT_LT(w, first_read) << name(sp, static_cast<int>(v));
    EXPECT_EQ(sp.plan.values[v].dtype, DType::kInt8);
    EXPECT_EQ(engine::value_bytes(sp, static_cast<int>(v), 2), static_cast<size_t>(shape_numel(sp.plan.values[v].shape)));
    EXPECT_GE(sp.offset[v], 0) << name(sp, static_cast<int>(v));
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
    // its input: the int8 copy of the calibration's input tensor at that scale
    const int x = st.in[0];
    ASSERT_EQ(sp.layout[static_cast<size_t>(x)], Layout::kNhwcInt8) << st.label;
    const int w = writer_of(sp, x);
    ASSERT_GE(w, 0) << st.label;
    const GpuStep& ws = sp.steps[static_cast<size_t>(w)];
    if (ws.kind == GpuStepKind::kQuantize) {
      EXPECT_EQ(ws.scale, g.x_scale) << st.label;
      EXPECT_EQ(name(sp, ws.in[0]), k->input) << st.label;
    } else {
      ASSERT_EQ(ws.kind, GpuStepKind::kConvInt8) << st.label << " reads a copy written by " << ws.label;
      const engine::GpuInt8Conv& gw = sp.int8_convs[static_cast<size_t>(ws.int8)];
      const size_t j = static_cast<size_t>(std::find(ws.out.begin(), ws.out.end(), x) - ws.out.begin());
      EXPECT_EQ(gw.out_scales[j], g.x_scale) << st.label;
      EXPECT_EQ(cal.conv(sp.plan.nodes[static_cast<size_t>(ws.node)].node.name)->output, k->input) << st.label;
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
  // The values made by float steps that INT8 convolutions read: the stem's output, the Concat of
  // each of the eight C3 blocks (model.2, 4, 6, 8, 13, 17, 20, 23), SPPF's output and the four
  // neck Concats (model.12, 16, 19, 22): MaxPool, Resize and Concat run in fp16 here.
  EXPECT_EQ(sp.quantize_steps, 14);
  const GpuStep* cv3 = step_of(sp, "/model.2/cv3/conv/Conv");
  ASSERT_NE(cv3, nullptr);
  EXPECT_EQ(cv3->kind, GpuStepKind::kConvInt8);
  const GpuStep& q = sp.steps[static_cast<size_t>(writer_of(sp, cv3->in[0]))];
  EXPECT_EQ(q.kind, GpuStepKind::kQuantize);
  EXPECT_EQ(name(sp, q.in[0]), f->cal.conv("/model.2/cv3/conv/Conv")->input);
  // model.2's cv1 feeds only the bottleneck (its cv1's input and cv2's residual): int8 only, read
  // straight from the step that writes it
  const GpuStep* cv1 = step_of(sp, "/model.2/cv1/conv/Conv");
  const GpuStep* m_cv1 = step_of(sp, "/model.2/m/m.0/cv1/conv/Conv");
  const GpuStep* m_cv2 = step_of(sp, "/model.2/m/m.0/cv2/conv/Conv");
  ASSERT_TRUE(cv1 && m_cv1 && m_cv2);
  ASSERT_EQ(cv1->out.size(), 1u);
  EXPECT_EQ(sp.layout[static_cast<size_t>(cv1->out[0])], Layout::kNhwcInt8);
  EXPECT_EQ(m_cv1->in[0], cv1->out[0]);
  EXPECT_EQ(m_cv2->residual, cv1->out[0]);
  // the Detect head reads model.17's output in fp16; model.18 its int8 copy: two forms from one step
  const GpuStep* c17 = step_of(sp, "/model.17/cv3/conv/Conv");
  ASSERT_NE(c17, nullptr);
  EXPECT_EQ(c17->out.size(), 2u);
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

// plan_int8_regions (src/engine/quant/int8_regions.hpp) on yolov5n with a real calibration: the
// rules of the header checked value by value, the convolutions the calibration keeps in float, the
// kernels' limits, and a calibration of another model refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "engine/quant/int8_regions.hpp"
#include "int8_fixture.hpp"
#include "test_util.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"

namespace yolocu {
namespace {

using engine::Int8ConvStep;
using engine::Int8Regions;
using engine::Plan;
using engine::PlanNode;

using int8_test::Fixture;
using int8_test::make_fixture;
using int8_test::name_of;
using int8_test::value_id;

bool commutes(const PlanNode& n) {
  const std::string& op = n.node.op_type;
  return op == "Concat" || op == "MaxPool" || op == "Resize" || op == "Split";
}

bool has_scale(const engine::Int8Value& v, float s) {
  return std::find(v.int8_scales.begin(), v.int8_scales.end(), s) != v.int8_scales.end();
}

// Every rule of int8_regions.hpp, checked from the plan and the calibration directly.
void expect_rules(const Plan& p, const Int8Calibration& cal, const Int8Regions& r) {
  ASSERT_EQ(r.values.size(), p.values.size());
  std::set<int> step_nodes, step_outputs;  // the nodes the steps replace, the values they write
  for (const Int8ConvStep& s : r.convs) {
    const Int8ConvScales* k = cal.conv(p.nodes[static_cast<size_t>(s.node)].node.name);
    ASSERT_NE(k, nullptr);
    EXPECT_FALSE(k->keep_float) << k->node;
    EXPECT_EQ(name_of(p, s.input), k->input);
    EXPECT_EQ(name_of(p, s.output), k->output);
    EXPECT_EQ(s.input_scale, cal.tensor(k->input)->scale)
        << k->node;  // the simulation's scale, bit for bit
    EXPECT_TRUE(has_scale(r.values[static_cast<size_t>(s.input)], s.input_scale)) << k->node;
    if (s.residual >= 0) {
      const auto& x = r.values[static_cast<size_t>(s.residual)];
      EXPECT_TRUE(s.residual_int8 ? !x.int8_scales.empty() : x.fp16) << k->node;
    }
    step_outputs.insert(s.output);
    // the Conv, its SiLU's Sigmoid and Mul (the readers of its output), the residual Add
    step_nodes.insert(s.node);
    for (int c :
         p.values[static_cast<size_t>(p.nodes[static_cast<size_t>(s.node)].out[0])].consumers)
      step_nodes.insert(c);
    step_nodes.insert(p.values[static_cast<size_t>(s.output)].producer);
  }
  for (size_t v = 0; v < p.values.size(); ++v) {
    const auto& pv = p.values[v];
    const auto& f = r.values[v];
    if (pv.constant) continue;
    const bool from_step = step_outputs.count(static_cast<int>(v)) != 0;
    const PlanNode* prod = pv.producer >= 0 ? &p.nodes[static_cast<size_t>(pv.producer)] : nullptr;
    const bool from_commuting = prod != nullptr && !from_step && commutes(*prod);
    // a float producer writes the float; each of its int8 copies is quantised from it
    if (!from_step && !from_commuting && (f.fp16 || !f.int8_scales.empty())) {
      EXPECT_TRUE(f.fp16) << pv.name;
      for (float s : f.int8_scales) {
        const bool q =
            std::any_of(r.quantize.begin(), r.quantize.end(), [&](const engine::Int8Quantize& x) {
              return x.value == static_cast<int>(v) && x.scale == s;
            });
        EXPECT_TRUE(q) << pv.name << " at " << s;
      }
    }
    // a commuting op's forms are its data inputs' forms
    if (from_commuting) {
      std::vector<int> data = {prod->in[0]};
      if (prod->node.op_type == "Concat") data = prod->in;
      for (int i : data) {
        const size_t u = static_cast<size_t>(i);
        for (float s : f.int8_scales) {
          EXPECT_TRUE(has_scale(r.values[u], s)) << pv.name << " <- " << p.values[u].name;
        }
        if (f.fp16) {
          EXPECT_TRUE(r.values[u].fp16) << pv.name << " <- " << p.values[u].name;
        }
      }
    }
    // every reader outside the steps that is not an INT8 input or a commuting op reads the float
    for (int c : pv.consumers) {
      const PlanNode& n = p.nodes[static_cast<size_t>(c)];
      const bool int8_input =
          std::any_of(r.convs.begin(), r.convs.end(), [&](const Int8ConvStep& s) {
            return s.node == c || (s.residual == static_cast<int>(v) && step_nodes.count(c));
          });
      if (int8_input || commutes(n) || step_nodes.count(c)) continue;
      EXPECT_TRUE(f.fp16) << pv.name << " read by " << n.node.op_type << " " << n.node.name;
    }
    if (pv.graph_output) {
      EXPECT_TRUE(f.fp16) << pv.name;
    }
  }
  for (const engine::Int8Quantize& q : r.quantize) {
    EXPECT_TRUE(has_scale(r.values[static_cast<size_t>(q.value)], q.scale));
    EXPECT_EQ(step_outputs.count(q.value), 0u)
        << name_of(p, q.value);  // a step writes its copies itself
  }
}

TEST(Int8Regions, Yolov5nRulesHold) {
  NEED_YOLOV5N(f);
  const Int8Regions r = engine::plan_int8_regions(f->plan, f->cal);
  expect_rules(f->plan, f->cal, r);
  // every convolution but the first and the three Detect heads (kept in float) runs INT8: yolov5n's
  // channels are multiples of 16
  EXPECT_EQ(r.convs.size(), f->cal.convs.size() - 4);
  ASSERT_EQ(r.float_convs.size(), 4u);
  for (const auto& fc : r.float_convs) EXPECT_EQ(fc.why, "kept in float by the calibration");
  // only the float stem's output is quantised (for model.1); every other int8 copy is written by
  // a step or made by a commuting op
  ASSERT_EQ(r.quantize.size(), 1u);
  EXPECT_EQ(name_of(f->plan, r.quantize.front().value), f->cal.conv("/model.0/conv/Conv")->output);
  // SPPF's pooling chain runs in int8 at cv2's input scale
  const Int8ConvScales* sppf_cv2 = f->cal.conv("/model.9/cv2/conv/Conv");
  ASSERT_NE(sppf_cv2, nullptr);
  int pools = 0;
  for (const PlanNode& n : f->plan.nodes) {
    if (n.node.op_type != "MaxPool") continue;
    ++pools;
    const auto& v = r.values[static_cast<size_t>(n.out[0])];
    EXPECT_FALSE(v.fp16) << n.node.name;
    EXPECT_EQ(v.int8_scales, std::vector<float>{f->cal.tensor(sppf_cv2->input)->scale})
        << n.node.name;
  }
  EXPECT_EQ(pools, 3);
  // model.6's output: int8 for model.7 and for the neck's Concat, at their two scales
  const int v6 = value_id(f->plan, f->cal.conv("/model.6/cv3/conv/Conv")->output);
  EXPECT_EQ(r.values[static_cast<size_t>(v6)].int8_scales.size(), 2u);
  EXPECT_FALSE(r.values[static_cast<size_t>(v6)].fp16);
  // model.17's output: float for the Detect head, int8 for model.18
  const int v17 = value_id(f->plan, f->cal.conv("/model.17/cv3/conv/Conv")->output);
  EXPECT_TRUE(r.values[static_cast<size_t>(v17)].fp16);
  EXPECT_EQ(r.values[static_cast<size_t>(v17)].int8_scales.size(), 1u);
  // the steps feeding the Detect head write float: model.17, 20 and 23's cv3, the first two an
  // int8 copy as well for model.18 and model.21
  int float_steps = 0, both = 0;
  for (const Int8ConvStep& s : r.convs) {
    const auto& v = r.values[static_cast<size_t>(s.output)];
    float_steps += v.fp16;
    both += v.fp16 && !v.int8_scales.empty();
  }
  EXPECT_EQ(float_steps, 3);
  EXPECT_EQ(both, 2);
  // the bottlenecks' residuals read their int8 copies
  EXPECT_TRUE(std::any_of(r.convs.begin(), r.convs.end(),
                          [](const Int8ConvStep& s) { return s.residual_int8; }));
}

TEST(Int8Regions, AFloatConvolutionTakesItsInputsOutOfInt8) {
  NEED_YOLOV5N(f);
  Int8Calibration cal = f->cal;
  // model.2's cv3 reads the C3 block's Concat; in float, that Concat and its inputs are float only
  Int8ConvScales* cv3 = nullptr;
  for (Int8ConvScales& k : cal.convs)
    if (k.node == "/model.2/cv3/conv/Conv") cv3 = &k;
  ASSERT_NE(cv3, nullptr);
  const Int8Regions before = engine::plan_int8_regions(f->plan, cal);
  cv3->keep_float = true;
  const Int8Regions r = engine::plan_int8_regions(f->plan, cal);
  expect_rules(f->plan, cal, r);
  EXPECT_EQ(r.convs.size(), before.convs.size() - 1);
  const size_t concat = static_cast<size_t>(value_id(f->plan, cv3->input));
  EXPECT_FALSE(before.values[concat].fp16);
  EXPECT_EQ(before.values[concat].int8_scales.size(), 1u);
  EXPECT_TRUE(r.values[concat].fp16);
  EXPECT_TRUE(r.values[concat].int8_scales.empty());
  for (int u : f->plan.nodes[static_cast<size_t>(f->plan.values[concat].producer)].in) {
    EXPECT_TRUE(r.values[static_cast<size_t>(u)].fp16) << name_of(f->plan, u);
  }
  EXPECT_LT(r.int8_copies(), before.int8_copies());
}

TEST(Int8Regions, KernelLimitsAndOtherModelsRefused) {
  NEED_YOLOV5N(f);
  engine::Int8KernelLimits wide;
  wide.input_channel_multiple = 4096;
  const Int8Regions none = engine::plan_int8_regions(f->plan, f->cal, wide);
  EXPECT_TRUE(none.convs.empty());
  EXPECT_EQ(none.int8_values(), 0);
  EXPECT_TRUE(none.quantize.empty());
  ASSERT_EQ(none.float_convs.size(), f->cal.convs.size());
  EXPECT_NE(none.float_convs[1].why.find("input channels (the kernels take multiples of 4096)"),
            std::string::npos)
      << none.float_convs[1].why;
  Int8Calibration other = f->cal;
  other.convs[5].node = "/model.99/conv/Conv";
  std::string msg;
  EXPECT_EQ(test::code_of([&] { engine::plan_int8_regions(f->plan, other); }, &msg),
            ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("'/model.99/conv/Conv' is not in the model's plan"), std::string::npos) << msg;
  other = f->cal;
  other.convs[5].output = other.convs[6].output;
  EXPECT_EQ(test::code_of([&] { engine::plan_int8_regions(f->plan, other); }, &msg),
            ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("in the calibration"), std::string::npos) << msg;
}

// YOLOv8 and YOLO11 (scripts/v8/make_refs.sh's exports): C2f / C3k2 Splits and YOLO11's
// attention in the graph; the rules hold, and the attention reads float.
TEST(Int8Regions, V8AndV11RulesHold) {
  int models = 0;
  for (const char* name : {"yolov8n.onnx", "yolo11n.onnx"}) {
    const std::unique_ptr<Fixture> f = make_fixture(test::v8_file(name));
    if (!f) continue;
    ++models;
    const Int8Regions r = engine::plan_int8_regions(f->plan, f->cal);
    expect_rules(f->plan, f->cal, r);
    EXPECT_GT(r.convs.size(), f->cal.convs.size() / 2) << name;
    EXPECT_GT(r.int8_values(), 0) << name;
    for (const PlanNode& n : f->plan.nodes) {
      if (n.node.op_type != "MatMul" && n.node.op_type != "Softmax") continue;
      for (int v : n.in) {
        if (v < 0) continue;
        EXPECT_TRUE(r.values[static_cast<size_t>(v)].fp16) << name << ": " << n.node.name;
      }
    }
  }
  if (models == 0)
    GTEST_SKIP() << "needs the YOLOv8 / YOLO11 exports (scripts/v8/make_refs.sh) and coco128";
}

}  // namespace
}  // namespace yolocu

// plan_int8_regions (src/engine/quant/int8_regions.hpp) on yolov5n with a real calibration: the
// rules of the header checked value by value, the convolutions the calibration keeps in float, the
// kernels' limits, and a calibration of another model refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "engine/quant/int8_regions.hpp"
#include "test_util.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"

namespace yolocu {
namespace {

using engine::Int8ConvStep;
using engine::Int8Regions;
using engine::Plan;
using engine::PlanNode;

struct Fixture {
  Model model;
  Plan plan;
  Int8Calibration cal;
};

// A model's plan at 640 and a calibration on one coco128 image (the first convolution and the
// Detect head in float, no sensitivity pass); nullptr without the files.
std::unique_ptr<Fixture> make_fixture(const std::string& model) {
    const std::string images = test::data_file("coco128/images/train2017");
    if (model.empty() || images.empty()) return std::unique_ptr<Fixture>();
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(images)) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    files.resize(1);
    auto x = std::make_unique<Fixture>();
    x->model = load_onnx(model);
    x->plan = engine::build_plan(x->model, {{1, 3, 640, 640}});
    Int8CalibrateOptions o;
    o.keep_worst = 0;
    x->cal = calibrate_int8(model, files, o);
    return x;
}
const Fixture* yolov5n() {
  static std::unique_ptr<Fixture> f = make_fixture(test::data_file("models/yolov5n.onnx"));
  return f.get();
}
#define NEED_YOLOV5N(f)                                                   \
  const Fixture* f = yolov5n();                                           \
  if (f == nullptr) GTEST_SKIP() << "needs models/yolov5n.onnx and coco128"

const std::string& name_of(const Plan& p, int v) { return p.values[static_cast<size_t>(v)].name; }
bool commutes(const PlanNode& n) {
  const std::string& op = n.node.op_type;
  return op == "Concat" || op == "MaxPool" || op == "Resize" || op == "Split";
}

// Every rule of int8_regions.hpp, checked from the plan and the calibration directly.
void expect_rules(const Plan& p, const Int8Calibration& cal, const Int8Regions& r) {
  ASSERT_EQ(r.values.size(), p.values.size());
  std::vector<int> step_input, step_residual, step_output;
  for (const Int8ConvStep& s : r.convs) {
    const Int8ConvScales* k = cal.conv(p.nodes[static_cast<size_t>(s.node)].node.name);
    ASSERT_NE(k, nullptr);
    EXPECT_FALSE(k->keep_float) << k->node;
    EXPECT_EQ(name_of(p, s.input), k->input);
    EXPECT_EQ(name_of(p, s.output), k->output);
    EXPECT_EQ(s.input_scale, cal.tensor(k->input)->scale) << k->node;  // the simulation's scale, bit for bit
    EXPECT_EQ(s.int8_output, r.values[static_cast<size_t>(s.output)].int8) << k->node;
    const auto& in = r.values[static_cast<size_t>(s.input)];
    const bool quantised = std::any_of(r.quantize.begin(), r.quantize.end(), [&](const engine::Int8Quantize& q) {
      return q.value == s.input && q.scale == s.input_scale;
    });
    // an INT8 input: held in int8 with its scale, or quantised for it (not both)
    EXPECT_NE(in.int8 && in.scale == s.input_scale, quantised) << k->node;
    step_input.push_back(s.input);
    if (s.residual >= 0) step_residual.push_back(s.residual);
    step_output.push_back(s.output);
  }
  for (const engine::Int8Quantize& q : r.quantize) EXPECT_FALSE(r.values[static_cast<size_t>(q.value)].int8);
  auto has = [](const std::vector<int>& a, int v) { return std::find(a.begin(), a.end(), v) != a.end(); };
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (!r.values[v].int8) continue;
    const auto& pv = p.values[v];
    const float s = r.values[v].scale;
    EXPECT_FALSE(pv.graph_output) << pv.name;
    // the producer: an INT8 step, or an op commuting with quantisation over int8 inputs of scale s
    if (!has(step_output, static_cast<int>(v))) {
      ASSERT_GE(pv.producer, 0) << pv.name;
      const PlanNode& n = p.nodes[static_cast<size_t>(pv.producer)];
      EXPECT_TRUE(commutes(n)) << pv.name << " from " << n.node.op_type;
      for (int u : n.in)
        if (u >= 0 && !p.values[static_cast<size_t>(u)].constant) {
          EXPECT_TRUE(r.values[static_cast<size_t>(u)].int8) << name_of(p, u);
          EXPECT_EQ(r.values[static_cast<size_t>(u)].scale, s) << name_of(p, u);
        }
    }
    // each reader: an INT8 step's input or residual, or an int8 op of the same scale
    for (int c : pv.consumers) {
      const PlanNode& n = p.nodes[static_cast<size_t>(c)];
      if (commutes(n)) {
        for (int w : n.out) {
          if (w < 0) continue;
          EXPECT_TRUE(r.values[static_cast<size_t>(w)].int8) << pv.name << " -> " << n.node.name;
          EXPECT_EQ(r.values[static_cast<size_t>(w)].scale, s) << pv.name << " -> " << n.node.name;
        }
      } else {
        EXPECT_TRUE(has(step_input, static_cast<int>(v)) || has(step_residual, static_cast<int>(v)))
            << pv.name << " read by " << n.node.op_type << " " << n.node.name;
      }
    }
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
  // the float stem's output is quantised once for model.1
  ASSERT_FALSE(r.quantize.empty());
  EXPECT_EQ(name_of(f->plan, r.quantize.front().value), f->cal.conv("/model.0/conv/Conv")->output);
  // most steps write int8, and SPPF's pooling chain runs in int8 at cv2's input scale
  const int int8_out = static_cast<int>(
      std::count_if(r.convs.begin(), r.convs.end(), [](const Int8ConvStep& s) { return s.int8_output; }));
  EXPECT_GT(int8_out, static_cast<int>(r.convs.size()) / 2);
  const Int8ConvScales* sppf_cv2 = f->cal.conv("/model.9/cv2/conv/Conv");
  ASSERT_NE(sppf_cv2, nullptr);
  int pools = 0;
  for (size_t i = 0; i < f->plan.nodes.size(); ++i) {
    const PlanNode& n = f->plan.nodes[i];
    if (n.node.op_type != "MaxPool") continue;
    ++pools;
    EXPECT_TRUE(r.values[static_cast<size_t>(n.out[0])].int8) << n.node.name;
    EXPECT_EQ(r.values[static_cast<size_t>(n.out[0])].scale, f->cal.tensor(sppf_cv2->input)->scale);
  }
  EXPECT_EQ(pools, 3);
  // the residual Adds of the bottlenecks are fused into their steps
  EXPECT_TRUE(std::any_of(r.convs.begin(), r.convs.end(), [](const Int8ConvStep& s) { return s.residual >= 0; }));
}

TEST(Int8Regions, AFloatConvolutionTakesItsInputsOutOfInt8) {
  NEED_YOLOV5N(f);
  Int8Calibration cal = f->cal;
  // model.2's cv3 reads the C3 block's Concat; in float, that Concat and its inputs stay float
  Int8ConvScales* cv3 = nullptr;
  for (Int8ConvScales& k : cal.convs)
    if (k.node == "/model.2/cv3/conv/Conv") cv3 = &k;
  ASSERT_NE(cv3, nullptr);
  const Int8Regions before = engine::plan_int8_regions(f->plan, cal);
  cv3->keep_float = true;
  const Int8Regions r = engine::plan_int8_regions(f->plan, cal);
  expect_rules(f->plan, cal, r);
  EXPECT_EQ(r.convs.size(), before.convs.size() - 1);
  int concat = -1;
  for (size_t v = 0; v < f->plan.values.size(); ++v)
    if (f->plan.values[v].name == cv3->input) concat = static_cast<int>(v);
  ASSERT_GE(concat, 0);
  EXPECT_TRUE(before.values[static_cast<size_t>(concat)].int8);
  EXPECT_FALSE(r.values[static_cast<size_t>(concat)].int8);
  EXPECT_LT(r.int8_values(), before.int8_values());
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
  EXPECT_NE(none.float_convs[1].why.find("input channels (the kernels take multiples of 4096)"), std::string::npos)
      << none.float_convs[1].why;
  Int8Calibration other = f->cal;
  other.convs[5].node = "/model.99/conv/Conv";
  std::string msg;
  EXPECT_EQ(test::code_of([&] { engine::plan_int8_regions(f->plan, other); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("'/model.99/conv/Conv' is not in the model's plan"), std::string::npos) << msg;
  other = f->cal;
  other.convs[5].output = other.convs[6].output;
  EXPECT_EQ(test::code_of([&] { engine::plan_int8_regions(f->plan, other); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("in the calibration"), std::string::npos) << msg;
}

// YOLOv8 and YOLO11 (scripts/v8/make_refs.sh's exports): C2f / C3k2 Splits and YOLO11's
// attention in the graph; the rules hold, and the attention's inputs stay float.
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
        EXPECT_FALSE(r.values[static_cast<size_t>(v)].int8) << name << ": " << n.node.name;
      }
    }
  }
  if (models == 0) GTEST_SKIP() << "needs the YOLOv8 / YOLO11 exports (scripts/v8/make_refs.sh) and coco128";
}

}  // namespace
}  // namespace yolocu

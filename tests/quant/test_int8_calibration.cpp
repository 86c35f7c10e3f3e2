// INT8 calibration: the thresholds of each method against a numpy transcription
// (tests/python/int8_calib_ref.py), the calibration file's round trip and refusals, determinism of
// calibrate_int8() on real images, simulated INT8 in the CPU engine, and the CLI's checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.hpp"
#include "engine/quant/calib_stats.hpp"
#include "test_util.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

using engine::quant::AbsHistogram;
using engine::quant::MinMax;

// Activation-like data: a Laplace body, a spike of exact zeros, sparse large outliers, and
// (silu_like) the negative side squeezed into [-0.28, 0] as after a SiLU.
Tensor synthetic(uint32_t seed, bool silu_like) {
  std::mt19937 rng(seed);
  std::exponential_distribution<float> body(1.5f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Tensor t(DType::kFloat32, {200000});
  float* x = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float r = u(rng);
    float v = r < 0.15f ? 0.f : r < 0.1505f ? 8.f + 12.f * u(rng) : body(rng);
    if (u(rng) < 0.5f) v = silu_like ? -0.28f * u(rng) : -v;
    x[i] = v;
  }
  return t;
}

nlohmann::json numpy_reference(const Tensor& t, const std::string& tag, int bins, double percentile) {
  const std::string dir = test::scratch_dir("int8_calib");
  const std::string npy = dir + "/" + tag + ".npy", out = dir + "/" + tag + ".json";
  save_npy(npy, t);
  std::string log;
  const std::string cmd = test::python() + " " + test::source_dir() + "/tests/python/int8_calib_ref.py " + npy + " " +
                          std::to_string(bins) + " " + std::to_string(percentile) + " > " + out;
  EXPECT_EQ(test::run_command(cmd + " 2>&1", &log), 0) << log;
  std::ifstream f(out);
  return nlohmann::json::parse(f);
}

class CalibStats : public ::testing::TestWithParam<bool> {};

TEST_P(CalibStats, ThresholdsMatchNumpy) {
  if (test::python().empty()) GTEST_SKIP() << "no .venv python with numpy (run scripts/setup.sh)";
  const bool silu_like = GetParam();
  const Tensor t = synthetic(silu_like ? 7 : 3, silu_like);
  const nlohmann::json ref = numpy_reference(t, silu_like ? "silu" : "laplace", 2048, 99.99);
  MinMax mm;
  mm.add(t.data_as<float>(), static_cast<size_t>(t.numel()));
  EXPECT_EQ(static_cast<double>(mm.amax()), ref["max_abs"].get<double>());
  AbsHistogram h(mm.amax(), 2048);
  // in two halves, as two images would come
  h.add(t.data_as<float>(), 100000);
  h.add(t.data_as<float>() + 100000, 100000);
  EXPECT_EQ(h.counts(), ref["hist"].get<std::vector<int64_t>>());
  const double pct = engine::quant::percentile_amax(h, 99.99, mm.amax());
  const double ent = engine::quant::entropy_amax(h, mm.amax());
  EXPECT_NEAR(pct, ref["percentile_amax"].get<double>(), 1e-6 * mm.amax());
  EXPECT_NEAR(ent, ref["entropy_amax"].get<double>(), 1e-6 * mm.amax());
  // the three differ on this data: the outliers set minmax; percentile and entropy clip them
  EXPECT_LT(pct, mm.amax());
  EXPECT_LT(ent, mm.amax());
}

INSTANTIATE_TEST_SUITE_P(Data, CalibStats, ::testing::Values(false, true));

Int8Calibration small_calibration() {
  Int8Calibration c;
  c.method = CalibrationMethod::kPercentile;
  c.percentile = 99.9;
  c.model_sha256 = std::string(64, 'a');
  c.input_width = 640, c.input_height = 480;
  c.num_images = 3;
  c.images_sha256 = std::string(64, 'b');
  c.tensors = {{"images", 1.f, 1.f / 127.f}, {"y", 3.3f, 3.3f / 127.f}, {"z", 0.1f, 0.1f / 127.f}};
  c.convs = {{"conv0", "w0", "images", "y", {0.125f, 1e-7f, 3.f}, false, -1},
             {"conv1", "w1", "y", "z", {0.5f}, true, 0.0123}};
  c.sensitivity_keep = 1;
  return c;
}

TEST(CalibrationFile, RoundTrip) {
  const Int8Calibration c = small_calibration();
  const std::string path = test::scratch_dir("int8_calib") + "/round_trip.json";
  save_int8_calibration(c, path);
  const Int8Calibration r = load_int8_calibration(path, c.model_sha256);
  EXPECT_EQ(r.version, Int8Calibration::kVersion);
  EXPECT_EQ(r.method, c.method);
  EXPECT_EQ(r.percentile, c.percentile);
  EXPECT_EQ(r.model_sha256, c.model_sha256);
  EXPECT_EQ(r.input_width, 640);
  EXPECT_EQ(r.input_height, 480);
  EXPECT_EQ(r.num_images, 3);
  EXPECT_EQ(r.images_sha256, c.images_sha256);
  EXPECT_EQ(r.sensitivity_keep, 1);
  ASSERT_EQ(r.tensors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.tensors[i].name, c.tensors[i].name);
    EXPECT_EQ(r.tensors[i].amax, c.tensors[i].amax);    // floats survive the text exactly
    EXPECT_EQ(r.tensors[i].scale, c.tensors[i].scale);
  }
  ASSERT_EQ(r.convs.size(), 2u);
  EXPECT_EQ(r.convs[0].weight_scales, c.convs[0].weight_scales);
  EXPECT_EQ(r.convs[1].keep_float, true);
  EXPECT_EQ(r.convs[1].sensitivity, 0.0123);
  EXPECT_EQ(r.convs[1].output, "z");
  EXPECT_EQ(int8_calibration_json(r), int8_calibration_json(c));
}

TEST(CalibrationFile, Refusals) {
  const Int8Calibration c = small_calibration();
  const std::string text = int8_calibration_json(c);
  std::string msg;
  // another model: both hashes named
  const std::string other(64, 'f');
  EXPECT_EQ(test::code_of([&] { parse_int8_calibration(text, "cal.json", other); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find(c.model_sha256), std::string::npos) << msg;
  EXPECT_NE(msg.find(other), std::string::npos) << msg;
  // an unknown version
  nlohmann::json j = nlohmann::json::parse(text);
  j["version"] = 2;
  EXPECT_EQ(test::code_of([&] { parse_int8_calibration(j.dump(), "cal.json"); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("version 2"), std::string::npos) << msg;
  // a conv naming a tensor the file lacks
  j = nlohmann::json::parse(text);
  j["tensors"].erase(1);
  EXPECT_EQ(test::code_of([&] { parse_int8_calibration(j.dump(), "cal.json"); }, &msg), ErrorCode::kParse);
  EXPECT_NE(msg.find("'y'"), std::string::npos) << msg;
  // a missing field, a bad scale, not JSON, another JSON file
  j = nlohmann::json::parse(text);
  j["convs"][0].erase("weight_scales");
  EXPECT_EQ(test::code_of([&] { parse_int8_calibration(j.dump(), "cal.json"); }, &msg), ErrorCode::kParse);
  EXPECT_NE(msg.find("weight_scales"), std::string::npos) << msg;
  j = nlohmann::json::parse(text);
  j["tensors"][0]["scale"] = -1;
  EXPECT_EQ(test::code_of([&] { parse_int8_calibration(j.dump(), "cal.json"); }), ErrorCode::kParse);
  EXPECT_EQ(test::code_of([&] { parse_int8_calibration("{\"tensors\": [", "cal.json"); }), ErrorCode::kParse);
  EXPECT_EQ(test::code_of([&] { parse_int8_calibration("{\"devices\": {}}", "cal.json"); }), ErrorCode::kParse);
}

std::vector<std::string> coco_images(size_t n) {
  const std::string dir = test::data_file("coco128/images/train2017");
  std::vector<std::string> out;
  for (const char* f : {"000000000009.jpg", "000000000025.jpg", "000000000030.jpg", "000000000034.jpg"})
    if (out.size() < n) out.push_back(dir + "/" + f);
  return out;
}

TEST(Calibrate, DeterministicAndBoundToModelAndImages) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(coco, "coco128/images/train2017");
  Int8CalibrateOptions o;
  o.method = CalibrationMethod::kPercentile;
  o.keep_worst = 0;
  o.keep_detect_and_stem = false;
  const Int8Calibration a = calibrate_int8(model, coco_images(2), o);
  const Int8Calibration b = calibrate_int8(model, coco_images(2), o);
  EXPECT_EQ(int8_calibration_json(a), int8_calibration_json(b));
  EXPECT_EQ(a.model_sha256, file_sha256(model));
  EXPECT_EQ(a.num_images, 2);
  EXPECT_EQ(a.convs.size(), 60u);  // yolov5n: 57 backbone / neck convolutions and the 3 Detect heads
  EXPECT_EQ(a.float_convs(), 0);
  for (const Int8TensorScale& t : a.tensors) EXPECT_GT(t.amax, 0.f) << t.name;
  const Int8TensorScale* in = a.tensor("images");
  ASSERT_NE(in, nullptr);
  EXPECT_LE(in->amax, 1.f);  // pixels / 255
  o.max_images = 1;
  const Int8Calibration one = calibrate_int8(model, coco_images(2), o);
  EXPECT_EQ(one.num_images, 1);
  EXPECT_NE(one.images_sha256, a.images_sha256);
  // the first convolution and the Detect head kept in float on request
  o.keep_detect_and_stem = true;
  const Int8Calibration edges = calibrate_int8(model, coco_images(1), o);
  EXPECT_EQ(edges.float_convs(), 4);
  EXPECT_TRUE(edges.conv("/model.0/conv/Conv")->keep_float);
  EXPECT_TRUE(edges.conv("/model.24/m.2/Conv")->keep_float);
  // the scales reused for a new float choice: the same tensors without the passes; refused for
  // other images
  Int8CalibrateOptions reuse;
  reuse.keep_worst = 0;
  reuse.scales_from = &a;
  reuse.keep_detect_and_stem = true;
  const Int8Calibration again = calibrate_int8(model, coco_images(2), reuse);
  ASSERT_EQ(again.tensors.size(), a.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) EXPECT_EQ(again.tensors[i].scale, a.tensors[i].scale);
  EXPECT_EQ(again.float_convs(), 4);
  std::string msg;
  EXPECT_EQ(test::code_of([&] { calibrate_int8(model, coco_images(3), reuse); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("other images"), std::string::npos) << msg;
  // checked against the model it was made for, refused for another
  auto m = std::make_shared<const Model>(load_onnx(model));
  EXPECT_NO_THROW(check_int8_calibration(a, *m));
  const std::string v8 = test::v8_file("yolov8n.onnx");
  if (!v8.empty()) {
    EXPECT_EQ(test::code_of([&] { check_int8_calibration(a, load_onnx(v8)); }), ErrorCode::kInvalidArgument);
  }
}

TEST(Calibrate, SensitivityPassKeepsTheWorstInFloat) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(coco, "coco128/images/train2017");
  Int8CalibrateOptions o;
  o.method = CalibrationMethod::kMinMax;
  o.keep_worst = 3;
  o.sensitivity_images = 1;
  const Int8Calibration c = calibrate_int8(model, coco_images(1), o);
  EXPECT_EQ(c.sensitivity_keep, 3);
  EXPECT_EQ(c.float_convs(), 4 + 3);  // the first convolution, the 3 Detect heads, the 3 worst
  double lowest_kept = 1e9, highest_quantised = -1;
  for (const Int8ConvScales& k : c.convs) {
    if (k.sensitivity < 0) {  // an edge: not measured, kept in float
      EXPECT_TRUE(k.keep_float) << k.node;
      continue;
    }
    EXPECT_GT(k.sensitivity, 0.0) << k.node;  // quantising any one layer changes the outputs
    if (k.keep_float) lowest_kept = std::min(lowest_kept, k.sensitivity);
    else highest_quantised = std::max(highest_quantised, k.sensitivity);
  }
  EXPECT_GE(lowest_kept, highest_quantised);
}

TEST(Calibrate, SimulatedInt8StaysCloseToFp32) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(coco, "coco128/images/train2017");
  Int8CalibrateOptions o;
  o.keep_worst = 0;
  o.keep_detect_and_stem = false;
  auto c = std::make_shared<Int8Calibration>(calibrate_int8(model, coco_images(2), o));
  auto m = std::make_shared<const Model>(load_onnx(model));
  Tensor x(DType::kFloat32, {1, 3, 640, 640});
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = static_cast<float>((i * 7919) % 255) / 255.f;
  CpuEngine fp32(m);
  CpuEngineOptions eo;
  eo.int8 = c;
  CpuEngine int8(m, eo);
  const test::Diff d = test::compare(int8.run({x})[0], fp32.run({x})[0]);
  EXPECT_GT(d.max_abs, 0.0);     // it does quantise
  EXPECT_LT(d.rel_l2, 0.05) << d.max_abs;  // and stays near FP32
  // every convolution in float: FP32 exactly
  for (Int8ConvScales& k : c->convs) k.keep_float = true;
  CpuEngine all_float(m, eo);
  EXPECT_EQ(test::compare(all_float.run({x})[0], fp32.run({x})[0]).max_abs, 0.0);
  // a calibration without one of the model's convolutions is refused when the engine prepares
  c->convs.pop_back();
  CpuEngine missing(m, eo);
  std::string msg;
  EXPECT_EQ(test::code_of([&] { missing.run({x}); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("/model.24/m.2/Conv"), std::string::npos) << msg;
}

TEST(CalibrateCli, WritesAFileEvalAcceptsAndRefusesAnotherModel) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(dyn, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(images, "coco128/images/train2017");
  const std::string dir = test::scratch_dir("int8_cli"), cal = dir + "/v5n.json";
  std::string out, err;
  ASSERT_EQ(test::run_yolocu("calibrate --model " + model + " --images " + images +
                                 " --max-images 2 --method minmax --keep-float-worst 0 --quiet -o " + cal, &out, &err),
            0)
      << err;
  const Int8Calibration c = load_int8_calibration(cal, file_sha256(model));
  EXPECT_EQ(c.method, CalibrationMethod::kMinMax);
  EXPECT_EQ(c.num_images, 2);
  const std::string one = "'" + images + "/000000000009.jpg'";
  EXPECT_EQ(test::run_yolocu("detect --model " + model + " --device cpu --precision int8 --calibration " + cal + " " + one +
                                 " --quiet --json -",
                             &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("\"class_id\""), std::string::npos) << out;  // it detects (the image has a bowl and broccoli)
  // inspect shows the choice: the calibration's float layers, and what the GPU engine runs in INT8
  ASSERT_EQ(test::run_yolocu("inspect --model " + model + " --calibration " + cal, &out, &err), 0) << err;
  EXPECT_NE(out.find("kept in float: 4 convolution(s):"), std::string::npos) << out;
  EXPECT_NE(out.find("GPU engine with --precision int8: " + std::to_string(c.convs.size() - 4) +
                     " convolution(s) on INT8 kernels, 4 in float"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  /model.0/conv/Conv: kept in float by the calibration"), std::string::npos) << out;
  // made for yolov5n: refused for yolov5n_dyn, naming both hashes
  EXPECT_EQ(test::run_yolocu("detect --model " + dyn + " --device cpu --precision int8 --calibration " + cal + " " + one,
                             &out, &err),
            1);
  EXPECT_NE(err.find(file_sha256(model)), std::string::npos) << err;
  EXPECT_NE(err.find(file_sha256(dyn)), std::string::npos) << err;
  EXPECT_EQ(test::run_yolocu("detect --model " + model + " --precision int8 " + one, &out, &err), 2);
  EXPECT_NE(err.find("--calibration"), std::string::npos) << err;
  EXPECT_EQ(test::run_yolocu("calibrate --model " + model + " --images " + images + " --method kl -o " + cal, &out, &err), 2);
  EXPECT_NE(err.find("entropy, percentile or minmax"), std::string::npos) << err;
}

}  // namespace
}  // namespace yolocu

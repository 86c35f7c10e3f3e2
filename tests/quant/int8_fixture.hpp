// The INT8 planning tests' material (test_int8_regions.cpp, test_int8_lowering.cpp): a model's plan
// and a real calibration on one coco128 image.
#pragma once

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "test_util.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"

namespace yolocu::int8_test {

using engine::Plan;

struct Fixture {
  Model model;
  Plan plan;
  Int8Calibration cal;
};

// A model's plan at 640 and a calibration on one coco128 image (the first convolution and the
// Detect head in float, no sensitivity pass); nullptr without the files.
inline std::unique_ptr<Fixture> make_fixture(const std::string& model) {
  const std::string images = test::data_file("coco128/images/train2017");
  if (model.empty() || images.empty()) return std::unique_ptr<Fixture>();
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(images))
    files.push_back(e.path().string());
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
inline const Fixture* yolov5n() {
  static std::unique_ptr<Fixture> f = make_fixture(test::data_file("models/yolov5n.onnx"));
  return f.get();
}
inline const std::string& name_of(const Plan& p, int v) { return p.values[static_cast<size_t>(v)].name; }
inline int value_id(const Plan& p, const std::string& name) {
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].name == name) return static_cast<int>(v);
  return -1;
}
}  // namespace yolocu::int8_test

#define NEED_YOLOV5N(f)                             \
  const int8_test::Fixture* f = int8_test::yolov5n(); \
  if (f == nullptr) GTEST_SKIP() << "needs models/yolov5n.onnx and coco128"

// The npz references (ultralytics v7.0, FP32 CPU): decode + NMS + back-projection of `output`
// must reproduce `detect` (conf 0.25, iou 0.45, max_det 1000) and `val` (conf 0.001, iou 0.6,
// multi-label, max_det 300): same count and classes, boxes within 0.01 px, conf within 1e-4.
#include <gtest/gtest.h>

#include "postprocess_test_util.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

namespace {

struct Case {
  const char* name;
  int width, height;  // documented sizes of images/<name>.jpg
};

class Reference : public ::testing::TestWithParam<Case> {};

TEST_P(Reference, DetectAndVal) {
  const Case c = GetParam();
  YOLOCU_REQUIRE_DATA(path, std::string("reference/") + c.name + ".npz");
  auto z = load_npz(path);
  const LetterboxGeometry g = letterbox_geometry(c.width, c.height, 640, 640);
  const Tensor& out = z.at("output");
  ASSERT_EQ(out.shape(), (Shape{1, 25200, 85}));
  const Detections det = postprocess_cpu(out, g, detect_options());
  test::expect_detections_match(det, z.at("detect"), 0.01, 1e-4, std::string(c.name) + " detect");
  const Detections val = postprocess_cpu(out, g, val_options());
  test::expect_detections_match(val, z.at("val"), 0.01, 1e-4, std::string(c.name) + " val");
}

TEST_P(Reference, Float16OutputKeepsTheStrongDetections) {
  // An FP16 engine's output is the FP32 one rounded to half; the detect-setting result must keep
  // the same boxes and classes (within half-precision noise: a half ulp at 640 is 0.25 px per op, divided by the gain: 1.5 px; 1e-3 in confidence).
  const Case c = GetParam();
  YOLOCU_REQUIRE_DATA(path, std::string("reference/") + c.name + ".npz");
  auto z = load_npz(path);
  const Tensor half = cast_tensor(z.at("output"), DType::kFloat16);
  const LetterboxGeometry g = letterbox_geometry(c.width, c.height, 640, 640);
  const Detections det = postprocess_cpu(half, g, detect_options());
  test::expect_detections_match(det, z.at("detect"), 1.5, 1e-3, std::string(c.name) + " fp16");
}

INSTANTIATE_TEST_SUITE_P(Images, Reference,
                         ::testing::Values(Case{"bus", 810, 1080}, Case{"zidane", 1280, 720}),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace

// Detector (CPU) on YOLOv8n and YOLO11n exports against the ultralytics package itself
// (scripts/v8/make_refs.py: LetterBox(auto=False), the PyTorch model, nms.non_max_suppression,
// ops.scale_boxes): the letterbox and input bit for bit, the raw output within float noise, and
// the final detections at predict's settings (conf 0.25 and 0.001, iou 0.7, max_det 300) and
// the validator's (conf 0.001, iou 0.7, multi-label), on bus.jpg, zidane.jpg and coco128.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

// The bounds: boxes within 0.5 px, scores within 1e-3.
constexpr double kBoxTol = 0.5, kScoreTol = 1e-3;

struct Worst {
  double box = 0, score = 0;
  int swaps = 0, detections = 0;
};

// Same count and classes, every box corner within kBoxTol and every score within kScoreTol, in
// the same order except between detections whose reference scores are within 1e-5 of each
// other (near-ties: the forward pass's float noise is ~1e-6 relative and NMS visits boxes by
// score). Records the largest differences seen in *worst.
void expect_same(const Detections& got, const Tensor& want, const std::string& what, Worst* worst) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.dim(0)) << what;
  const float* w = want.data_as<float>();
  auto dist = [&](const Detection& d, int64_t j, double* box, double* score) {
    const float* r = w + 6 * j;
    *box = std::max({std::fabs(d.x1 - r[0]), std::fabs(d.y1 - r[1]), std::fabs(d.x2 - r[2]), std::fabs(d.y2 - r[3])});
    *score = std::fabs(d.confidence - r[4]);
    return d.class_id == static_cast<int>(r[5]) && *box <= kBoxTol && *score <= kScoreTol;
  };
  std::vector<bool> used(got.size(), false);
  for (size_t i = 0; i < got.size(); ++i) {
    int64_t match = -1;
    double box = 0, score = 0;
    // the same row first, then any unused row
    if (!used[i] && dist(got[i], static_cast<int64_t>(i), &box, &score)) match = static_cast<int64_t>(i);
    for (int64_t j = 0; j < want.dim(0) && match < 0; ++j)
      if (!used[static_cast<size_t>(j)] && dist(got[i], j, &box, &score)) match = j;
    ASSERT_GE(match, 0) << what << ": detection " << i << " (class " << got[i].class_id << ", conf "
                        << got[i].confidence << ", box " << got[i].x1 << " " << got[i].y1 << " " << got[i].x2 << " "
                        << got[i].y2 << ") has no counterpart in the reference; reference row " << i << ": class "
                        << w[6 * i + 5] << " conf " << w[6 * i + 4] << " box " << w[6 * i] << " " << w[6 * i + 1] << " "
                        << w[6 * i + 2] << " " << w[6 * i + 3];
    used[static_cast<size_t>(match)] = true;
    worst->box = std::max(worst->box, box);
    worst->score = std::max(worst->score, score);
    if (match != static_cast<int64_t>(i)) {
      ++worst->swaps;
      EXPECT_LT(std::fabs(w[6 * i + 4] - w[6 * match + 4]), 1e-5)
          << what << ": detection " << i << " is reference row " << match << " and not a near-tie";
    }
  }
  worst->detections += static_cast<int>(got.size());
}

void report(const Worst& w, const std::string& what) {
  std::printf("[ v8 det   ] %-40s %6d detections, max box diff %.3g px, max score diff %.3g, %d near-tie swaps\n",
              what.c_str(), w.detections, w.box, w.score, w.swaps);
}

DetectorOptions cpu_options(const PostprocessOptions& p) {
  DetectorOptions o;
  o.device = Device::kCpu;
  o.postprocess = p;
  return o;
}

PostprocessOptions low_conf() {
  PostprocessOptions p = detect_options(OutputLayout::kYolov8);
  p.conf_threshold = 0.001f;
  return p;
}

class V8Detector : public ::testing::TestWithParam<std::string> {};

TEST_P(V8Detector, SampleImagesMatchUltralytics) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model, name + ".onnx");
  YOLOCU_REQUIRE_DATA(bus_jpg, "images/bus.jpg");
  auto det = Detector::create(model, cpu_options(detect_options(OutputLayout::kYolov8)));
  auto det_low = Detector::create(model, cpu_options(low_conf()));
  auto det_val = Detector::create(model, cpu_options(val_options(OutputLayout::kYolov8)));
  ASSERT_EQ(det->class_names().size(), 80u);
  EXPECT_EQ(det->class_names()[5], "bus");
  EXPECT_EQ(det->input_width(), 640);
  Worst w25, w001, wval;
  for (const char* image : {"bus", "zidane"}) {
    YOLOCU_REQUIRE_V8(npz, name + "_" + image + ".npz");
    auto ref = load_npz(npz);
    const Image im = decode_image_file(test::data_file(std::string("images/") + image + ".jpg"));
    DetectionTrace trace;
    const Detections got = det->detect({im.view()}, &trace).at(0);
    // LetterBox(auto=False) byte for byte, the input bit for bit
    const Tensor& lb = ref.at("letterboxed_bgr");
    ASSERT_EQ(trace.letterboxed.at(0).shape(), lb.shape());
    EXPECT_EQ(std::memcmp(trace.letterboxed[0].data(), lb.data(), lb.nbytes()), 0) << image;
    const Tensor& in = ref.at("input");
    ASSERT_EQ(trace.input.shape(), in.shape());
    EXPECT_EQ(std::memcmp(trace.input.data(), in.data(), in.nbytes()), 0) << image;
    const test::Diff d = test::compare(trace.outputs.at(0), ref.at("output"));
    EXPECT_LE(d.rel_l2, 1e-5) << image;
    expect_same(got, ref.at("detect"), name + " " + image + " conf 0.25", &w25);
    expect_same(det_low->detect(im.view()), ref.at("detect_low"), name + " " + image + " conf 0.001", &w001);
    expect_same(det_val->detect(im.view()), ref.at("val"), name + " " + image + " val", &wval);
  }
  report(w25, name + " bus+zidane conf 0.25");
  report(w001, name + " bus+zidane conf 0.001");
  report(wval, name + " bus+zidane val (multi-label)");
}

// The dynamic export with both images in one batch gives the same detections.
TEST_P(V8Detector, DynamicExportBatchMatchesUltralytics) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model, name + "_dyn.onnx");
  YOLOCU_REQUIRE_V8(bus_npz, name + "_bus.npz");
  YOLOCU_REQUIRE_V8(zid_npz, name + "_zidane.npz");
  YOLOCU_REQUIRE_DATA(bus_jpg, "images/bus.jpg");
  DetectorOptions o = cpu_options(detect_options(OutputLayout::kYolov8));
  o.max_batch = 2;
  auto det = Detector::create(model, o);
  EXPECT_EQ(det->input_width(), 640);
  const Image bus = decode_image_file(bus_jpg), zid = decode_image_file(test::data_file("images/zidane.jpg"));
  const std::vector<Detections> got = det->detect({bus.view(), zid.view()});
  Worst w;
  expect_same(got.at(0), load_npz(bus_npz).at("detect"), name + " dynamic bus", &w);
  expect_same(got.at(1), load_npz(zid_npz).at("detect"), name + " dynamic zidane", &w);
  report(w, name + " dynamic, batch 2, conf 0.25");
}

// Every coco128 image, at predict's conf 0.25 and the validator's settings.
TEST_P(V8Detector, Coco128MatchesUltralytics) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model, name + ".onnx");
  YOLOCU_REQUIRE_V8(npz, name + "_coco128.npz");
  YOLOCU_REQUIRE_DATA(dir, "coco128/images/train2017");
  const auto ref = load_npz(npz);
  auto det = Detector::create(model, cpu_options(detect_options(OutputLayout::kYolov8)));
  auto det_val = Detector::create(model, cpu_options(val_options(OutputLayout::kYolov8)));
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jpg") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 128u);
  Worst w25, wval;
  for (const auto& f : files) {
    const std::string stem = f.stem().string();
    const Image im = decode_image_file(f.string());
    ASSERT_TRUE(ref.count(stem + "/detect")) << stem;
    expect_same(det->detect(im.view()), ref.at(stem + "/detect"), name + " " + stem + " conf 0.25", &w25);
    expect_same(det_val->detect(im.view()), ref.at(stem + "/val"), name + " " + stem + " val", &wval);
    if (HasFatalFailure()) return;
  }
  report(w25, name + " coco128 conf 0.25");
  report(wval, name + " coco128 val (conf 0.001, multi-label)");
}

INSTANTIATE_TEST_SUITE_P(Exports, V8Detector, ::testing::Values("yolov8n", "yolo11n"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace yolocu

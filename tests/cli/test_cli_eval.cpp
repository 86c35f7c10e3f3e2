// yolocu eval over coco128 against the mAP ultralytics reports for this pipeline
// (notes/reference-semantics.md section 5: letterbox auto=False, conf 0.001, iou 0.6, multi-label,
// max_det 300; 101-point AP): mAP50 0.5452, mAP50-95 0.3486, P 0.6456, R 0.4626.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cli/cli_test_util.hpp"
#include "cli/mini_json.hpp"

namespace yolocu::test {
namespace {

TEST(CliEval, Coco128MatchesUltralyticsMap) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(images, "coco128/images/train2017");
  YOLOCU_REQUIRE_DATA(labels, "coco128/labels/train2017");
  const std::string json = scratch_dir("cli_eval") + "/coco128.json";
  std::string out, err;
  ASSERT_EQ(run_yolocu("eval --model " + quote(model) + " --images " + quote(images) + " --labels " + quote(labels) +
                           " --quiet --json " + quote(json),
                       &out, &err, "cli_eval"),
            0)
      << err;
  std::printf("%s", out.c_str());
  const Json j = parse_json(slurp(json));
  const Json& m = j["metrics"];
  EXPECT_EQ(m["num_images"].num, 128);
  EXPECT_EQ(j["images"].arr.size(), 128u);
  EXPECT_NEAR(m["map50_95"].num, 0.3486, 0.0005);
  EXPECT_NEAR(m["map50"].num, 0.5452, 0.0005);
  EXPECT_NEAR(m["precision"].num, 0.6456, 0.002);
  EXPECT_NEAR(m["recall"].num, 0.4626, 0.002);
  size_t total = 0;
  for (const Json& im : j["images"].arr) {
    EXPECT_FALSE(im.has("error")) << im["path"].str;
    EXPECT_LE(im["detections"].arr.size(), 300u);
    total += im["detections"].arr.size();
  }
  EXPECT_GT(total, 1000u);
}

// Trained YOLOv8n / YOLO11n (scripts/v8/train_coco128.py, then make_refs.sh with YOLOCU_V8_WEIGHTS
// into test::v8_trained_dir()): yolocu eval of the static export on
// coco128 against ultralytics' own val of the same file (<model>_val.json: ONNX Runtime, batch 1,
// conf 0.001, iou 0.7), the same bounds as yolov5n's above. Random weights (the v8 test models)
// give no mAP to compare; without trained ones this skips.
TEST(CliEval, V8TrainedWeightsMatchUltralyticsVal) {
  YOLOCU_REQUIRE_DATA(images, "coco128/images/train2017");
  YOLOCU_REQUIRE_DATA(labels, "coco128/labels/train2017");
  const std::string dir = v8_trained_dir();
  int checked = 0;
  for (const char* name : {"yolov8n", "yolo11n"}) {
    const std::string model = dir + "/" + name + ".onnx", ref = dir + "/" + name + "_val.json";
    if (!std::filesystem::exists(model) || !std::filesystem::exists(ref)) continue;
    SCOPED_TRACE(name);
    const std::string json = scratch_dir("cli_eval_v8") + "/" + name + ".json";
    std::string out, err;
    ASSERT_EQ(run_yolocu("eval --model " + quote(model) + " --images " + quote(images) + " --labels " + quote(labels) +
                             " --device cpu --quiet --json " + quote(json),
                         &out, &err, "cli_eval_v8"),
              0)
        << err;
    const Json want = parse_json(slurp(ref)), got = parse_json(slurp(json));
    const Json& m = got["metrics"];
    std::printf("[ %s ] mAP50-95 %.4f (ultralytics %.4f), mAP50 %.4f (%.4f)\n", name, m["map50_95"].num,
                want["map50_95"].num, m["map50"].num, want["map50"].num);
    EXPECT_EQ(m["num_images"].num, 128);
    EXPECT_NEAR(m["map50_95"].num, want["map50_95"].num, 0.0005);
    EXPECT_NEAR(m["map50"].num, want["map50"].num, 0.0005);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no trained v8 weights in " << dir << " (docs/gpu-runs.md: trained YOLOv8n / YOLO11n)";
}

TEST(CliEval, UsageErrors) {
  std::string out, err;
  EXPECT_EQ(run_yolocu("eval --model m.onnx --images x", &out, &err, "cli_eval_usage"), 2);  // no --labels
  EXPECT_EQ(run_yolocu("eval --model m.onnx --images x --labels /nonexistent-folder", &out, &err, "cli_eval_usage"), 2);
}

}  // namespace
}  // namespace yolocu::test

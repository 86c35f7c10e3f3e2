// Parity on video: the test clips (H.264, HEVC and MJPEG, made from coco128 by scripts/video/make_refs.sh)
// decoded by yolocu equal cv2.VideoCapture's frames byte for byte, and the CPU detector's
// detections on every frame equal ultralytics/yolov5 v7.0's detections on cv2's frames within the
// still-image tolerance (0.5 px, 1e-3 confidence). Through the library (FrameSource + Detector)
// and through the CLI (yolocu detect --source --jsonl).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "video/video_test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/npy.hpp"
#include "yolocu/video.hpp"

namespace yolocu {
namespace {

using Json = nlohmann::json;
constexpr double kBoxTol = 0.5, kConfTol = 1e-3;

// Each detection of `got` matches an unused reference row [x1, y1, x2, y2, conf, cls] of the same
// class within the tolerances, and the counts agree.
void expect_matches(const Detections& got, const Json& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what << ": detection count";
  std::vector<bool> used(want.size(), false);
  for (size_t i = 0; i < got.size(); ++i) {
    const Detection& d = got[i];
    bool found = false;
    for (size_t j = 0; j < want.size() && !found; ++j) {
      const Json& r = want[j];
      if (used[j] || d.class_id != static_cast<int>(r[5].get<double>())) continue;
      if (std::fabs(d.x1 - r[0].get<double>()) <= kBoxTol && std::fabs(d.y1 - r[1].get<double>()) <= kBoxTol &&
          std::fabs(d.x2 - r[2].get<double>()) <= kBoxTol && std::fabs(d.y2 - r[3].get<double>()) <= kBoxTol &&
          std::fabs(d.confidence - r[4].get<double>()) <= kConfTol)
        used[j] = found = true;
    }
    EXPECT_TRUE(found) << what << ": detection " << i << " (class " << d.class_id << ", conf " << d.confidence
                       << ", box " << d.x1 << " " << d.y1 << " " << d.x2 << " " << d.y2
                       << ") has no counterpart in ultralytics' detections";
  }
}

Json load_json(const std::string& path) {
  std::ifstream f(path);
  return Json::parse(f);
}

class VideoParity : public ::testing::TestWithParam<std::string> {};

TEST_P(VideoParity, FramesThenDetectionsMatchUltralyticsOnCv2Frames) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_VIDEO(clip, name);
  YOLOCU_REQUIRE_VIDEO(frames_path, "frames_" + name + ".npy");
  YOLOCU_REQUIRE_VIDEO(refs_path, "refs_" + name + ".json");
  const Tensor cv2_frames = load_npy(frames_path);
  const Json refs = load_json(refs_path);
  ASSERT_EQ(refs["frames"].size(), static_cast<size_t>(cv2_frames.dim(0)));

  // 1. the decoded frames are cv2's, byte for byte
  const std::vector<VideoFrame> frames = test::read_all(clip);
  ASSERT_EQ(frames.size(), static_cast<size_t>(cv2_frames.dim(0)));
  for (size_t k = 0; k < frames.size(); ++k) ASSERT_TRUE(test::same_pixels(cv2_frames, static_cast<int64_t>(k), frames[k]));

  // 2. the detections are ultralytics'
  DetectorOptions o;
  o.device = Device::kCpu;
  o.postprocess = detect_options();  // detect.py: conf 0.25, iou 0.45, max_det 1000
  auto det = Detector::create(model, o);
  size_t boxes = 0;
  for (size_t k = 0; k < frames.size(); ++k) {
    const Detections got = det->detect(frames[k].view());
    boxes += got.size();
    expect_matches(got, refs["frames"][k], name + " frame " + std::to_string(k));
  }
  EXPECT_GT(boxes, frames.size()) << "the clip should show objects";
  std::printf("[ info ] %s: %zu frames, %zu detections equal to ultralytics'\n", name.c_str(), frames.size(), boxes);
}

TEST_P(VideoParity, CliJsonLinesMatchUltralytics) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_VIDEO(clip, name);
  YOLOCU_REQUIRE_VIDEO(refs_path, "refs_" + name + ".json");
  const Json refs = load_json(refs_path);
  const std::string out = test::scratch_dir("video_parity") + "/" + name + ".jsonl";
  const std::string cli = std::string(YOLOCU_BINARY_DIR) + "/apps/yolocu/yolocu";
  std::string log;
  ASSERT_EQ(0, test::run_command(cli + " detect --model '" + model + "' --device cpu --source '" + clip +
                                     "' --vid-stride 2 --jsonl '" + out + "' 2>&1",
                                 &log))
      << log;
  std::ifstream f(out);
  std::string line;
  size_t n = 0;
  while (std::getline(f, line)) {
    const Json j = Json::parse(line);
    const int64_t frame = j["frame"].get<int64_t>();
    EXPECT_EQ(frame, static_cast<int64_t>(2 * n + 1)) << line;  // --vid-stride 2: frames 1, 3, 5, ...
    EXPECT_EQ(j["source"].get<std::string>(), clip);
    EXPECT_EQ(j["stream"].get<int>(), 0);
    EXPECT_NEAR(j["pts"].get<double>(), static_cast<double>(frame) / 25.0, 1e-3);
    EXPECT_EQ(j["width"].get<int>(), 640);
    Detections got;
    for (const Json& d : j["detections"]) {
      Detection x;
      x.x1 = d["box"][0].get<float>(), x.y1 = d["box"][1].get<float>();
      x.x2 = d["box"][2].get<float>(), x.y2 = d["box"][3].get<float>();
      x.confidence = d["confidence"].get<float>();
      x.class_id = d["class_id"].get<int>();
      EXPECT_TRUE(d.contains("class_name"));
      got.push_back(x);
    }
    expect_matches(got, refs["frames"][static_cast<size_t>(frame)], name + " (CLI) frame " + std::to_string(frame));
    ++n;
  }
  EXPECT_EQ(n, 15u) << log;
}

INSTANTIATE_TEST_SUITE_P(Clips, VideoParity, ::testing::Values("clip_h264.mp4", "clip_h265.mkv", "clip_mjpeg.avi"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param.substr(5, p.param.find('.') - 5); });

}  // namespace
}  // namespace yolocu

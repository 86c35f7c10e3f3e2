// yolocu detect --source end to end: a source list with a dead source (the others complete, exit
// status 1, the failure named), --save / --save-frames outputs, --frames, and the usage errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "video/video_test_util.hpp"
#include "yolocu/video.hpp"

namespace yolocu {
namespace {
namespace fs = std::filesystem;

std::string cli() { return std::string(YOLOCU_BINARY_DIR) + "/apps/yolocu/yolocu"; }

TEST(VideoCli, SourceListWithADeadSourceSavesTheOthers) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_VIDEO(h264, "clip_h264.mp4");
  YOLOCU_REQUIRE_VIDEO(mjpeg, "clip_mjpeg.avi");
  const std::string dir = test::scratch_dir("video_cli");
  const std::string out = dir + "/runs", list = dir + "/sources.txt", jsonl = dir + "/out.jsonl";
  fs::remove_all(out);
  test::write_bytes(list, "# two clips and a missing file\n" + h264 + "\n" + dir + "/missing.mp4\n" + mjpeg + "\n");
  std::string log;
  const int rc = test::run_command(cli() + " detect --model '" + model + "' --device cpu --source '" + list +
                                       "' --frames 4 --save --save-frames --output-dir '" + out + "' --jsonl '" +
                                       jsonl + "' 2>&1",
                                   &log);
  EXPECT_EQ(rc, 1) << log;  // a source failed
  EXPECT_NE(log.find("stream 1 (" + dir + "/missing.mp4): failed: " + dir + "/missing.mp4: no such file"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("8 frames from 3 sources"), std::string::npos) << log;
  std::ifstream f(jsonl);
  std::string line;
  std::map<int, int> per_stream;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    per_stream[j["stream"].get<int>()]++;
    EXPECT_LT(j["frame"].get<int>(), 4);
  }
  EXPECT_EQ(per_stream, (std::map<int, int>{{0, 4}, {2, 4}}));
  for (const char* stem : {"clip_h264", "clip_mjpeg"}) {
    const std::string video = out + "/" + stem + ".mp4";
    ASSERT_TRUE(fs::exists(video)) << log;
    EXPECT_EQ(test::read_all(video).size(), 4u) << video;
    EXPECT_TRUE(fs::exists(out + "/" + stem + "/000003.jpg")) << log;
  }
}

TEST(VideoCli, UsageErrors) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  const std::string m = " detect --model '" + model + "' ";
  struct Case {
    std::string args, says;
  } cases[] = {
      {"--vid-stride 2 x.jpg", "--vid-stride needs --source"},
      {"--save-frames x.jpg", "--save-frames needs --source or a video PATH"},
      {"--nosave --save x.jpg", "--nosave and --save contradict each other"},
      {"--source x.mp4 --save-crop", "--save-crop is for images"},
      {"--source x.mp4 --nosave --save", "--nosave and --save contradict each other"},
      {"x.mp4 y.jpg", "the PATHs mix videos ('x.mp4') and images ('y.jpg')"},
      {"--source x.mp4 --vid-stride 0", "--vid-stride must be in 1.."},
      {"--source x.mp4 --decoder gpu", "--decoder must be auto, cpu or cuda"},
      {"--source x.mp4 --device cpu --decoder cuda", "--decoder cuda needs the GPU detector (--device cuda)"},
      {"--source x.mp4 --save-img", "--save-img is for images"},
      {"--source x.mp4 y.jpg", "either as PATHs or with --source"},
      {"--source x.mp4 --timeout 0", "--timeout must be in"},
  };
  for (const Case& c : cases) {
    std::string log;
    EXPECT_EQ(test::run_command(cli() + m + c.args + " 2>&1", &log), 2) << c.args << "\n" << log;
    EXPECT_NE(log.find(c.says), std::string::npos) << c.args << "\n" << log;
  }
}

}  // namespace
}  // namespace yolocu

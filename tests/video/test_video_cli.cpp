// yolocu detect --source end to end: a source list with a dead source (the others complete, exit
// status 1, the failure named), --save / --save-frames outputs, --frames, video files given as
// PATHs, --timeline, --latency, an RTSP stream pushed to --rtsp-listen, and the usage errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "video/video_test_util.hpp"
#include "yolocu/video.hpp"
#include "yolocu/video_writer.hpp"

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

// A video file given as a PATH takes the video run: by its extension, or (no extension) by its first
// bytes. Nothing is saved by default; --save writes the annotated video into the run folder.
TEST(VideoCli, VideoFilesAsPaths) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  if (!video_input_supported()) GTEST_SKIP() << "this build reads no video (built without FFmpeg)";
  const std::string dir = test::scratch_dir("video_paths");
  fs::remove_all(dir);
  fs::create_directories(dir);
  // three frames: 320x240 windows of bus.jpg, moving down
  const Image image = decode_image_file(bus);
  {
    auto w = VideoWriter::open(dir + "/clip.mp4", 320, 240, 25);
    for (int k = 0; k < 3; ++k) w->write(ImageView{image.row(400 + 8 * k), 320, 240, image.view().pitch_bytes});
    w->close();
  }
  fs::copy_file(dir + "/clip.mp4", dir + "/clip_noext");
  const std::string run = "cd '" + dir + "' && " + cli() + " detect --model '" + model + "' --device cpu ";
  for (const std::string name : {"clip.mp4", "clip_noext"}) {
    std::string log;
    ASSERT_EQ(test::run_command(run + name + " --jsonl " + name + ".jsonl 2>&1", &log), 0) << log;
    EXPECT_EQ(log.find("not a JPEG"), std::string::npos) << log;
    EXPECT_NE(log.find("3 frames from 1 sources"), std::string::npos) << log;
    std::ifstream f(dir + "/" + name + ".jsonl");
    int lines = 0;
    for (std::string line; std::getline(f, line); ++lines) {
      const auto j = nlohmann::json::parse(line);
      EXPECT_EQ(j["source"], name);
      EXPECT_EQ(j["frame"], lines);
      EXPECT_EQ(j["width"], 320);
    }
    EXPECT_EQ(lines, 3) << name;
  }
  EXPECT_FALSE(fs::exists(dir + "/runs")) << "video runs save nothing unless asked";
  std::string log;
  ASSERT_EQ(test::run_command(run + "clip_noext --save 2>&1", &log), 0) << log;
  EXPECT_NE(log.find("Results saved to runs/detect/predict\n"), std::string::npos) << log;
  EXPECT_EQ(test::read_all(dir + "/runs/detect/predict/clip_noext.mp4").size(), 3u);
}

// A stream URL given as a PATH takes the video run (a refused connection on a closed loopback port:
// exit 1 naming the source, credentials redacted), not the image reader's "no such file".
TEST(VideoCli, StreamUrlAsPath) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  if (!video_input_supported()) GTEST_SKIP() << "this build reads no video (built without FFmpeg)";
  std::string log;
  const int rc = test::run_command(cli() + " detect --model '" + model +
                                       "' --device cpu rtsp://user:secret@127.0.0.1:9/cam --timeout 2 --reconnects 0 2>&1",
                                   &log);
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find("rtsp://***@127.0.0.1:9/cam"), std::string::npos) << log;
  EXPECT_EQ(log.find("secret"), std::string::npos) << log;
  EXPECT_NE(log.find("0 frames from 1 sources"), std::string::npos) << log;  // the video run's summary
  EXPECT_EQ(log.find("not a JPEG"), std::string::npos) << log;
}

// --timeline: one "timeline:" line with the batches the run had, a Chrome trace whose host rows
// cover every batch (3 stages each), and the NVML line (figures on a GPU machine, the reason here).
// --latency: every JSON line says how long after its packet's read it was written (at least the
// detection's time: a CPU forward of yolov5n takes tens of milliseconds), and the summary gives the
// percentiles; without it the lines carry no such member.
TEST(VideoCli, LatencyPerLineAndSummary) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  const std::string dir = test::scratch_dir("video_cli_latency");
  for (const bool latency : {true, false}) {
    const std::string out = dir + (latency ? "/with.jsonl" : "/without.jsonl");
    std::string log;
    ASSERT_EQ(test::run_command(cli() + " detect --model '" + model + "' --device cpu --source '" + clip +
                                    "' --frames 4 --progress 0 --jsonl '" + out + "'" + (latency ? " --latency" : "") + " 2>&1",
                                &log),
              0)
        << log;
    EXPECT_EQ(log.find("latency from packet to JSON line: p50 ") != std::string::npos, latency) << log;
    std::ifstream f(out);
    int lines = 0;
    for (std::string line; std::getline(f, line); ++lines) {
      const auto j = nlohmann::json::parse(line);
      ASSERT_EQ(j.contains("latency_ms"), latency) << line;
      if (latency) {
        EXPECT_GT(j["latency_ms"].get<double>(), 1.0) << line;
        EXPECT_LT(j["latency_ms"].get<double>(), 60000.0) << line;
      }
    }
    EXPECT_EQ(lines, 4);
  }
}

// --rtsp-listen: yolocu waits on a loopback port and FFmpeg's own RTSP muxer pushes the clip to it
// in real time (`ffmpeg -re ... -f rtsp`, retried until yolocu listens); the frames come out as
// JSON lines with their latency, and yolocu ends after --frames. Skips visibly without the ffmpeg
// program (scripts/setup.sh installs it for the tests).
TEST(VideoCli, RtspListenReceivesAPushedStream) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  if (test::run_command("command -v ffmpeg >/dev/null 2>&1") != 0) GTEST_SKIP() << "no ffmpeg program on PATH";
  const int port = test::closed_port();  // nothing listens there until yolocu does
  ASSERT_GT(port, 0);
  const std::string url = "rtsp://127.0.0.1:" + std::to_string(port) + "/live";
  const std::string dir = test::scratch_dir("video_cli_rtsp");
  const std::string out = dir + "/rtsp.jsonl";
  fs::remove(out);
  const std::string cmd = cli() + " detect --model '" + model + "' --device cpu --source '" + url +
                          "' --rtsp-listen --timeout 20 --reconnects 0 --frames 8 --latency --progress 0 --jsonl '" + out +
                          "' >'" + dir + "/yolocu.log' 2>&1 & y=$!; for i in $(seq 150); do kill -0 $y 2>/dev/null || break; "
                          "ffmpeg -hide_banner -loglevel error -re -i '" + clip + "' -c copy -f rtsp -rtsp_transport tcp '" + url +
                          "' >/dev/null 2>&1; sleep 0.1; done; wait $y";
  const int rc = test::run_command(cmd);
  const std::string log = test::read_bytes(dir + "/yolocu.log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("latency from packet to JSON line: p50 "), std::string::npos) << log;
  std::ifstream f(out);
  int lines = 0;
  for (std::string line; std::getline(f, line); ++lines) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["source"], url);
    EXPECT_EQ(j["width"], 640) << line;
    EXPECT_GT(j["latency_ms"].get<double>(), 0.0) << line;
  }
  // a live source drops its oldest frame when the detector falls behind: up to 8 frames detected
  EXPECT_GE(lines, 2) << log;
  EXPECT_LE(lines, 8) << log;
}

TEST(VideoCli, TimelineWritesATraceAndTheStageMedians) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h265.mkv");
  const std::string dir = test::scratch_dir("video_cli_timeline");
  const std::string trace = dir + "/trace.json";
  fs::remove(trace);
  std::string log;
  const int rc = test::run_command(cli() + " detect --model '" + model + "' --device cpu --source '" + clip +
                                       "' --frames 5 --progress 0 --timeline '" + trace + "' 2>&1",
                                   &log);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("timeline: 5 batches (median 1 frames), median ms per batch: batch assembly"), std::string::npos)
      << log;
  EXPECT_NE(log.find("NVDEC utilisation"), std::string::npos) << log;
  std::ifstream f(trace);
  ASSERT_TRUE(f.good()) << log;
  const auto j = nlohmann::json::parse(f);
  int host = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["cat"] != "host") continue;
    ++host;
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_EQ(e["args"]["frames"].get<int>(), 1);
  }
  EXPECT_EQ(host, 5 * 3);
}

TEST(VideoCli, UsageErrors) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  const std::string m = " detect --model '" + model + "' ";
  struct Case {
    std::string args, says;
  } cases[] = {
      {"--vid-stride 2 x.jpg", "--vid-stride needs --source"},
      {"--save-frames x.jpg", "--save-frames needs --source or a video PATH"},
      {"--latency x.jpg", "--latency needs --source or a video PATH"},
      {"--rtsp-listen x.jpg", "--rtsp-listen needs --source or a video PATH"},
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
      {"--timeline t.json x.jpg", "--timeline needs a video run"},
      {"--device cuda:0,1 x.jpg", "--device cuda:0,1: several GPUs are for video runs"},
      {"--source x.mp4 --device cuda:0,0", "--device cuda:0,0: GPU 0 is named twice"},
      {"--source x.mp4 --device cuda:0,x", "--device cuda:0,x: 'x' is not a GPU number"},
      {"--source x.mp4 --device cuda:", "--device cuda:: '' is not a GPU number"},
      {"--source x.mp4 --device cuda:0,1 --timeline t.json", "--timeline follows one detector: not with several GPUs"},
      {"--source x.mp4 --timeline '" + model + "/t.json'", "--timeline " + model + "/t.json: cannot create it"},
  };
  for (const Case& c : cases) {
    std::string log;
    EXPECT_EQ(test::run_command(cli() + m + c.args + " 2>&1", &log), 2) << c.args << "\n" << log;
    EXPECT_NE(log.find(c.says), std::string::npos) << c.args << "\n" << log;
  }
}

}  // namespace
}  // namespace yolocu

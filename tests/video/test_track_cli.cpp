// yolocu track end to end: --detections on ultralytics' reference sequences (the CLI's output rows
// equal ultralytics' BYTETracker / BOTSORT rows), counting through the CLI on a generated crossing,
// a video run with --save, --save-txt and --jsonl, and the usage errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "track/track_refs.hpp"
#include "video/video_test_util.hpp"

namespace yolocu {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string cli() { return std::string(YOLOCU_BINARY_DIR) + "/apps/yolocu/yolocu"; }

std::vector<Json> read_jsonl(const std::string& path) {
  std::vector<Json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(Json::parse(line));
  return lines;
}

// A reference sequence as yolocu detect's JSON lines (plus "warp" where the reference has one).
std::string as_jsonl(const test::RefSequence& seq) {
  std::string s;
  for (size_t f = 0; f < seq.frames.size(); ++f) {
    Json line = {{"source", seq.name}, {"stream", 0}, {"frame", f}, {"detections", Json::array()}};
    for (const TrackInput& d : seq.frames[f].dets)
      line["detections"].push_back({{"box", {d.x1, d.y1, d.x2, d.y2}}, {"confidence", d.conf}, {"class_id", static_cast<int>(d.cls)}});
    if (seq.frames[f].warp) line["warp"] = *seq.frames[f].warp;
    s += line.dump() + "\n";
  }
  return s;
}

// --detections gives ultralytics' rows: same detection index and box, one id relabelling per sequence.
TEST(TrackCli, DetectionsEqualUltralytics) {
  if (!test::track_refs_present()) {
    if (test::track_refs_required()) FAIL() << "YOLOCU_REQUIRE_TRACK: no references in " << test::track_refs_dir();
    GTEST_SKIP() << "no tracker references in " << test::track_refs_dir() << " (scripts/track/make_refs.sh makes them)";
  }
  const std::string dir = test::scratch_dir("track_cli_refs");
  size_t rows = 0;
  for (const char* tracker : {"bytetrack", "botsort"}) {
    for (const test::RefSequence& seq : test::read_track_refs(tracker)) {
      if (seq.name.back() != '0') continue;  // one seed of each kind keeps the test short
      const std::string in = dir + "/" + seq.name + ".jsonl", out = dir + "/" + seq.name + ".out.jsonl";
      test::write_bytes(in, as_jsonl(seq));
      std::string log;
      ASSERT_EQ(test::run_command(cli() + " track --detections '" + in + "' --tracker '" + test::track_refs_dir() + "/" +
                                      tracker + ".yaml' --jsonl '" + out + "' --quiet 2>&1", &log), 0) << log;
      const std::vector<Json> lines = read_jsonl(out);
      ASSERT_EQ(lines.size(), seq.frames.size()) << seq.name;
      std::map<int64_t, int64_t> relabel;
      for (size_t f = 0; f < lines.size(); ++f) {
        const Json& objs = lines[f]["detections"];
        const std::vector<TrackOutput>& want = seq.frames[f].out;
        ASSERT_EQ(objs.size(), want.size()) << seq.name << " " << tracker << " frame " << f + 1;
        for (size_t i = 0; i < want.size(); ++i, ++rows) {
          const Json& o = objs[i];
          EXPECT_EQ(o["index"].get<int>(), want[i].idx) << seq.name << " frame " << f + 1;
          const auto [it, fresh] = relabel.emplace(o["track_id"].get<int64_t>(), want[i].track_id);
          EXPECT_EQ(it->second, want[i].track_id) << seq.name << " " << tracker << " frame " << f + 1 << ": id relabelled";
          const float wb[4] = {want[i].x1, want[i].y1, want[i].x2, want[i].y2};
          for (int k = 0; k < 4; ++k) EXPECT_NEAR(o["box"][k].get<double>(), wb[k], 1e-3) << seq.name << " frame " << f + 1;
        }
      }
    }
  }
  EXPECT_GT(rows, 10000u);
}

// Two objects cross the line y = 300 (drawn left to right, so moving down counts in): a person
// (class 0) moving down at x = 200 and a car (class 2) moving up at x = 600, 10 px a frame over
// 40 frames, from y = 100 and y = 500. Each crosses once: person in 1, car out 1. The zone
// (150,250)-(250,350) is entered and left by the person only.
TEST(TrackCli, CountsOfAGeneratedCrossing) {
  const std::string dir = test::scratch_dir("track_cli_count");
  std::string jsonl;
  for (int f = 0; f < 40; ++f) {
    const double yp = 100 + 10 * f, yc = 500 - 10 * f;
    Json line = {{"stream", 0}, {"frame", f}, {"detections", Json::array()}};
    line["detections"].push_back({{"box", {180, yp - 20, 220, yp + 20}}, {"confidence", 0.9}, {"class_id", 0}, {"class_name", "person"}});
    line["detections"].push_back({{"box", {570, yc - 30, 630, yc + 30}}, {"confidence", 0.8}, {"class_id", 2}, {"class_name", "car"}});
    jsonl += line.dump() + "\n";
  }
  test::write_bytes(dir + "/in.jsonl", jsonl);
  std::string log;
  ASSERT_EQ(test::run_command(cli() + " track --detections '" + dir + "/in.jsonl' --count-line 0,300,800,300 "
                                  "--count-zone 150,250,250,250,250,350,150,350 --save-txt --output-dir '" + dir +
                                  "/run' --jsonl '" + dir + "/out.jsonl' 2>&1", &log), 0) << log;
  const std::vector<Json> lines = read_jsonl(dir + "/out.jsonl");
  ASSERT_EQ(lines.size(), 40u);
  const Json& counts = lines.back()["counts"];
  EXPECT_EQ(counts[0]["in"], Json({{"person", 1}})) << counts;
  EXPECT_EQ(counts[0]["out"], Json({{"car", 1}})) << counts;
  EXPECT_EQ(counts[1]["in"], Json({{"person", 1}})) << counts;
  EXPECT_EQ(counts[1]["out"], Json({{"person", 1}})) << counts;
  EXPECT_EQ(counts[1]["inside"], Json::object()) << counts;
  int crossings = 0;
  for (const Json& l : lines) crossings += static_cast<int>(l["crossings"].size());
  EXPECT_EQ(crossings, 4);
  // MOT: 2 objects a frame, both tracked from frame 1 (ultralytics confirms first-frame tracks at once)
  std::ifstream mot(dir + "/run/stream0.txt");
  std::string row;
  int n = 0;
  while (std::getline(mot, row)) {
    int frame = 0, id = 0, a = 0, b = 0, c = 0;
    double x, y, w, h, conf;
    ASSERT_EQ(std::sscanf(row.c_str(), "%d,%d,%lf,%lf,%lf,%lf,%lf,%d,%d,%d", &frame, &id, &x, &y, &w, &h, &conf, &a, &b, &c), 10) << row;
    EXPECT_TRUE(id == 1 || id == 2) << row;
    EXPECT_EQ(frame, n / 2 + 1) << row;
    ++n;
  }
  EXPECT_EQ(n, 80);
}

// --detections names each stream's MOT file after its first line's source (unique: a second stream
// of the same name gets _<stream>); a stream without a source is stream<N>.
TEST(TrackCli, MotFilesNamedAfterSources) {
  const std::string dir = test::scratch_dir("track_cli_mot_names");
  fs::remove_all(dir + "/run");
  test::write_bytes(dir + "/in.jsonl",
                    "{\"source\": \"cams/a.mp4\", \"detections\": [{\"box\": [1, 2, 30, 40], \"confidence\": 0.9, \"class_id\": 0}]}\n"
                    "{\"source\": \"other/a.mp4\", \"stream\": 1, \"detections\": []}\n"
                    "{\"stream\": 2, \"detections\": []}\n");
  std::string log;
  ASSERT_EQ(test::run_command(cli() + " track --detections '" + dir + "/in.jsonl' --save-txt --output-dir '" + dir +
                                  "/run' --jsonl '" + dir + "/out.jsonl'", &log), 0) << log;
  EXPECT_EQ(test::read_bytes(dir + "/run/a.txt"), "1,1,1.000,2.000,29.000,38.000,0.90000,-1,-1,-1\n");
  EXPECT_TRUE(fs::exists(dir + "/run/a_1.txt")) << log;
  EXPECT_TRUE(fs::exists(dir + "/run/stream2.txt")) << log;
}

TEST(TrackCli, VideoWithSaveTxtAndJsonl) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_VIDEO(h264, "clip_h264.mp4");
  const std::string dir = test::scratch_dir("track_cli_video");
  fs::remove_all(dir + "/run");
  std::string log;
  ASSERT_EQ(test::run_command(cli() + " track --model '" + model + "' --device cpu --source '" + h264 +
                                  "' --frames 12 --save --save-txt --count-line 0,240,640,240 --output-dir '" + dir +
                                  "/run' --jsonl '" + dir + "/out.jsonl' --quiet 2>&1", &log), 0) << log;
  const std::vector<Json> lines = read_jsonl(dir + "/out.jsonl");
  ASSERT_EQ(lines.size(), 12u);
  size_t objects = 0;
  for (const Json& l : lines) {
    ASSERT_TRUE(l.contains("counts")) << l;
    for (const Json& o : l["detections"]) {
      EXPECT_GE(o["track_id"].get<int>(), 1) << l;
      EXPECT_GE(o["index"].get<int>(), 0) << l;
      ++objects;
    }
  }
  EXPECT_GT(objects, 0u);
  std::ifstream mot(dir + "/run/clip_h264.txt");
  size_t rows = 0;
  for (std::string row; std::getline(mot, row);) ++rows;
  EXPECT_EQ(rows, objects);
  EXPECT_TRUE(fs::exists(dir + "/run/clip_h264.mp4")) << log;
}

// detect's JSON lines through --detections give what track --source gives on the same clip: the
// detect output is accepted as is, and both paths run the same trackers.
TEST(TrackCli, DetectJsonlThroughDetectionsEqualsTrackSource) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_VIDEO(h264, "clip_h264.mp4");
  const std::string dir = test::scratch_dir("track_cli_roundtrip");
  const std::string common = " --model '" + model + "' --device cpu --source '" + h264 + "' --frames 20 --quiet";
  std::string log;
  ASSERT_EQ(test::run_command(cli() + " detect" + common + " --jsonl '" + dir + "/dets.jsonl'", &log), 0) << log;
  const std::string regions = " --count-line 0,240,640,240 --count-zone 100,100,500,100,500,400,100,400";
  ASSERT_EQ(test::run_command(cli() + " track" + common + regions + " --jsonl '" + dir + "/direct.jsonl'", &log), 0) << log;
  ASSERT_EQ(test::run_command(cli() + " track --detections '" + dir + "/dets.jsonl'" + regions + " --jsonl '" + dir +
                                  "/via.jsonl' --quiet", &log), 0) << log;
  const std::vector<Json> direct = read_jsonl(dir + "/direct.jsonl"), via = read_jsonl(dir + "/via.jsonl");
  ASSERT_EQ(direct.size(), 20u);
  ASSERT_EQ(via.size(), direct.size());
  size_t objects = 0;
  for (size_t i = 0; i < direct.size(); ++i) {
    EXPECT_EQ(via[i], direct[i]) << "line " << i + 1;
    objects += direct[i]["detections"].size();
  }
  EXPECT_GT(objects, 10u);
}

TEST(TrackCli, UsageErrors) {
  const std::string dir = test::scratch_dir("track_cli_usage");
  test::write_bytes(dir + "/bad.jsonl", "{\"stream\": 0, \"detections\": [{\"box\": [1, 2, 3], \"confidence\": 0.5, \"class_id\": 0}]}\n");
  test::write_bytes(dir + "/ok.jsonl", "{\"detections\": []}\n");
  struct Case {
    std::string args, says;
    int rc;
  } cases[] = {
      {"--detections x.jsonl --source y.mp4", "--source and --detections exclude each other", 2},
      {"--detections x.jsonl --save", "--save needs frames", 2},
      {"--model m.onnx", "give --source (with --model) or --detections", 2},
      {"--detections '" + dir + "/ok.jsonl' --count-line 1,2,3,4,5,6", "a line is exactly 2 points", 2},
      {"--detections '" + dir + "/ok.jsonl' --count-zone 0,0,1,1,2,2", "the polygon has no area", 2},
      {"--detections '" + dir + "/ok.jsonl' --tracker nosuch.yaml", "not one of the built-in", 1},
      {"--detections '" + dir + "/bad.jsonl'", "bad.jsonl line 1: a detection without \"box\"", 1},
      {"--detections '" + dir + "/ok.jsonl' --tracker botsort.yaml", "no \"warp\"", 1},
  };
  for (const Case& c : cases) {
    std::string log;
    EXPECT_EQ(test::run_command(cli() + " track " + c.args, &log), c.rc) << c.args << "\n" << log;
    EXPECT_NE(log.find(c.says), std::string::npos) << c.args << "\n" << log;
  }
}

}  // namespace
}  // namespace yolocu

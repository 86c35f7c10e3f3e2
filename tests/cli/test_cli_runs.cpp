// yolocu detect's run folders, as ultralytics' predict makes them: annotated images saved by
// default into runs/detect/predict, predict2, ... (--exist-ok, --project, --name, --output-dir,
// --nosave), --save-txt / --save-conf lines against the --json detections, --save-crop against
// ultralytics' save_one_box arithmetic (restated here), --classes by name, and a failed write in
// the middle of a run (reported, counted, the run goes on).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/cli_test_util.hpp"
#include "cli/mini_json.hpp"
#include "yolocu/image.hpp"

namespace yolocu::test {
namespace {
namespace fs = std::filesystem;

struct Material {
  std::string model, bus, zidane;
};

#define REQUIRE_MATERIAL(m)                                                                                    \
  Material m{data_file("models/yolov5n.onnx"), data_file("images/bus.jpg"), data_file("images/zidane.jpg")};  \
  if (m.model.empty() || m.bus.empty() || m.zidane.empty()) GTEST_SKIP() << "test material not found in " << data_dir()

std::string detect(const Material& m) { return "detect --device cpu --model " + quote(m.model) + " "; }

// An empty working folder of this test (its runs/ start from nothing).
std::string fresh_dir(const std::string& name) {
  const std::string d = scratch_dir("cli_runs") + "/" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The files under `dir`, relative, sorted.
std::vector<std::string> tree(const std::string& dir) {
  std::vector<std::string> files;
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(fs::relative(e.path(), dir).string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(CliRuns, NumberedRunFoldersAndExistOk) {
  REQUIRE_MATERIAL(m);
  const std::string cwd = fresh_dir("numbered");
  std::string err;
  ASSERT_EQ(run_yolocu(detect(m) + quote(m.bus), nullptr, &err, "cli", cwd), 0) << err;
  EXPECT_NE(err.find("Results saved to runs/detect/predict\n"), std::string::npos) << err;
  const Image saved = decode_image_file(cwd + "/runs/detect/predict/bus.jpg");
  EXPECT_EQ(saved.width(), 810);
  EXPECT_EQ(saved.height(), 1080);
  ASSERT_EQ(run_yolocu(detect(m) + quote(m.bus), nullptr, &err, "cli", cwd), 0) << err;
  EXPECT_NE(err.find("Results saved to runs/detect/predict2\n"), std::string::npos) << err;
  ASSERT_EQ(run_yolocu(detect(m) + "--quiet " + quote(m.zidane), nullptr, &err, "cli", cwd), 0) << err;
  EXPECT_EQ(err.find("Results saved"), std::string::npos) << "--quiet: " << err;
  // --exist-ok: into predict itself, beside what is there
  ASSERT_EQ(run_yolocu(detect(m) + "--exist-ok " + quote(m.zidane), nullptr, &err, "cli", cwd), 0) << err;
  EXPECT_NE(err.find("Results saved to runs/detect/predict\n"), std::string::npos) << err;
  EXPECT_EQ(tree(cwd + "/runs"), (std::vector<std::string>{"detect/predict/bus.jpg", "detect/predict/zidane.jpg",
                                                           "detect/predict2/bus.jpg", "detect/predict3/zidane.jpg"}));
  // a file where the next folder would go is skipped over, as increment_path does
  std::ofstream(cwd + "/runs/detect/predict4") << "a file";
  ASSERT_EQ(run_yolocu(detect(m) + "--quiet " + quote(m.bus), nullptr, &err, "cli", cwd), 0) << err;
  EXPECT_TRUE(fs::exists(cwd + "/runs/detect/predict5/bus.jpg"));
}

TEST(CliRuns, NosaveWritesNothing) {
  REQUIRE_MATERIAL(m);
  const std::string cwd = fresh_dir("nosave");
  std::string out, err;
  ASSERT_EQ(run_yolocu(detect(m) + "--nosave --json - " + quote(m.bus), &out, &err, "cli", cwd), 0) << err;
  EXPECT_EQ(parse_json(out)["images"][0]["detections"].arr.size(), 4u);
  EXPECT_EQ(err.find("Results saved"), std::string::npos) << err;
  EXPECT_TRUE(fs::is_empty(cwd)) << tree(cwd).size() << " files written";
  EXPECT_EQ(run_yolocu(detect(m) + "--nosave --save-img " + quote(m.bus), nullptr, &err, "cli", cwd), 2);
  EXPECT_NE(err.find("--nosave and --save-img contradict each other"), std::string::npos) << err;
  EXPECT_TRUE(fs::is_empty(cwd));
}

TEST(CliRuns, ProjectNameAndOutputDir) {
  REQUIRE_MATERIAL(m);
  const std::string cwd = fresh_dir("project");
  std::string err;
  const std::string pn = detect(m) + "--project " + quote(cwd + "/p") + " --name exp ";
  ASSERT_EQ(run_yolocu(pn + quote(m.bus), nullptr, &err, "cli", cwd), 0) << err;
  ASSERT_EQ(run_yolocu(pn + quote(m.bus), nullptr, &err, "cli", cwd), 0) << err;
  EXPECT_NE(err.find("Results saved to " + cwd + "/p/exp2\n"), std::string::npos) << err;
  ASSERT_EQ(run_yolocu(detect(m) + "--name other " + quote(m.bus), nullptr, &err, "cli", cwd), 0) << err;
  // --output-dir DIR: DIR itself, every time (no numbering)
  const std::string od = detect(m) + "--output-dir " + quote(cwd + "/o") + " ";
  ASSERT_EQ(run_yolocu(od + quote(m.bus), nullptr, &err, "cli", cwd), 0) << err;
  ASSERT_EQ(run_yolocu(od + quote(m.zidane), nullptr, &err, "cli", cwd), 0) << err;
  EXPECT_NE(err.find("Results saved to " + cwd + "/o\n"), std::string::npos) << err;
  EXPECT_EQ(tree(cwd), (std::vector<std::string>{"o/bus.jpg", "o/zidane.jpg", "p/exp/bus.jpg", "p/exp2/bus.jpg",
                                                 "runs/detect/other/bus.jpg"}));
  EXPECT_EQ(run_yolocu(od + "--project x " + quote(m.bus), nullptr, &err, "cli", cwd), 2);
  EXPECT_NE(err.find("--output-dir and --project exclude each other"), std::string::npos) << err;
  EXPECT_EQ(run_yolocu(detect(m) + "--name a/b " + quote(m.bus), nullptr, &err, "cli", cwd), 2);
}

// The --save-txt line ultralytics writes for one JSON detection: the box rounded to whole pixels
// (half to even), 'class cx cy w h' normalised by the image size, then the confidence.
std::vector<double> txt_line_of(const Json& d, double w, double h, bool conf) {
  double b[4];
  for (size_t k = 0; k < 4; ++k) b[k] = std::nearbyint(static_cast<float>(d["box"][k].num));
  std::vector<double> l{d["class_id"].num, (b[0] + b[2]) / 2 / w, (b[1] + b[3]) / 2 / h, (b[2] - b[0]) / w, (b[3] - b[1]) / h};
  if (conf) l.push_back(d["confidence"].num);
  return l;
}

std::vector<std::vector<double>> read_txt(const std::string& path) {
  std::vector<std::vector<double>> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream is(line);
    std::vector<double> v;
    for (double x; is >> x;) v.push_back(x);
    lines.push_back(v);
  }
  return lines;
}

TEST(CliRuns, SaveTxtAndConfMatchTheJsonDetections) {
  REQUIRE_MATERIAL(m);
  const std::string cwd = fresh_dir("txt");
  for (const bool conf : {false, true}) {
    SCOPED_TRACE(conf ? "--save-conf" : "no --save-conf");
    std::string err;
    const std::string run = cwd + (conf ? "/conf" : "/plain");
    ASSERT_EQ(run_yolocu(detect(m) + "--save-txt " + (conf ? "--save-conf " : "") + "--output-dir " + quote(run) +
                             " --json " + quote(run + ".json") + " " + quote(m.bus) + " " + quote(m.zidane),
                         nullptr, &err, "cli", cwd),
              0)
        << err;
    EXPECT_NE(err.find("2 labels saved to " + run + "/labels"), std::string::npos) << err;
    const Json j = parse_json(slurp(run + ".json"));
    for (const Json& image : j["images"].arr) {
      const Json& dets = image["detections"];
      const auto got = read_txt(run + "/labels/" + fs::path(image["path"].str).stem().string() + ".txt");
      ASSERT_EQ(got.size(), dets.arr.size()) << image["path"].str;
      for (size_t i = 0; i < got.size(); ++i) {  // reversed: ascending confidence
        const std::vector<double> want = txt_line_of(dets[dets.arr.size() - 1 - i], image["width"].num, image["height"].num, conf);
        ASSERT_EQ(got[i].size(), want.size()) << "line " << i;
        EXPECT_EQ(got[i][0], want[0]) << "line " << i;
        for (size_t k = 1; k < want.size(); ++k) EXPECT_NEAR(got[i][k], want[k], 2e-6) << "line " << i << " field " << k;
      }
    }
  }
}

// ultralytics.utils.plotting.save_one_box(xyxy, im, gain=1.02, pad=10, square=False, BGR=True),
// in float32 as torch computes it: xyxy2xywh, wh * gain + pad, xywh2xyxy, .long(), clip_boxes;
// the crop is im[y0:y1, x0:x1].
struct Box {
  long x0, y0, x1, y1;
};
Box save_one_box(const Json& box, long width, long height) {
  const float x1 = static_cast<float>(box[0].num), y1 = static_cast<float>(box[1].num);
  const float x2 = static_cast<float>(box[2].num), y2 = static_cast<float>(box[3].num);
  float xywh[4] = {(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1};
  xywh[2] = xywh[2] * 1.02f + 10;
  xywh[3] = xywh[3] * 1.02f + 10;
  const float half_w = xywh[2] / 2, half_h = xywh[3] / 2;
  const auto to_long = [](float v) { return static_cast<long>(v); };  // .long(): toward zero
  Box b{to_long(xywh[0] - half_w), to_long(xywh[1] - half_h), to_long(xywh[0] + half_w), to_long(xywh[1] + half_h)};
  b.x0 = std::clamp(b.x0, 0L, width), b.x1 = std::clamp(b.x1, 0L, width);
  b.y0 = std::clamp(b.y0, 0L, height), b.y1 = std::clamp(b.y1, 0L, height);
  return b;
}

TEST(CliRuns, CropsAreSaveOneBoxCrops) {
  REQUIRE_MATERIAL(m);
  const std::string cwd = fresh_dir("crops");
  std::string err;
  ASSERT_EQ(run_yolocu(detect(m) + "--save-crop --nosave --json r.json " + quote(m.bus) + " " + quote(m.zidane), nullptr,
                       &err, "cli", cwd),
            0)
      << err;
  const Json j = parse_json(slurp(cwd + "/r.json"));
  size_t crops = 0;
  for (const Json& image : j["images"].arr) {
    const Image original = decode_image_file(image["path"].str);
    const std::string stem = fs::path(image["path"].str).stem().string();
    std::map<std::string, int> taken;  // class -> crops of this image so far: stem.jpg, stem2.jpg, ...
    for (const Json& d : image["detections"].arr) {
      const int n = ++taken[d["class_name"].str];
      const std::string file = cwd + "/runs/detect/predict/crops/" + d["class_name"].str + "/" + stem +
                               (n == 1 ? "" : std::to_string(n)) + ".jpg";
      ASSERT_TRUE(fs::exists(file)) << file;
      const Box b = save_one_box(d["box"], original.width(), original.height());
      const Image crop = decode_image_file(file);
      EXPECT_EQ(crop.width(), b.x1 - b.x0) << file;
      EXPECT_EQ(crop.height(), b.y1 - b.y0) << file;
      if (crop.width() != b.x1 - b.x0 || crop.height() != b.y1 - b.y0) continue;
      // the pixels are the original's there (JPEG-encoded: close, not equal)
      double diff = 0;
      for (int y = 0; y < crop.height(); ++y)
        for (int x = 0; x < crop.width() * 3; ++x)
          diff += std::abs(crop.row(y)[x] - original.row(static_cast<int>(b.y0) + y)[b.x0 * 3 + x]);
      EXPECT_LT(diff / (crop.width() * crop.height() * 3.0), 4.0) << file;
      crops++;
    }
  }
  EXPECT_EQ(crops, 7u);  // 4 in bus, 3 in zidane
  EXPECT_EQ(tree(cwd + "/runs").size(), crops) << "--nosave: the crops only";
}

TEST(CliRuns, ClassesByName) {
  REQUIRE_MATERIAL(m);
  const std::string cwd = fresh_dir("classes");
  std::string by_id, by_name, err;
  ASSERT_EQ(run_yolocu(detect(m) + "--nosave --json - --classes 5 0 " + quote(m.bus), &by_id, &err, "cli", cwd), 0) << err;
  ASSERT_EQ(run_yolocu(detect(m) + "--nosave --json - --classes bus person " + quote(m.bus), &by_name, &err, "cli", cwd), 0)
      << err;
  EXPECT_EQ(by_name, by_id);
  EXPECT_EQ(parse_json(by_name)["images"][0]["detections"].arr.size(), 4u);
  ASSERT_EQ(run_yolocu(detect(m) + "--nosave --json - --classes=Bus,27 " + quote(m.bus), &by_name, &err, "cli", cwd), 0) << err;
  const Json j = parse_json(by_name);
  ASSERT_EQ(j["images"][0]["detections"].arr.size(), 1u);
  EXPECT_EQ(j["images"][0]["detections"][0]["class_name"].str, "bus");
  EXPECT_EQ(run_yolocu(detect(m) + "--nosave --classes persn " + quote(m.bus), nullptr, &err, "cli", cwd), 2);
  EXPECT_NE(err.find("--classes: 'persn' is not a class of this model; close names: 'person' (0)"), std::string::npos) << err;
  EXPECT_TRUE(fs::is_empty(cwd));
}

TEST(CliRuns, AFailedWriteIsCountedAndTheRunGoesOn) {
  REQUIRE_MATERIAL(m);
  const std::string cwd = fresh_dir("write_fails");
  fs::create_directories(cwd + "/out/bus.jpg");  // a folder where bus's annotated image must go
  std::ofstream(cwd + "/broken.jpg") << "not an image";
  std::string err;
  const std::string json = cwd + "/r.json";
  EXPECT_EQ(run_yolocu(detect(m) + "--output-dir out --json " + quote(json) + " " + quote(m.bus) + " broken.jpg " +
                           quote(m.zidane),
                       nullptr, &err, "cli", cwd),
            1);
  EXPECT_NE(err.find(m.bus + ": write failed: out/bus.jpg: cannot write: "), std::string::npos) << err;
  EXPECT_NE(err.find("3 images (2 failed: 1 unreadable, 1 write failed)"), std::string::npos) << err;
  EXPECT_TRUE(fs::exists(cwd + "/out/zidane.jpg")) << "the image after the failure is saved";
  const Json j = parse_json(slurp(json));
  ASSERT_EQ(j["images"].arr.size(), 3u);
  EXPECT_NE(j["images"][0]["error"].str.find("write failed: out/bus.jpg"), std::string::npos);
  EXPECT_EQ(j["images"][0]["detections"].arr.size(), 4u);  // detected; only its file failed
  EXPECT_TRUE(j["images"][1].has("error"));
  EXPECT_FALSE(j["images"][2].has("error"));
  EXPECT_EQ(j["images"][2]["detections"].arr.size(), 3u);

  // a crops folder blocked by a file: each image's failure named with the system's reason
  std::ofstream(cwd + "/out/crops") << "a file";
  EXPECT_EQ(run_yolocu(detect(m) + "--nosave --save-crop --output-dir out " + quote(m.bus) + " " + quote(m.zidane),
                       nullptr, &err, "cli", cwd),
            1);
  EXPECT_NE(err.find("out/crops/person: cannot create the folder: "), std::string::npos) << err;
  EXPECT_NE(err.find("2 images (2 failed: 2 write failed)"), std::string::npos) << err;
}

}  // namespace
}  // namespace yolocu::test

// yolocu detect end to end: JSON schema and values against the ultralytics references, filters,
// exit codes and per-file errors, --save-txt, --save-img, --dump, folder and glob inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "cli/cli_test_util.hpp"
#include "cli/mini_json.hpp"
#include "yolocu/image.hpp"
#include "yolocu/npy.hpp"

namespace yolocu::test {
namespace {
namespace fs = std::filesystem;

struct Fixture {
  std::string model, bus, zidane;
  Tensor bus_detect, zidane_detect;
  std::map<std::string, Tensor> bus_npz;
  std::vector<std::string> names;
};

bool load(Fixture& f) {
  f.model = data_file("models/yolov5n.onnx");
  f.bus = data_file("images/bus.jpg");
  f.zidane = data_file("images/zidane.jpg");
  const std::string names = data_file("coco.names");
  if (f.model.empty() || f.bus.empty() || f.zidane.empty() || names.empty() || data_file("reference/bus.npz").empty())
    return false;
  f.bus_npz = load_npz(data_file("reference/bus.npz"));
  f.bus_detect = f.bus_npz.at("detect");
  f.zidane_detect = load_npz(data_file("reference/zidane.npz")).at("detect");
  std::ifstream in(names);
  for (std::string line; std::getline(in, line);) f.names.push_back(line);
  return true;
}

#define REQUIRE_FIXTURE(f) \
  Fixture f;               \
  if (!load(f)) GTEST_SKIP() << "test material not found in " << data_dir()

// Detections of one JSON image entry against reference rows [n, 6], the first `rows` of them.
void expect_json_dets(const Json& image, const Tensor& ref, int64_t rows, const std::vector<int>& keep_rows,
                      const std::vector<std::string>& names) {
  const Json& dets = image["detections"];
  const std::vector<int> idx = keep_rows.empty() ? [&] {
    std::vector<int> all;
    for (int64_t i = 0; i < rows; ++i) all.push_back(static_cast<int>(i));
    return all;
  }()
                                                 : keep_rows;
  ASSERT_EQ(dets.arr.size(), idx.size()) << image["path"].str;
  for (size_t k = 0; k < idx.size(); ++k) {
    const float* w = ref.data_as<float>() + 6 * idx[k];
    const Json& d = dets[k];
    EXPECT_EQ(d.keys(), (std::vector<std::string>{"box", "confidence", "class_id", "class_name"}));
    ASSERT_EQ(d["box"].arr.size(), 4u);
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(d["box"][static_cast<size_t>(c)].num, w[c], 0.01);
    EXPECT_NEAR(d["confidence"].num, w[4], 1e-4);
    EXPECT_EQ(d["class_id"].num, w[5]);
    EXPECT_EQ(d["class_name"].str, names.at(static_cast<size_t>(w[5])));
  }
}

TEST(CliDetect, JsonSchemaAndValuesMatchUltralytics) {
  REQUIRE_FIXTURE(f);
  const std::string json = scratch_dir("cli_json") + "/out.json";
  std::string err;
  ASSERT_EQ(run_yolocu("detect --model " + quote(f.model) + " --quiet --json " + quote(json) + " " + quote(f.bus) +
                           " " + quote(f.zidane),
                       nullptr, &err),
            0)
      << err;
  const Json j = parse_json(slurp(json));
  EXPECT_EQ(j.keys(), std::vector<std::string>{"images"});
  ASSERT_EQ(j["images"].arr.size(), 2u);
  const Json& b = j["images"][0];
  EXPECT_EQ(b.keys(), (std::vector<std::string>{"path", "width", "height", "detections"}));
  EXPECT_EQ(b["path"].str, f.bus);
  EXPECT_EQ(b["width"].num, 810);
  EXPECT_EQ(b["height"].num, 1080);
  expect_json_dets(b, f.bus_detect, f.bus_detect.dim(0), {}, f.names);
  const Json& z = j["images"][1];
  EXPECT_EQ(z["width"].num, 1280);
  EXPECT_EQ(z["height"].num, 720);
  expect_json_dets(z, f.zidane_detect, f.zidane_detect.dim(0), {}, f.names);

  // JSON on stdout, same content
  std::string out;
  ASSERT_EQ(run_yolocu("detect --model " + quote(f.model) + " --quiet --json - " + quote(f.bus), &out), 0);
  expect_json_dets(parse_json(out)["images"][0], f.bus_detect, f.bus_detect.dim(0), {}, f.names);
}

TEST(CliDetect, ClassFilterAndMaxDet) {
  REQUIRE_FIXTURE(f);
  std::string out;
  const std::string base = "detect --model " + quote(f.model) + " --quiet --json - ";
  ASSERT_EQ(run_yolocu(base + "--classes 5 " + quote(f.bus), &out), 0);
  expect_json_dets(parse_json(out)["images"][0], f.bus_detect, 0, {3}, f.names);  // row 3 is the bus
  ASSERT_EQ(run_yolocu(base + "--classes 0 27 " + quote(f.zidane), &out), 0);
  expect_json_dets(parse_json(out)["images"][0], f.zidane_detect, 3, {}, f.names);
  ASSERT_EQ(run_yolocu(base + "--classes=27 " + quote(f.zidane), &out), 0);
  expect_json_dets(parse_json(out)["images"][0], f.zidane_detect, 0, {2}, f.names);
  ASSERT_EQ(run_yolocu(base + "--classes 1 " + quote(f.zidane), &out), 0);
  EXPECT_TRUE(parse_json(out)["images"][0]["detections"].arr.empty());
  ASSERT_EQ(run_yolocu(base + "--max-det 2 " + quote(f.bus), &out), 0);
  expect_json_dets(parse_json(out)["images"][0], f.bus_detect, 2, {}, f.names);
  // a higher threshold keeps the reference rows above it
  ASSERT_EQ(run_yolocu(base + "--conf 0.7 " + quote(f.bus), &out), 0);
  expect_json_dets(parse_json(out)["images"][0], f.bus_detect, 2, {}, f.names);
}

TEST(CliDetect, ExitCodesAndPerFileErrors) {
  REQUIRE_FIXTURE(f);
  const std::string dir = scratch_dir("cli_errors");
  const std::string corrupt = dir + "/corrupt.jpg", missing = dir + "/missing.jpg";
  {
    std::string bytes = slurp(f.bus).substr(0, 5000);  // a truncated JPEG
    std::ofstream(corrupt, std::ios::binary) << bytes;
  }
  std::string out, err;
  EXPECT_EQ(run_yolocu("detect --model " + quote(f.model) + " --no-such-option " + quote(f.bus), &out, &err), 2);
  EXPECT_NE(err.find("no-such-option"), std::string::npos) << err;
  EXPECT_EQ(run_yolocu("detect " + quote(f.bus), &out, &err), 2);                                  // no --model
  EXPECT_EQ(run_yolocu("detect --model " + quote(f.model), &out, &err), 2);                        // no inputs
  EXPECT_EQ(run_yolocu("detect --model " + quote(f.model) + " --conf abc " + quote(f.bus), &out, &err), 2);
  EXPECT_EQ(run_yolocu("detect --model " + quote(f.model) + " --device tpu " + quote(f.bus), &out, &err), 2);
  EXPECT_EQ(run_yolocu("detect --model " + quote(dir + "/nope.onnx") + " " + quote(f.bus), &out, &err), 2);  // test_cli_paths.cpp
  EXPECT_NE(err.find("nope.onnx"), std::string::npos) << err;
  EXPECT_EQ(run_yolocu("frobnicate", &out, &err), 2);

  // good, corrupt, good, missing: 1, both good images processed, both errors in JSON and on stderr
  ASSERT_EQ(run_yolocu("detect --model " + quote(f.model) + " --quiet --batch 2 --json - " + quote(f.bus) + " " +
                           quote(corrupt) + " " + quote(f.zidane) + " " + quote(missing),
                       &out, &err),
            1);
  const Json j = parse_json(out);
  ASSERT_EQ(j["images"].arr.size(), 4u);
  expect_json_dets(j["images"][0], f.bus_detect, f.bus_detect.dim(0), {}, f.names);
  expect_json_dets(j["images"][2], f.zidane_detect, f.zidane_detect.dim(0), {}, f.names);
  for (size_t i : {size_t{1}, size_t{3}}) {
    const Json& e = j["images"][i];
    ASSERT_TRUE(e.has("error")) << i;
    EXPECT_FALSE(e["error"].str.empty());
    EXPECT_TRUE(e["detections"].arr.empty());
    EXPECT_NE(err.find(e["path"].str), std::string::npos) << err;
  }
  EXPECT_FALSE(j["images"][0].has("error"));
  EXPECT_NE(j["images"][3]["error"].str.find("missing.jpg"), std::string::npos);
}

// Expected --save-txt lines, computed here from the reference rows: boxes rounded to whole
// pixels, 'class cx cy w h' normalised, reversed order (detect.py writes reversed(det)).
std::vector<std::vector<double>> expected_txt(const Tensor& ref, int width, int height, bool conf) {
  std::vector<std::vector<double>> lines;
  for (int64_t i = ref.dim(0) - 1; i >= 0; --i) {
    const float* r = ref.data_as<float>() + 6 * i;
    const double x1 = std::nearbyint(r[0]), y1 = std::nearbyint(r[1]), x2 = std::nearbyint(r[2]),
                 y2 = std::nearbyint(r[3]);
    std::vector<double> l{r[5], (x1 + x2) / 2 / width, (y1 + y2) / 2 / height, (x2 - x1) / width, (y2 - y1) / height};
    if (conf) l.push_back(r[4]);
    lines.push_back(l);
  }
  return lines;
}

void expect_txt(const std::string& path, const std::vector<std::vector<double>>& want) {
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::vector<std::vector<double>> got;
  for (std::string line; std::getline(in, line);) {
    std::istringstream is(line);
    std::vector<double> v;
    for (double x; is >> x;) v.push_back(x);
    got.push_back(v);
  }
  ASSERT_EQ(got.size(), want.size()) << path;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << path << " line " << i;
    EXPECT_EQ(got[i][0], want[i][0]);
    for (size_t k = 1; k < got[i].size(); ++k) EXPECT_NEAR(got[i][k], want[i][k], 2e-6) << path << " line " << i;
  }
}

TEST(CliDetect, SaveTxtAndSaveImg) {
  REQUIRE_FIXTURE(f);
  const std::string dir = scratch_dir("cli_save");
  fs::remove_all(dir + "/out");
  std::string out, err;
  ASSERT_EQ(run_yolocu("detect --model " + quote(f.model) + " --quiet --save-txt --save-img --output-dir " +
                           quote(dir + "/out") + " " + quote(f.bus) + " " + quote(f.zidane),
                       &out, &err),
            0)
      << err;
  expect_txt(dir + "/out/labels/bus.txt", expected_txt(f.bus_detect, 810, 1080, false));
  expect_txt(dir + "/out/labels/zidane.txt", expected_txt(f.zidane_detect, 1280, 720, false));
  const Image original = decode_image_file(f.bus);
  const Image drawn = decode_image_file(dir + "/out/bus.jpg");
  ASSERT_EQ(drawn.width(), 810);
  ASSERT_EQ(drawn.height(), 1080);
  EXPECT_NE(std::memcmp(original.data(), drawn.data(), original.size_bytes()), 0);

  fs::remove_all(dir + "/conf");
  ASSERT_EQ(run_yolocu("detect --model " + quote(f.model) + " --quiet --save-txt --save-conf --project " +
                           quote(dir + "/conf") + " " + quote(f.bus),
                       &out, &err),
            0)
      << err;
  expect_txt(dir + "/conf/predict/labels/bus.txt", expected_txt(f.bus_detect, 810, 1080, true));
  EXPECT_EQ(run_yolocu("detect --model " + quote(f.model) + " --save-conf " + quote(f.bus), &out, &err), 2);
}

TEST(CliDetect, DumpWritesEveryStage) {
  REQUIRE_FIXTURE(f);
  const std::string dir = scratch_dir("cli_dump");
  std::string out, err;
  ASSERT_EQ(run_yolocu("detect --model " + quote(f.model) + " --quiet --dump " + quote(dir) + " " + quote(f.bus) + " " +
                           quote(f.zidane),
                       &out, &err),
            0)
      << err;
  const Tensor lb = load_npy(dir + "/bus_letterboxed.npy");
  EXPECT_EQ(lb.dtype(), DType::kUInt8);
  ASSERT_EQ(lb.shape(), (Shape{640, 640, 3}));
  EXPECT_EQ(std::memcmp(lb.data(), f.bus_npz.at("letterboxed_bgr").data(), lb.nbytes()), 0);
  const Tensor in = load_npy(dir + "/bus_input.npy");
  ASSERT_EQ(in.shape(), (Shape{1, 3, 640, 640}));
  EXPECT_EQ(std::memcmp(in.data(), f.bus_npz.at("input").data(), in.nbytes()), 0);
  const Tensor o = load_npy(dir + "/bus_output0.npy");
  ASSERT_EQ(o.shape(), (Shape{1, 25200, 85}));
  EXPECT_LT(compare(o, f.bus_npz.at("output")).rel_l2, 1e-5);
  EXPECT_FALSE(fs::exists(dir + "/bus_output1.npy"));
  const Tensor c = load_npy(dir + "/bus_candidates.npy");
  ASSERT_EQ(c.rank(), 2u);
  EXPECT_EQ(c.dim(1), 6);
  EXPECT_GE(c.dim(0), f.bus_detect.dim(0));
  const float* p = c.data_as<float>();
  for (int64_t i = 0; i < c.dim(0); ++i) {
    EXPECT_GT(p[6 * i + 4], 0.25f);
    if (i) {
      EXPECT_LE(p[6 * i + 4], p[6 * (i - 1) + 4]);
    }
  }
  for (const char* s : {"_letterboxed", "_input", "_output0", "_candidates"})
    EXPECT_TRUE(fs::exists(dir + "/zidane" + s + ".npy")) << s;
}

TEST(CliDetect, FolderAndGlobInputs) {
  REQUIRE_FIXTURE(f);
  const std::string dir = scratch_dir("cli_inputs") + "/imgs";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(f.zidane, dir + "/a.jpg");
  fs::copy_file(f.bus, dir + "/b.JPG");
  std::ofstream(dir + "/notes.txt") << "not an image";
  std::string out, err;
  ASSERT_EQ(run_yolocu("detect --model " + quote(f.model) + " --quiet --json - " + quote(dir), &out, &err), 0) << err;
  Json j = parse_json(out);
  ASSERT_EQ(j["images"].arr.size(), 2u);
  EXPECT_EQ(fs::path(j["images"][0]["path"].str).filename(), "a.jpg");
  EXPECT_EQ(fs::path(j["images"][1]["path"].str).filename(), "b.JPG");
  expect_json_dets(j["images"][0], f.zidane_detect, f.zidane_detect.dim(0), {}, f.names);
  expect_json_dets(j["images"][1], f.bus_detect, f.bus_detect.dim(0), {}, f.names);

  ASSERT_EQ(run_yolocu("detect --model " + quote(f.model) + " --quiet --json - " + quote(dir + "/*.jpg"), &out, &err), 0);
  j = parse_json(out);
  ASSERT_EQ(j["images"].arr.size(), 1u);  // glob(3) is case-sensitive
  EXPECT_EQ(fs::path(j["images"][0]["path"].str).filename(), "a.jpg");

  ASSERT_EQ(run_yolocu("detect --model " + quote(f.model) + " --quiet --json - " + quote(dir + "/[ab].*") + " " +
                           quote(dir + "/*.png"),
                       &out, &err),
            1);
  j = parse_json(out);
  ASSERT_EQ(j["images"].arr.size(), 3u);
  EXPECT_TRUE(j["images"][2].has("error"));
  EXPECT_FALSE(j["images"][0].has("error"));
}

TEST(CliDetect, HelpAndUsage) {
  std::string out, err;
  EXPECT_EQ(run_yolocu("detect --help", &out, &err), 0);
  EXPECT_NE(out.find("--save-txt"), std::string::npos);
  EXPECT_EQ(run_yolocu("eval --help", &out, &err), 0);
  EXPECT_NE(out.find("--labels"), std::string::npos);
  EXPECT_EQ(run_yolocu("--help", &out, &err), 0);
  EXPECT_NE(out.find("detect"), std::string::npos);
}

}  // namespace
}  // namespace yolocu::test

namespace yolocu::test {
namespace {

// A YOLOv8 / YOLO11 model through the command line with no post-processing option: the family's
// defaults (ultralytics predict: conf 0.25, iou 0.7, max_det 300) give ultralytics' detections;
// `inspect` names the family.
TEST(CliDetect, V8ModelsUseTheirFamilyDefaults) {
  const std::string bus = data_file("images/bus.jpg"), names_path = data_file("coco.names");
  if (bus.empty() || names_path.empty()) GTEST_SKIP() << "test material not found in " << data_dir();
  std::vector<std::string> names;
  std::ifstream in(names_path);
  for (std::string line; std::getline(in, line);) names.push_back(line);
  for (const std::string name : {"yolov8n", "yolo11n"}) {
    SCOPED_TRACE(name);
    YOLOCU_REQUIRE_V8(model, name + ".onnx");
    YOLOCU_REQUIRE_V8(npz, name + "_bus.npz");
    const Tensor ref = load_npz(npz).at("detect");
    std::string out, err;
    ASSERT_EQ(run_yolocu("detect --model " + quote(model) + " --device cpu --quiet --json - " + quote(bus), &out, &err), 0)
        << err;
    const Json j = parse_json(out);
    const Json& dets = j["images"][0]["detections"];
    ASSERT_EQ(static_cast<int64_t>(dets.arr.size()), ref.dim(0));
    for (size_t k = 0; k < dets.arr.size(); ++k) {
      const float* w = ref.data_as<float>() + 6 * k;
      for (int c = 0; c < 4; ++c) EXPECT_NEAR(dets[k]["box"][static_cast<size_t>(c)].num, w[c], 0.5);
      EXPECT_NEAR(dets[k]["confidence"].num, w[4], 1e-3);
      EXPECT_EQ(dets[k]["class_id"].num, w[5]);
      EXPECT_EQ(dets[k]["class_name"].str, names.at(static_cast<size_t>(w[5])));
    }
    ASSERT_EQ(run_yolocu("inspect --model " + quote(model), &out, &err), 0) << err;
    EXPECT_NE(out.find(std::string("family:   yolov8 (") + (name == "yolov8n" ? "YOLOv8n" : "YOLO11n") + "), task detect"),
              std::string::npos)
        << out;
  }
}

}  // namespace
}  // namespace yolocu::test

namespace yolocu::test {
namespace {

// `inspect --device` builds the detector and reports how: on the CPU its build time; on the GPU
// (the test machine's) also where the tactics came from. A wrong device is a usage error.
TEST(CliInspect, DeviceBuildsAndReports) {
  const std::string model = data_file("models/yolov5n.onnx");
  if (model.empty()) GTEST_SKIP() << "test material not found in " << data_dir();
  std::string out, err;
  ASSERT_EQ(run_yolocu("inspect --model " + quote(model) + " --device cpu", &out, &err), 0) << err;
  EXPECT_NE(out.find("status:   runnable"), std::string::npos) << out;
  EXPECT_NE(out.find("build:    cpu, batch 1, built in "), std::string::npos) << out;
  EXPECT_NE(run_yolocu("inspect --model " + quote(model) + " --device tpu", &out, &err), 0);
  EXPECT_NE(err.find("--device must be auto, cpu, cuda or cuda:N"), std::string::npos) << err;
  ASSERT_EQ(run_yolocu("inspect --model " + quote(model), &out, &err), 0) << err;
  EXPECT_EQ(out.find("build:"), std::string::npos) << "no --device: the model only";
}

}  // namespace
}  // namespace yolocu::test

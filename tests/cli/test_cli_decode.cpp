// `--decode cpu|gpu` on yolocu detect / eval and `yolocu bench --from-jpeg` (CPU side): option
// parsing and the combinations refused before any work, GPU decode refused with a clear message
// where the detector runs on the CPU, and the --from-jpeg table and JSON. The GPU side runs in
// scripts/gpu/run_all.sh detector (decode gpu against decode cpu on coco128).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cli/cli_test_util.hpp"

namespace yolocu::test {
namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(CliDecode, BadCombinationsAreUsageErrors) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  const std::string m = " --model " + quote(model) + " ";
  std::string out, err;
  EXPECT_EQ(run_yolocu("detect" + m + "--decode jpeg " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "--decode must be cpu or gpu, got 'jpeg'")) << err;
  EXPECT_EQ(run_yolocu("detect" + m + "--decode gpu --save-img " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "--save-img needs the decoded image on the host")) << err;
  EXPECT_EQ(run_yolocu("detect" + m + "--decode gpu --dump " + quote(scratch_dir("cli_decode")) + " " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "--dump")) << err;
  EXPECT_EQ(run_yolocu("detect" + m + "--decode gpu --source " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "--decode applies to image files")) << err;
  EXPECT_EQ(run_yolocu("bench" + m + "--decode gpu", &out, &err), 2);
  EXPECT_TRUE(has(err, "--decode needs --from-jpeg")) << err;
  EXPECT_EQ(run_yolocu("bench" + m + "--from-jpeg " + quote(bus) + " --image " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "exclude each other")) << err;
  EXPECT_EQ(run_yolocu("bench" + m + "--from-jpeg . --decode-threads 0", &out, &err), 2);
  EXPECT_TRUE(has(err, "--decode-threads must be in 1..256")) << err;
  EXPECT_EQ(run_yolocu("bench" + m + "--from-jpeg . --rounds 0", &out, &err), 2);
  EXPECT_TRUE(has(err, "--rounds must be in 1..1000")) << err;
  EXPECT_EQ(run_yolocu("bench" + m + "--rounds 2", &out, &err), 2);
  EXPECT_TRUE(has(err, "--rounds needs --from-jpeg")) << err;
  EXPECT_EQ(run_yolocu("bench" + m + "--stage-times", &out, &err), 2);
  EXPECT_TRUE(has(err, "--stage-times needs --from-jpeg")) << err;
  EXPECT_EQ(run_yolocu("bench" + m + "--from-jpeg . --timeline " + quote(scratch_dir("cli_decode") + "/t.json"), &out, &err), 2);
  EXPECT_TRUE(has(err, "--timeline applies to the image benchmark")) << err;
  EXPECT_EQ(run_yolocu("detect" + m + "--decode-cpu-share 0.25 " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "--decode-cpu-share needs --decode gpu")) << err;
  EXPECT_EQ(run_yolocu("detect" + m + "--decode gpu --decode-cpu-share 0.95 " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "--decode-cpu-share must be in [0, 0.9], got 0.95")) << err;
  EXPECT_EQ(run_yolocu("bench" + m + "--decode-cpu-share 0.25", &out, &err), 2);
  EXPECT_TRUE(has(err, "--decode-cpu-share needs --decode gpu")) << err;
  EXPECT_EQ(run_yolocu("detect" + m + "--engine-graph-segments 0 " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "--engine-graph-segments must be in 1..64")) << err;
  EXPECT_EQ(run_yolocu("detect" + m + "--engine-graph-segments 4 --no-engine-graphs " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "--engine-graph-segments needs the engine's graphs")) << err;
  EXPECT_EQ(run_yolocu("detect" + m + "--engine-graphs --no-engine-graphs " + quote(bus), &out, &err), 2);
  EXPECT_TRUE(has(err, "--engine-graphs and --no-engine-graphs contradict each other")) << err;
}

TEST(CliDecode, GpuDecodeOnACpuDetectorIsRefusedClearly) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  std::string out, err;
  EXPECT_EQ(run_yolocu("detect --model " + quote(model) + " --device cpu --decode gpu " + quote(bus), &out, &err), 1);
  EXPECT_TRUE(has(err, "decode kGpu")) << err;
  EXPECT_TRUE(has(err, "use decode kCpu")) << err;
}

TEST(CliDecode, CpuDecodeIsTheDefault) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  std::string plain, cpu, err;
  ASSERT_EQ(run_yolocu("detect --model " + quote(model) + " --device cpu --quiet --json - " + quote(bus), &plain, &err), 0) << err;
  ASSERT_EQ(run_yolocu("detect --model " + quote(model) + " --device cpu --quiet --decode cpu --json - " + quote(bus), &cpu, &err), 0)
      << err;
  EXPECT_EQ(plain, cpu);
  EXPECT_TRUE(has(plain, "\"width\": 810")) << plain;
}

TEST(CliDecode, BenchFromJpegReportsImagesPerSecond) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(images, "images");
  const std::string json = scratch_dir("cli_decode") + "/from_jpeg.json";
  std::string out, err;
  ASSERT_EQ(run_yolocu("bench --model " + quote(model) + " --device cpu --from-jpeg " + quote(images) +
                           " --images 3 --batches 2 --decode-threads 1 --rounds 3 --json " + quote(json),
                       &out, &err),
            0)
      << err;
  EXPECT_TRUE(has(out, "images/s")) << out;
  EXPECT_TRUE(has(out, "3 cpu (cpu, reader threads)")) << out;  // the median round's images, not the sum
  EXPECT_TRUE(has(out, "3 rounds, images/s in run order: ")) << out;
  const std::string j = slurp(json);
  EXPECT_TRUE(has(j, "\"images\": 3")) << j;
  const size_t at = j.find("\"rounds_images_per_s\": [");
  ASSERT_NE(at, std::string::npos) << j;
  const std::string list = j.substr(at, j.find(']', at) - at);
  EXPECT_EQ(std::count(list.begin(), list.end(), ','), 2) << list;  // three rounds
  EXPECT_TRUE(has(j, "\"decode\": \"cpu\"")) << j;
  EXPECT_TRUE(has(j, "\"failed\": 0")) << j;
  EXPECT_TRUE(has(j, "\"images_per_s\": ")) << j;
}

TEST(CliDecode, HelpNamesTheOptions) {
  std::string out, err;
  for (const char* cmd : {"detect", "eval", "bench"}) {
    ASSERT_EQ(run_yolocu(std::string(cmd) + " --help", &out, &err), 0);
    EXPECT_TRUE(has(out, "--decode")) << cmd;
  }
  EXPECT_TRUE(has(out, "--from-jpeg")) << out;
}

// --no-engine-graphs / --engine-graphs are known flags of the detector commands; the CPU path ignores
// them (same JSON). Their GPU effect (eager engine launches beside nvJPEG, the default with --decode
// gpu) is measured by run_all.sh decode.
TEST(CliDecode, NoEngineGraphsIsAcceptedAndTheCpuPathIgnoresIt) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  const std::string cmd = "detect --model " + quote(model) + " --device cpu --quiet --json - ";
  std::string with, without, err;
  ASSERT_EQ(run_yolocu(cmd + "--no-engine-graphs " + quote(bus), &with, &err), 0) << err;
  ASSERT_EQ(run_yolocu(cmd + quote(bus), &without, &err), 0) << err;
  EXPECT_TRUE(has(with, "\"detections\"")) << with;
  EXPECT_EQ(with, without);
  std::string graphs;
  ASSERT_EQ(run_yolocu(cmd + "--engine-graphs " + quote(bus), &graphs, &err), 0) << err;
  EXPECT_EQ(graphs, without);
}

}  // namespace
}  // namespace yolocu::test

// yolocu bench: trtexec-style latency and throughput of the whole detector (image in host memory
// -> boxes in host memory) and of its stages, per batch size; optional JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "run_common.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "yolocu/postprocess.hpp"

namespace yolocu::cli {
namespace {

struct Stats {
  double median = 0, p90 = 0, p99 = 0, mean = 0;
};

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))]; };
  s.median = at(0.5);
  s.p90 = at(0.9);
  s.p99 = at(0.99);
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  auto valued = detector_valued_options();
  valued.insert(valued.end(), {"image", "iters", "warmup", "json", "batches"});
  Args args(argc, argv, 2, detector_flag_options(), valued);
  if (args.flag("help")) {
    std::printf(
        "usage: yolocu bench --model M [--batches 1 8 32] [--image bus.jpg] [--iters 100] [--warmup 10]\n"
        "                    [--device auto|cpu|cuda] [--precision fp16|fp32] [--letterbox exact|fast]\n"
        "                    [--conf 0.25 --iou 0.45 --max-det 1000 ...] [--json OUT]\n"
        "                    [--tactic-cache FILE|none]\n"
        "Times detect() end to end (decoded image in host memory -> boxes in host memory) and its stages\n"
        "(pre-processing, inference, post-processing) for each batch size: median, p90, p99 and\n"
        "images/s after warm-up. Without --image a synthetic 810x1080 image is used.\n");
    return 0;
  }
  PostprocessOptions defaults;
  defaults.max_det = 1000;
  DetectorOptions base = detector_options(args, defaults);
  std::vector<int> batches = args.get_int_list("batches");
  if (batches.empty()) batches = {base.max_batch};
  const long iters = std::max(1L, args.get_int("iters", 100));
  const long warmup = std::max(0L, args.get_int("warmup", 10));
  const std::string model = args.require("model");
  check_model_file(model);
  if (args.has("image")) check_input_file("--image", args.get("image"), "an image", ".jpg");
  if (args.has("json")) check_output_file("--json", args.get("json"));
  Image image;
  if (args.has("image")) {
    image = decode_image_file(args.get("image"));
  } else {
    image = Image(810, 1080);
    for (int y = 0; y < image.height(); ++y)
      for (int x = 0; x < image.width() * 3; ++x) image.row(y)[x] = static_cast<uint8_t>((x * 7 + y * 13) & 0xff);
  }
  std::string json = "{\"model\": " + json_string(model) + ", \"image\": [" + std::to_string(image.width()) + ", " +
                     std::to_string(image.height()) + "], \"results\": [";
  bool first_row = true;
  std::printf("%-6s %-6s | %10s %9s %9s | %9s %10s | %9s %9s %9s\n", "device", "batch", "e2e med ms", "p90", "p99",
              "ms/image", "images/s", "pre ms", "infer ms", "post ms");
  for (int b : batches) {
    if (b < 1) throw UsageError("--batches: sizes must be >= 1");
    DetectorOptions o = base;
    o.max_batch = b;
    auto det = Detector::create(model, o);
    std::fprintf(stderr, "batch %d: detector %s\n", b, describe_build(*det).c_str());
    std::vector<ImageView> batch(static_cast<size_t>(b), image.view());
    for (long i = 0; i < warmup; ++i) det->detect(batch);
    std::vector<double> e2e, pre, inf, post;
    size_t boxes = 0;
    for (long i = 0; i < iters; ++i) {
      const auto a = std::chrono::steady_clock::now();
      const auto r = det->detect(batch);
      e2e.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
      const StageTimes t = det->last_times();
      pre.push_back(t.preprocess);
      inf.push_back(t.inference);
      post.push_back(t.postprocess);
      boxes = r[0].size();
    }
    const Stats s = stats_of(e2e), sp = stats_of(pre), si = stats_of(inf), so = stats_of(post);
    const char* dev = device_name(det->device());
    std::printf("%-6s %-6d | %10.3f %9.3f %9.3f | %9.3f %10.0f | %9.3f %9.3f %9.3f\n", dev, b, s.median, s.p90, s.p99,
                s.median / b, 1000.0 * b / s.median, sp.median, si.median, so.median);
    json += std::string(first_row ? "" : ", ") + "{\"device\": " + json_string(dev) + ", \"batch\": " +
            std::to_string(b) + ", " + build_json_fields(*det) + ", \"e2e_ms\": {\"median\": " +
            json_number(s.median) + ", \"p90\": " + json_number(s.p90) + ", \"p99\": " + json_number(s.p99) +
            ", \"mean\": " + json_number(s.mean) + "}, \"images_per_s\": " + json_number(1000.0 * b / s.median) +
            ", \"stages_median_ms\": {\"preprocess\": " + json_number(sp.median) + ", \"inference\": " +
            json_number(si.median) + ", \"postprocess\": " + json_number(so.median) + "}, \"detections_image0\": " +
            std::to_string(boxes) + "}";
    first_row = false;
  }
  json += "]}\n";
  if (args.has("json")) write_text(args.get("json"), json);
  std::printf("(stage times are host wall times of each detect() call's phases; on the GPU the device work of\n"
              " a phase overlaps the next phase's launch, and only 'post' includes the final synchronisation)\n");
  return 0;
}

}  // namespace yolocu::cli

// yolocu calibrate: INT8 calibration of a model over a folder of images (yolocu/int8.hpp): the
// activation and weight scales written to a JSON file for yolocu eval/detect --precision int8.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "args.hpp"
#include "commands.hpp"
#include "paths.hpp"
#include "report.hpp"
#include "yolocu/error.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu::cli {
namespace {

void print_help() {
  std::printf(
      "usage: yolocu calibrate --model M.onnx --images DIR [options] -o FILE\n"
      "Runs the CPU engine (FP32) over the images (letterboxed as yolocu detect does) and writes the INT8\n"
      "calibration: one scale per convolution input and output tensor, per-output-channel weight scales,\n"
      "the model's and the images' SHA-256 (docs/int8.md). Same images, same options: the same file.\n\n"
      "  --images SPEC        images (files, folders, glob patterns; repeatable; also as plain arguments),\n"
      "                       used in sorted order\n"
      "  --method M           percentile (default), entropy (TensorRT's KL divergence), minmax\n"
      "  --percentile P       percentile of |x| for --method percentile (99.99)\n"
      "  --imgsz S | H W      network input size (default: the model's static size, else 640)\n"
      "  --max-images N       calibrate on the first N images only (default: all)\n"
      "  --keep-float-worst K sensitivity pass: quantise one convolution at a time over the first\n"
      "                       --sensitivity-images images and keep the K whose output error is largest\n"
      "                       in float (default 12; 0: no pass)\n"
      "  --sensitivity-images N  images of the sensitivity pass (8)\n"
      "  --quantize-edges     quantise the first convolution and the Detect head's convolutions too (by\n"
      "                       default they stay in float)\n"
      "  --scales-from FILE   take the activation scales of an earlier calibration of this model on the same\n"
      "                       images with the same method (checked) instead of collecting them again: to\n"
      "                       choose the layers kept in float anew\n"
      "  --threads N          CPU engine threads (0 = all cores)\n"
      "  -o, --output FILE    the calibration file (JSON, written atomically)\n"
      "  --quiet              no progress line, no summary\n"
      "Exit status: 0 success, 1 the model or an image failed (no file written), 2 bad usage.\n");
}

Int8CalibrateOptions calibrate_options(const Args& args) {
  Int8CalibrateOptions o;
  try {
    o.method = parse_calibration_method(args.get("method", "percentile"));
  } catch (const Error& e) {
    throw UsageError(std::string("--method: ") + e.what());
  }
  o.percentile = args.get_double("percentile", 99.99);
  if (!(o.percentile > 0 && o.percentile <= 100)) throw UsageError("--percentile must be in (0, 100]");
  if (args.has("percentile") && o.method != CalibrationMethod::kPercentile)
    throw UsageError("--percentile goes with --method percentile");
  const std::vector<int> sz = args.get_int_list("imgsz");
  if (sz.size() > 2) throw UsageError("--imgsz takes one or two values (size, or height width)");
  if (!sz.empty() && (sz[0] <= 0 || sz.back() <= 0)) throw UsageError("--imgsz must be > 0");
  if (!sz.empty()) o.input_height = sz[0], o.input_width = sz.back();
  const long max_images = args.get_int("max-images", 0);
  if (max_images < 0) throw UsageError("--max-images must be >= 0 (0: all)");
  o.max_images = static_cast<int>(max_images);
  const long worst = args.get_int("keep-float-worst", 12), simages = args.get_int("sensitivity-images", 8);
  if (worst < 0 || worst > 100000) throw UsageError("--keep-float-worst must be >= 0");
  if (simages < 1 || simages > 100000) throw UsageError("--sensitivity-images must be >= 1");
  o.keep_worst = static_cast<int>(worst);
  o.sensitivity_images = static_cast<int>(simages);
  o.keep_detect_and_stem = !args.flag("quantize-edges");
  const long threads = args.get_int("threads", 0);
  if (threads < 0 || threads > 1024) throw UsageError("--threads must be in 0..1024 (0: all cores)");
  o.num_threads = static_cast<int>(threads);
  return o;
}

}  // namespace

void print_calibration_summary(FILE* f, const Int8Calibration& c) {
  std::fprintf(f, "%zu convolutions (%zu tensors) calibrated on %lld images (sha256 %s), method %s%s, input %dx%d\n",
               c.convs.size(), c.tensors.size(), static_cast<long long>(c.num_images), c.images_sha256.c_str(),
               calibration_method_name(c.method),
               c.method == CalibrationMethod::kPercentile ? (" " + std::to_string(c.percentile)).c_str() : "",
               c.input_width, c.input_height);
  std::fprintf(f, "kept in float: %d convolution(s)%s%s\n", c.float_convs(),
               c.sensitivity_keep ? (" (" + std::to_string(c.sensitivity_keep) + " by the sensitivity pass)").c_str() : "",
               c.float_convs() ? ":" : "");
  for (const Int8ConvScales& k : c.convs)
    if (k.keep_float) {
      if (k.sensitivity >= 0) std::fprintf(f, "  %s (output error alone %.5f)\n", k.node.c_str(), k.sensitivity);
      else std::fprintf(f, "  %s\n", k.node.c_str());
    }
}

void print_int8_engine_plan(FILE* f, const Int8EnginePlan& p) {
  std::fprintf(f, "GPU engine with --precision int8: %zu convolution(s) on INT8 kernels, %zu in float, %d int8 "
               "copies quantised from fp16 values, %d Concat(s) on int8 values%s\n",
               p.int8_convs.size(), p.float_convs.size(), p.quantize_steps, p.int8_concats, p.float_convs.empty() ? "" : ":");
  for (const auto& [node, why] : p.float_convs) std::fprintf(f, "  %s: %s\n", node.c_str(), why.c_str());
}

int cmd_calibrate(int argc, char** argv) {
  // -o FILE is --output FILE (the Args parser reads --options only)
  std::vector<std::string> words(argv, argv + argc);
  std::vector<char*> av;
  for (std::string& w : words) av.push_back(w == "-o" ? const_cast<char*>("--output") : w.data());
  Args args(argc, av.data(), 2, {"help", "quiet", "quantize-edges", "progress"},
            {"model", "images", "method", "percentile", "imgsz", "max-images", "keep-float-worst", "sensitivity-images",
             "threads", "output", "scales-from"});
  if (args.flag("help")) {
    print_help();
    return 0;
  }
  const std::string model = args.require("model");
  const std::string out = args.require("output");
  if (args.all("output").size() > 1) throw UsageError("-o / --output given more than once");
  std::vector<std::string> specs = args.all("images");
  for (const auto& p : args.positional()) specs.push_back(p);
  if (specs.empty()) throw UsageError("missing required option --images");
  Int8CalibrateOptions o = calibrate_options(args);
  check_model_file(model);
  check_output_file("--output", out);
  if (out == "-") throw UsageError("--output must be a file");
  std::vector<std::string> images;
  for (const Source& s : expand_inputs(specs)) {
    if (!s.error.empty()) throw UsageError(s.name + ": " + s.error);
    images.push_back(s.name);
  }
  const bool quiet = args.flag("quiet");
  std::string phase;
  std::unique_ptr<Progress> progress;
  o.progress = [&](const char* p, int64_t done, int64_t total) {
    if (phase != p) {
      phase = p;
      if (!quiet) std::fprintf(stderr, "%s pass\n", p);
      progress = std::make_unique<Progress>(static_cast<size_t>(total), quiet, args.flag("progress"));
    }
    progress->update(static_cast<size_t>(done));
  };
  std::unique_ptr<Int8Calibration> reuse;
  if (args.has("scales-from")) {
    check_input_file("--scales-from", args.get("scales-from"), "a calibration file", ".json");
    reuse = std::make_unique<Int8Calibration>(load_int8_calibration(args.get("scales-from"), file_sha256(model)));
    o.scales_from = reuse.get();
  }
  const Int8Calibration c = calibrate_int8(model, images, o);
  save_int8_calibration(c, out);
  if (!quiet) {
    std::fprintf(stderr, "wrote %s: ", out.c_str());
    print_calibration_summary(stderr, c);
  }
  return 0;
}

}  // namespace yolocu::cli

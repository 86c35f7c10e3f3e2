// yolocu eval: mAP of a model over a labelled image folder, as ultralytics/yolov5 v7.0 val.py
// scores it (see docs/semantics.md for the one difference: the letterbox is detect.py's).
#include <cstdio>
#include <filesystem>

#include "args.hpp"
#include "commands.hpp"
#include "json_out.hpp"
#include "options.hpp"
#include "paths.hpp"
#include "report.hpp"
#include "yolocu/eval.hpp"
#include "yolocu/error.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;
namespace {

void print_help() {
  std::printf(
      "usage: yolocu eval --model M.onnx --images DIR --labels DIR [options]\n"
      "Runs the detector over the images (files, folders or glob patterns; --images may repeat) and\n"
      "scores it against YOLO labels (DIR/<image stem>.txt, 'class cx cy w h' normalised; an image\n"
      "without a label file is background): mAP50, mAP50-95, P, R as val.py computes them.\n\n"
      "  --conf C           confidence threshold (0.001, val.py)\n"
      "  --iou T            NMS IoU threshold (0.6; YOLOv8 / YOLO11: 0.7, as their val)\n"
      "  --max-det N        detections per image (300)\n"
      "  --single-label     best class per box only (val.py default is multi-label)\n"
      "  --classes ... --agnostic --imgsz --device --batch --threads --workers --max-memory --max-pixels\n"
      "                     as in yolocu detect\n"
      "  --decode D         cpu (default: identical to OpenCV / val.py) or gpu (nvJPEG, as in yolocu detect)\n"
      "  --json OUT         per-image detections and the metrics as JSON ('-' = stdout)\n"
      "  --verbose          per-class AP table\n"
      "  --quiet            no progress line\n"
      "Exit status: 0 success, 1 some image or the model failed (the metrics cover the others), 2 bad usage.\n");
}

// --labels: a folder holding the label file of at least one of the images (an image without one
// is background, but none at all means the folder is not these images' labels).
void check_labels_dir(const std::string& dir, const std::vector<Source>& items) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError("--labels " + dir + (fs::exists(dir, ec) ? ": is not a folder" : ": no such folder"));
  size_t images = 0, labelled = 0;
  std::string example;
  for (const Source& it : items) {
    if (!it.error.empty()) continue;
    ++images;
    const fs::path label = fs::path(dir) / (file_stem(it.name) + ".txt");
    if (fs::exists(label, ec)) ++labelled;
    if (example.empty()) example = label.string();
  }
  if (images == 0 || labelled > 0) return;
  size_t txt = 0;
  std::string txt_example;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".txt" && txt++ == 0) txt_example = e.path().filename().string();
  throw UsageError("--labels " + dir + ": none of the " + std::to_string(images) +
                   " images has a label file there (looked for <image name>.txt, e.g. " + example + "); the folder has " +
                   (txt ? std::to_string(txt) + " .txt files, e.g. " + txt_example : std::string("no .txt files")) +
                   ": are these the labels of these images?");
}

void print_metrics(const MapResult& m, const std::vector<std::string>& names, bool per_class) {
  std::printf("%-20s %8s %8s %8s %8s %8s %10s\n", "class", "images", "labels", "P", "R", "mAP50", "mAP50-95");
  std::printf("%-20s %8d %8d %8.4f %8.4f %8.4f %10.4f\n", "all", m.num_images, m.num_labels, m.precision, m.recall,
              m.map50, m.map50_95);
  if (per_class)
    for (const ClassAp& c : m.per_class) {
      const std::string name = class_name(names, c.class_id);
      std::printf("%-20s %8s %8d %8.4f %8.4f %8.4f %10.4f\n", name.c_str(), "", c.num_labels, c.precision, c.recall,
                  c.ap50, c.ap50_95);
    }
}

std::string eval_json(const EvalRun& run, const std::vector<std::string>& names) {
  const MapResult& m = run.metrics;
  std::string j = "{\"metrics\": {\"map50\": " + json_number(m.map50) + ", \"map50_95\": " + json_number(m.map50_95) +
                  ", \"precision\": " + json_number(m.precision) + ", \"recall\": " + json_number(m.recall) +
                  ", \"num_images\": " + std::to_string(m.num_images) + ", \"num_labels\": " +
                  std::to_string(m.num_labels) + ", \"per_class\": [";
  for (size_t k = 0; k < m.per_class.size(); ++k) {
    const ClassAp& c = m.per_class[k];
    j += std::string(k ? ",\n    " : "\n    ") + "{\"class_id\": " + std::to_string(c.class_id) +
         ", \"labels\": " + std::to_string(c.num_labels) + ", \"predictions\": " + std::to_string(c.num_predictions) +
         ", \"ap50\": " + json_number(c.ap50) + ", \"ap50_95\": " + json_number(c.ap50_95) +
         ", \"precision\": " + json_number(c.precision) + ", \"recall\": " + json_number(c.recall) + "}";
  }
  const std::vector<ImageResult>& results = run.images;
  return j + "]},\n \"images\": " + images_json(results, names, [&](size_t i) {
    return !results[i].error.empty() ? results[i].error : run.label_errors[i];
  }) + "}\n";
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  std::vector<std::string> valued = detector_valued_options();
  for (const char* o : {"images", "labels", "json"}) valued.push_back(o);
  std::vector<std::string> flags = detector_flag_options();
  for (const char* f : {"verbose", "single-label"}) flags.push_back(f);
  Args args(argc, argv, 2, flags, valued);
  if (args.flag("help")) {
    print_help();
    return 0;
  }
  const std::string model = args.require("model");
  std::vector<std::string> specs = args.all("images");
  for (const auto& p : args.positional()) specs.push_back(p);
  if (specs.empty()) throw UsageError("missing required option --images");
  const std::string labels_dir = args.require("labels");
  PostprocessOptions defaults = family_postprocess_options();
  defaults.multi_label = true;  // val.py's and ultralytics val's
  DetectorOptions opts = detector_options(args, defaults);
  opts.postprocess_defaults = PostprocessDefaults::kVal;
  if (args.flag("single-label")) opts.postprocess.multi_label = false;
  const int workers = decode_workers(args);
  const bool quiet = args.flag("quiet");
  const std::string json_path = args.get("json");

  // every path the command line names is checked before the model is loaded
  check_model_file(model);
  const std::vector<Source> items = expand_inputs(specs);
  check_labels_dir(labels_dir, items);
  if (!json_path.empty()) check_output_file("--json", json_path);

  auto detector = Detector::create(model, opts);
  const std::vector<std::string>& names = detector->class_names();
  PipelineOptions po;
  po.batch = opts.max_batch;
  po.decode_threads = workers;
  po.encoded = opts.decode == DecodeDevice::kGpu;
  Progress progress(items.size(), quiet);
  auto on_image = [&](size_t i, const ImageResult& r, const std::string& label_error) {
    if (!r.error.empty()) std::fprintf(stderr, "yolocu eval: %s: %s\n", r.path.c_str(), r.error.c_str());
    if (!label_error.empty()) std::fprintf(stderr, "yolocu eval: %s: labels: %s\n", r.path.c_str(), label_error.c_str());
    progress.update(i + 1);
  };
  const EvalRun run = evaluate_sources(*detector, items, labels_dir, po, on_image);
  print_metrics(run.metrics, names, args.flag("verbose"));
  if (!quiet) {
    const PipelineSummary& sum = run.summary;
    const double ok = static_cast<double>(std::max<size_t>(sum.images - sum.failed, 1));
    std::fprintf(stderr, "%zu images (%zu failed) on %s; per image: %.1f ms preprocess, %.1f ms inference, %.1f ms postprocess\n",
                 sum.images, run.failed, device_name(detector->device()), sum.times.preprocess / ok,
                 sum.times.inference / ok, sum.times.postprocess / ok);
    if (po.encoded) std::fprintf(stderr, "%s\n", describe_decode(*detector).c_str());
  }
  if (!json_path.empty()) write_text(json_path, eval_json(run, names));
  return run.failed ? 1 : 0;
}

}  // namespace yolocu::cli

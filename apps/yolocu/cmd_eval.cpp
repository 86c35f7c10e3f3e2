// yolocu eval: mAP of a model over a labelled image folder, as ultralytics/yolov5 v7.0 val.py
// scores it (see docs/semantics.md for the one difference: the letterbox is detect.py's).
#include <cstdio>
#include <filesystem>

#include "args.hpp"
#include "classes_option.hpp"
#include "commands.hpp"
#include "dataset_yaml.hpp"
#include "eval_outputs.hpp"
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
      "usage: yolocu eval --model M.onnx (--data data.yaml | --images DIR [--labels DIR]) [options]\n"
      "Runs the detector over the images (files, folders or glob patterns; --images may repeat) and\n"
      "scores it against YOLO labels ('class cx cy w h' normalised; an image without a label file is\n"
      "background): mAP50, mAP50-95, P, R as val.py computes them.\n\n"
      "  --data FILE        ultralytics' dataset file: the images of its 'val' (path + val), its 'names'\n"
      "  --images SPEC      images (repeatable; also as plain arguments)\n"
      "  --labels DIR       label files DIR/<image stem>.txt (default: images/ -> labels/ as ultralytics)\n"
      "  --conf C           confidence threshold (0.001, val.py)\n"
      "  --iou T            NMS IoU threshold (0.6; YOLOv8 / YOLO11: 0.7, as their val)\n"
      "  --max-det N        detections per image (300)\n"
      "  --single-label     best class per box only (val.py default is multi-label)\n"
      "  --precision int8 --calibration FILE\n"
      "                     INT8 with a calibration of yolocu calibrate (docs/int8.md): on the GPU the\n"
      "                     calibration's convolutions on INT8 kernels, on the CPU simulated INT8\n"
      "  --classes ... --agnostic --imgsz --device --batch --threads --workers --max-memory --max-pixels\n"
      "                     as in yolocu detect\n"
      "  --decode D         cpu (default: identical to OpenCV / val.py) or gpu (nvJPEG, as in yolocu detect)\n"
      "  --json OUT         per-image detections and the metrics as JSON ('-' = stdout; the table then\n"
      "                     goes to stderr)\n"
      "  --save-json FILE   the detections as COCO results (image_id, category_id, bbox, score), for\n"
      "                     pycocotools; an 80-class COCO model's ids mapped to COCO's 91 (coco80_to_coco91)\n"
      "  --plots DIR        the PR, F1, P and R curves and the confusion matrix: their data as JSON, and\n"
      "                     PNG files drawn by 'python3 -m yolocu.plots DIR' (matplotlib; $YOLOCU_PYTHON)\n"
      "  --verbose          per-class AP table\n"
      "  --progress         progress line with ETA even when stderr is not a terminal\n"
      "  --quiet            no progress line\n"
      "Exit status: 0 success, 1 some image, label file or the model failed (the metrics cover the others),\n"
      "2 bad usage.\n");
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

void print_metrics(FILE* out, const MapResult& m, const std::vector<std::string>& names, bool per_class) {
  std::fprintf(out, "%-20s %8s %8s %8s %8s %8s %10s\n", "class", "images", "labels", "P", "R", "mAP50", "mAP50-95");
  std::fprintf(out, "%-20s %8d %8d %8.4f %8.4f %8.4f %10.4f\n", "all", m.num_images, m.num_labels, m.precision, m.recall,
              m.map50, m.map50_95);
  if (per_class)
    for (const ClassAp& c : m.per_class) {
      const std::string name = class_name(names, c.class_id);
      std::fprintf(out, "%-20s %8s %8d %8.4f %8.4f %8.4f %10.4f\n", name.c_str(), "", c.num_labels, c.precision, c.recall,
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
         ", \"name\": " + json_string(class_name(names, c.class_id)) +
         ", \"labels\": " + std::to_string(c.num_labels) + ", \"predictions\": " + std::to_string(c.num_predictions) +
         ", \"ap50\": " + json_number(c.ap50) + ", \"ap50_95\": " + json_number(c.ap50_95) +
         ", \"precision\": " + json_number(c.precision) + ", \"recall\": " + json_number(c.recall) + "}";
  }
  const std::vector<ImageResult>& results = run.images;
  return j + "]},\n \"images\": " + images_json(results, names, [&](size_t i) {
    return !results[i].error.empty() ? results[i].error : run.label_errors[i];
  }) + "}\n";
}

// The images and label folder ("" = images/ -> labels/) and the class names of the outputs, from
// --data or --images / --labels; the names of --data replace the model's.
struct EvalInputs {
  std::vector<std::string> specs;
  std::string labels_dir;
  std::vector<std::string> names;
};

EvalInputs eval_inputs(const Args& args) {
  EvalInputs in;
  if (args.has("data")) {
    if (args.has("images") || !args.positional().empty())
      throw UsageError("--data names the images (its 'val'): give --data or --images, not both");
    const std::string file = args.get("data");
    check_input_file("--data", file, "a dataset file", ".yaml");
    const Dataset ds = read_dataset_yaml(file);
    for (const std::string& v : ds.val)
      for (const std::string& spec : dataset_image_specs(v)) in.specs.push_back(spec);
    in.names = ds.names;
  } else {
    in.specs = args.all("images");
    for (const auto& p : args.positional()) in.specs.push_back(p);
    if (in.specs.empty()) throw UsageError("missing required option --images (or --data)");
  }
  in.labels_dir = args.get("labels");
  return in;
}

// Without --labels: at least one image has its label file at images/ -> labels/.
void check_inferred_labels(const std::vector<Source>& items) {
  std::error_code ec;
  std::string example;
  for (const Source& it : items) {
    if (!it.error.empty()) continue;
    const std::string label = image_to_label_path(it.name);
    if (fs::exists(label, ec)) return;
    if (example.empty()) example = label;
  }
  if (!example.empty())
    throw UsageError("no label file for any of the images (looked where ultralytics does, images/ -> labels/, e.g. " +
                     example + "); give the folder with --labels DIR");
}

void check_names(const std::vector<std::string>& data_names, const Detector& detector, const std::string& file) {
  const size_t model = detector.class_names().size();
  if (!data_names.empty() && model && data_names.size() != model)
    throw UsageError("--data " + file + " names " + std::to_string(data_names.size()) + " classes, the model has " +
                     std::to_string(model));
}

void print_summary(const EvalRun& run, const Detector& detector, bool encoded) {
  const PipelineSummary& sum = run.summary;
  const double ok = static_cast<double>(std::max<size_t>(sum.images - sum.failed, 1));
  std::fprintf(stderr, "%zu images (%zu failed) on %s; per image: %.1f ms preprocess, %.1f ms inference, %.1f ms postprocess\n",
               sum.images, run.failed, device_name(detector.device()), sum.times.preprocess / ok,
               sum.times.inference / ok, sum.times.postprocess / ok);
  if (encoded) std::fprintf(stderr, "%s\n", describe_decode(detector).c_str());
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  std::vector<std::string> valued = detector_valued_options();
  for (const char* o : {"images", "labels", "json", "data", "save-json", "plots"}) valued.push_back(o);
  std::vector<std::string> flags = detector_flag_options();
  for (const char* f : {"verbose", "single-label", "progress"}) flags.push_back(f);
  Args args(argc, argv, 2, flags, valued);
  if (args.flag("help")) {
    print_help();
    return 0;
  }
  const std::string model = args.require("model");
  const EvalInputs in = eval_inputs(args);
  PostprocessOptions defaults = family_postprocess_options();
  defaults.multi_label = true;  // val.py's and ultralytics val's
  DetectorOptions opts = detector_options(args, defaults);
  opts.postprocess_defaults = PostprocessDefaults::kVal;
  if (args.flag("single-label")) opts.postprocess.multi_label = false;
  const int workers = decode_workers(args);
  const bool quiet = args.flag("quiet");
  const std::string json_path = args.get("json"), coco_path = args.get("save-json"), plots_dir = args.get("plots");
  if (json_path == "-" && coco_path == "-") throw UsageError("--json - and --save-json - cannot both be stdout");

  // every path the command line names is checked before the model is loaded
  check_model_file(model);
  const std::vector<Source> items = expand_inputs(in.specs);
  if (in.labels_dir.empty()) check_inferred_labels(items);
  else check_labels_dir(in.labels_dir, items);
  if (!json_path.empty()) check_output_file("--json", json_path);
  if (!coco_path.empty()) check_output_file("--save-json", coco_path);
  if (!plots_dir.empty()) prepare_output_dir("--plots", plots_dir);

  auto detector = create_detector(args, model, opts);
  check_names(in.names, *detector, args.get("data"));
  const std::vector<std::string>& names = in.names.empty() ? detector->class_names() : in.names;
  PipelineOptions po;
  po.batch = opts.max_batch;
  po.decode_threads = workers;
  po.encoded = opts.decode == DecodeDevice::kGpu;
  Progress progress(items.size(), quiet, args.flag("progress"));
  auto on_image = [&](size_t i, const ImageResult& r, const std::string& label_error) {
    if (!r.error.empty()) std::fprintf(stderr, "yolocu eval: %s: %s\n", r.path.c_str(), r.error.c_str());
    if (!label_error.empty()) std::fprintf(stderr, "yolocu eval: %s: labels: %s\n", r.path.c_str(), label_error.c_str());
    progress.update(i + 1);
  };
  const EvalRun run = evaluate_sources(*detector, items, in.labels_dir, po, on_image);
  // stdout carries the JSON when it is asked for there, the table otherwise
  const bool stdout_json = json_path == "-" || coco_path == "-";
  print_metrics(stdout_json ? stderr : stdout, run.metrics, names, args.flag("verbose"));
  if (!quiet) print_summary(run, *detector, po.encoded);
  if (!json_path.empty()) write_text(json_path, eval_json(run, names));
  if (!coco_path.empty()) write_text(coco_path, coco_predictions_json(run, names));
  if (!plots_dir.empty()) {
    write_plot_data(plots_dir, run, names);
    draw_plots(plots_dir);
  }
  return run.failed ? 1 : 0;
}

}  // namespace yolocu::cli

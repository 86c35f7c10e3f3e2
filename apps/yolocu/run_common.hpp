// Shared machinery of `yolocu detect` and `yolocu eval`: input expansion, decoding on worker
// threads overlapped with inference, the batched detection loop, progress and JSON helpers.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "args.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/image.hpp"

namespace yolocu::cli {

// One input file; `error` is set when the spec could not be resolved (e.g. a glob without match).
struct InputItem {
  std::string path;
  std::string error;
};

// Files as given, folders (their .jpg/.jpeg/.png files, sorted, not recursive) and glob(3)
// patterns (sorted matches). A path that does not exist is kept: it fails when decoded. A folder
// without images is a UsageError (it names the folder, and its subfolders if it has any).
std::vector<InputItem> expand_inputs(const std::vector<std::string>& specs);

// Checks of the paths a command line names, made before any work; each throws a UsageError that
// names the option, the path and the problem.
// An input file (`kind`: "an ONNX file", "an image"): exists, is a file (not a folder), can be
// read. For a folder, the files in it whose names end with `ext` are named as a hint.
void check_input_file(const std::string& option, const std::string& path, const std::string& kind,
                      const std::string& ext);
// --model M: check_input_file("--model", M, "an ONNX file", ".onnx").
void check_model_file(const std::string& path);
// An output folder: exists as a folder or is created now (with its parents).
void prepare_output_dir(const std::string& option, const std::string& dir);
// An output file ("-" = stdout): not a folder; its folder is created now; it can be opened for writing.
void check_output_file(const std::string& option, const std::string& path);

// The file name without folder and extension.
std::string file_stem(const std::string& path);

// The result of one image.
struct ImageResult {
  std::string path;
  int width = 0, height = 0;
  std::string error;  // empty on success
  Detections detections;
};

// Called once per image, in input order, after detection (or after its failure). `image` is the
// decoded image (empty on failure); `trace`/`slot`: the batch's trace and this image's place in it
// (null unless tracing was asked for).
using ImageCallback =
    std::function<void(size_t index, const ImageResult& result, const Image& image, const DetectionTrace* trace, size_t slot)>;

struct RunOptions {
  int batch = 1;           // images per detect() call
  int decode_threads = 2;  // JPEG/PNG decoding threads
  bool trace = false;      // fill DetectionTrace for the callback
  bool encoded = false;    // read the files and call detect_encoded() (the detector decodes, e.g. nvJPEG
                           // with DecodeDevice::kGpu); the callback's image is then empty
  bool quiet = false;      // no progress line
};

struct RunSummary {
  size_t images = 0, failed = 0, detections = 0;
  StageTimes times;  // summed over the detect() calls (their batches, host and, with stage profiling, GPU times)
  double wall_ms = 0;
};

// Decodes the items (worker threads, bounded look-ahead) and runs the detector over them in
// batches; the callback sees them in input order. With several execution contexts
// (options().contexts N >= 2), N calls run at once on worker threads, so that they overlap. A failed decode or a failed detect() is recorded in that image's result (a
// failing batch is retried image by image so that the error lands on the right file).
std::vector<ImageResult> run_detector(Detector& detector, const std::vector<InputItem>& items, const RunOptions& options,
                                      const ImageCallback& callback, RunSummary* summary);

// DetectorOptions from the common options (--conf --iou --max-det --classes --agnostic
// --multi-label --imgsz --device --batch --threads --decode), over the given post-processing defaults.
DetectorOptions detector_options(const Args& args, const PostprocessOptions& defaults);

// The output layout of the model file's family (model_info), for the family's default options;
// kYolov5 when the file cannot be read (the detector then reports the problem).
OutputLayout model_layout(const std::string& onnx_path);

// The valued/flag option names detector_options() reads.
std::vector<std::string> detector_valued_options();
std::vector<std::string> detector_flag_options();

// --workers: image decoding threads, 1..64 (default 2); UsageError otherwise.
int decode_workers(const Args& args);

// "decode: cpu", or "decode: gpu (nvjpeg hardware): N images on the GPU, M on the CPU (...)".
std::string describe_decode(const Detector& detector);

// "kIo: message" for any exception.
std::string describe_error(const std::exception& e);

// One line on how the detector was built: wall time, and on the GPU the tactics' origin (tuned
// now = cold, or from the tactic cache file = warm), e.g. "built in 1523 ms; tactics: 120 (120
// from the cache file (96 plans restored), 0 tuned) in 1320 ms, warm; cache ~/.cache/...", and on the
// GPU a second line, indented, "tune breakdown: ..." (CudaEngineStats::tune_breakdown).
std::string describe_build(const Detector& detector);
// The same as JSON fields (no braces): "build_ms": ..., "tune_ms": ..., ...
std::string build_json_fields(const Detector& detector);

// JSON pieces.
std::string json_string(const std::string& s);
std::string json_number(double v);  // %.9g; non-finite -> null
// One detection as a one-line JSON object: {"box": [x1, y1, x2, y2], "confidence", "class_id", "class_name"}.
std::string detection_json(const Detection& d, const std::vector<std::string>& names);
std::string detections_json(const Detections& dets, const std::vector<std::string>& names, const std::string& indent);
// The "images" array of detect's and eval's --json: one {"path", "width", "height", "error" (only
// when error_of(i) is not empty), "detections"} object per result.
std::string images_json(const std::vector<ImageResult>& results, const std::vector<std::string>& names,
                        const std::function<std::string(size_t)>& error_of);
// Writes `text` to `path`, or to stdout when path is "-"; kIo on failure.
void write_text(const std::string& path, const std::string& text);

}  // namespace yolocu::cli

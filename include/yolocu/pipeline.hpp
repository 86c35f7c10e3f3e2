// yolocu/pipeline.hpp - sources in, detections out: the loop every entry point runs (yolocu
// detect, eval and bench, the Python package, the server).
//
//   auto det = yolocu::Detector::create("yolov5n.onnx", options);
//   std::vector<yolocu::Source> sources = yolocu::expand_sources({"coco/images", "more/*.jpg"});
//   std::vector<yolocu::ImageResult> results = yolocu::run_pipeline(*det, sources, {});
//
// Sources are image files, encoded images in memory (JPEG / PNG bytes) and decoded images (host
// views). Worker threads decode them ahead of the detector, at most a bounded number of images in
// front of it (that bounds the memory the decoded images hold); the detector runs them in calls of
// PipelineOptions::batch images; with several execution contexts (DetectorOptions::contexts N >=
// 2) N calls run at once on worker threads, so that one call's decode, upload and host work overlap
// the others' compute. Results and callbacks come in input order, the same as a serial run's.
//
// Errors: a source that fails (a file that cannot be read, a corrupt image, a failed detect()) is
// recorded in its ImageResult and the run goes on; a failing call is retried image by image, so
// that the error lands on the right image. Only invalid arguments throw (kInvalidArgument).
//
// Threads: run_pipeline() and evaluate_sources() block the calling thread until the run ends; the
// callbacks run on it. The Detector may serve other callers meanwhile (its own thread contract).
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/eval.hpp"
#include "yolocu/image.hpp"

namespace yolocu {

// One image of a run. Caller-owned memory (kEncoded's bytes, kDecoded's pixels) must stay valid
// until the run returns; the pipeline only reads it.
struct Source {
  enum class Kind {
    kFile,     // an image file (JPEG, PNG): `name` is its path
    kEncoded,  // JPEG / PNG bytes in memory: `data`, `size`
    kDecoded,  // decoded 8-bit BGR pixels in host memory: `image`
  };
  Kind kind = Kind::kFile;
  std::string name;            // the path (kFile), else the name results and error messages carry
  const void* data = nullptr;  // kEncoded
  size_t size = 0;             // kEncoded
  ImageView image;             // kDecoded
  std::string error;           // not empty: the source failed before the run (a glob without a match);
                               // its result carries this error and nothing is read

  static Source file(std::string path);
  static Source encoded(const void* data, size_t size, std::string name);
  static Source decoded(const ImageView& image, std::string name);
};

// The image files that `specs` name, as `yolocu detect PATH...` reads them: files as given (a path
// that does not exist is kept: it fails when read), folders (their image files, kImageSuffixes,
// sorted, not recursive) and glob(3) patterns (their matches, sorted; a pattern without a match is
// a Source with `error` set). A folder without images throws kInvalidArgument naming the folder,
// and its subfolders when it has any.
// The suffixes a folder's images have (case-insensitive): the formats decode_image() reads.
constexpr const char* kImageSuffixes = ".jpg, .jpeg, .png, .webp, .tif, .tiff, .bmp";
// `skipped` (optional) receives the folders' other files (sorted per folder), for a front end to
// say what it left out.
std::vector<Source> expand_sources(const std::vector<std::string>& specs, std::vector<std::string>* skipped = nullptr);

// The result of one source.
struct ImageResult {
  std::string path;             // Source::name
  int width = 0, height = 0;    // the decoded image's size (0 when it failed before decoding)
  std::string error;            // empty on success, else describe_error() of the failure
  std::exception_ptr exception; // the failure itself (null on success; null for Source::error)
  Detections detections;        // in the image's pixels
};

// "kIo: message" for a yolocu::Error, what() for any other exception.
std::string describe_error(const std::exception& e);

// Called once per source, in input order, after its detection (or its failure), on the thread that
// called run_pipeline(). `image`: the decoded pixels, valid during the call (empty on failure and
// in encoded mode); `trace` / `slot`: the call's stage tensors and this image's place in them
// (null unless PipelineOptions::trace).
using ImageCallback = std::function<void(size_t index, const ImageResult& result, const ImageView& image,
                                         const DetectionTrace* trace, size_t slot)>;

struct PipelineOptions {
  int batch = 1;           // images per detect() call (the detector splits a call into max_batch batches)
  int decode_threads = 2;  // threads decoding (encoded mode: reading) the sources
  bool trace = false;      // fill a DetectionTrace for the callback
  bool encoded = false;    // hand the sources' bytes to Detector::detect_encoded (the detector decodes,
                           // e.g. nvJPEG with DecodeDevice::kGpu): the threads only read the files and
                           // the callback's image is empty. Every source must be kFile or kEncoded.
  const PostprocessOptions* postprocess = nullptr;  // the run's post-processing options (Detector::detect's
                                                   // per-call ones); null: the detector's own
};

struct PipelineSummary {
  size_t images = 0, failed = 0, detections = 0;
  StageTimes times;  // summed over the run's detect() calls (batches, host and, with stage profiling, GPU times)
  double wall_ms = 0;
};

// Runs the detector over the sources (see the top of this file). Returns one result per source, in
// input order. Throws kInvalidArgument for a kDecoded source in encoded mode.
std::vector<ImageResult> run_pipeline(Detector& detector, const std::vector<Source>& sources,
                                      const PipelineOptions& options, const ImageCallback& callback = nullptr,
                                      PipelineSummary* summary = nullptr);

// How many sources a run_pipeline() over `detector` with `options` keeps in its calls at once (its
// concurrent detect() / detect_encoded() calls times their images). A warm-up of at least twice as
// many sources runs every call slot, execution context and nvJPEG decoder the timed run will use.
size_t pipeline_images_in_flight(const Detector& detector, const PipelineOptions& options);

// The detections scored against YOLO labels as the model family's val scores them (val_rules).
struct EvalRun {
  MapResult metrics;
  std::vector<ImageResult> images;        // one per source, in input order
  std::vector<std::string> label_errors;  // per source: its label file's error (describe_error), or ""
  PipelineSummary summary;                // summary.failed counts failed images only
  size_t failed = 0;                      // images that failed, or whose label file did
  // ConfusionMatrix (yolocu/eval.hpp, conf 0.25, IoU 0.45) of the scored images: [predicted][true],
  // the model's classes then background; empty when the model names no classes.
  std::vector<std::vector<int64_t>> confusion;
};

// Called per source in input order, after its labels were read; `label_error` is "" unless the
// label file failed.
using EvalCallback = std::function<void(size_t index, const ImageResult& result, const std::string& label_error)>;

// run_pipeline() over the sources, each image's detections scored against the labels in
// `labels_dir`/<file stem of Source::name>.txt ('class cx cy w h', normalised; a missing file is a
// background image), or with an empty `labels_dir` in image_to_label_path(Source::name)
// (ultralytics' images/ -> labels/). A label class id the model does not have is an error of that
// label file. A failed image or label file is left out of the metrics and counted in `failed`.
EvalRun evaluate_sources(Detector& detector, const std::vector<Source>& sources, const std::string& labels_dir,
                         const PipelineOptions& options, const EvalCallback& callback = nullptr);

}  // namespace yolocu

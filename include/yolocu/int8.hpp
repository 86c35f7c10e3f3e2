// yolocu/int8.hpp - INT8 calibration: activation and weight scales for symmetric int8 inference.
//
//   Int8CalibrateOptions o;                        // method: percentile (default), entropy, minmax
//   Int8Calibration c = calibrate_int8("yolov5n.onnx", image_paths, o);
//   save_int8_calibration(c, "yolov5n.int8.json");
//   Int8Calibration back = load_int8_calibration("yolov5n.int8.json", onnx_file_sha256("yolov5n.onnx"));
//
// calibrate_int8() runs the CPU engine (FP32) over the images, letterboxed and normalised exactly
// as the detector does, and collects per-tensor statistics of every convolution's input and
// output (the output after its fused SiLU and residual Add: the tensor an INT8 kernel would write).
// From them: one activation scale per tensor (scale = amax / 127, int8 in [-127, 127] used
// symmetrically; see docs/int8.md for each method's amax) and one weight scale per output channel
// of each convolution (max |w| over the channel / 127). Optionally a sensitivity pass keeps the
// convolutions whose quantisation hurts the output most in float (Int8ConvScales::keep_float).
//
// The file (JSON, written atomically) records the format version, the method and its parameter,
// the SHA-256 of the ONNX file's bytes, the image count and a SHA-256 over the images' names and
// bytes, and the scales. load_int8_calibration() refuses (kInvalidArgument) a file of another
// version, one made for another model (naming both hashes), and malformed files (kParse).
// CpuEngineOptions::int8 / DetectorOptions::int8_calibration run a model with it ("simulated
// INT8": convolution inputs and weights quantised and dequantised, the arithmetic in float).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace yolocu {

struct Model;

enum class CalibrationMethod {
  kEntropy,     // TensorRT's KL-divergence threshold over a 2048-bin histogram of |x| (docs/int8.md)
  kPercentile,  // the `percentile` (99.99 by default) of |x|, from the same histogram
  kMinMax,      // max |x| seen
};
const char* calibration_method_name(CalibrationMethod m) noexcept;  // "entropy", "percentile", "minmax"
// kInvalidArgument naming the accepted names.
CalibrationMethod parse_calibration_method(const std::string& name);

// One activation tensor (an ONNX tensor name of the model).
struct Int8TensorScale {
  std::string name;
  float amax = 0;   // the calibrated threshold: values beyond +-amax saturate
  float scale = 0;  // amax / 127 (1 when amax is 0); quantise as rne(x / scale) clamped to [-128, 127]
};

// One convolution: its tensors, per-output-channel weight scales and whether it stays in float.
struct Int8ConvScales {
  std::string node;    // the Conv node's name
  std::string weight;  // its weight initializer
  std::string input;   // its input tensor (an Int8TensorScale)
  std::string output;  // what its step writes: the Conv's output, or the SiLU's / residual Add's
  std::vector<float> weight_scales;  // per output channel: max |w| / 127 (1 for an all-zero channel)
  bool keep_float = false;           // the sensitivity pass (or --keep-float) keeps it in float
  double sensitivity = -1;           // relative L2 error of the raw outputs with only this layer
                                     // quantised (-1: not measured)
};

struct Int8Calibration {
  static constexpr int kVersion = 1;
  int version = kVersion;
  CalibrationMethod method = CalibrationMethod::kPercentile;
  double percentile = 99.99;  // kPercentile's parameter (recorded for every method)
  int num_bins = 2048;        // histogram bins (entropy, percentile)
  std::string model_sha256;   // of the ONNX file's bytes
  int input_width = 0, input_height = 0;
  int64_t num_images = 0;
  std::string images_sha256;  // over each image's file name, size and bytes, in calibration order
  std::vector<Int8TensorScale> tensors;
  std::vector<Int8ConvScales> convs;
  // The sensitivity pass: how many of the worst layers it kept in float (0 when it did not run).
  int sensitivity_keep = 0;
  // Made by import_qdq_int8 from an already quantised export's Q / DQ nodes (no images; method,
  // percentile and bins unused); not a format field (such a calibration lives with its model).
  bool from_qdq = false;

  const Int8TensorScale* tensor(const std::string& name) const;
  const Int8ConvScales* conv(const std::string& node) const;
  int float_convs() const;  // convolutions with keep_float
};

// The defaults (percentile 99.99, the first convolution and the Detect head in float, the 12 most
// sensitive other convolutions in float, measured on 8 images) are those whose mAP50-95 drop on
// coco128 docs/int8.md reports.
struct Int8CalibrateOptions {
  CalibrationMethod method = CalibrationMethod::kPercentile;
  double percentile = 99.99;
  int input_width = 0, input_height = 0;  // 0: the model's static size, else 640
  int max_images = 0;                     // 0: all
  int num_threads = 0;                    // CPU engine threads (0: all cores)
  // Sensitivity pass: with keep_worst > 0, every convolution is quantised alone (simulated INT8,
  // the others in float) over the first `sensitivity_images` images, the relative L2 error of the
  // model's outputs measured, and the keep_worst worst kept in float. The first convolution and
  // the Detect head's convolutions are kept in float with keep_detect_and_stem.
  int keep_worst = 12;
  int sensitivity_images = 8;
  bool keep_detect_and_stem = true;
  // The activation scales of an earlier calibration of the same model, images, method and input
  // size (kInvalidArgument otherwise) instead of the two passes: to choose the layers kept in float
  // again without collecting the statistics again. Its keep_float choices are not taken over.
  const Int8Calibration* scales_from = nullptr;
  // Progress: (phase, done, total) after each image of each pass.
  std::function<void(const char* phase, int64_t done, int64_t total)> progress;
};

// Calibrates the model at `onnx_path` on the images (decode_image_file; decoded in this order).
// kInvalidArgument for no images or bad options; an image that cannot be decoded throws its
// decode error naming the file.
Int8Calibration calibrate_int8(const std::string& onnx_path, const std::vector<std::string>& images,
                               const Int8CalibrateOptions& options = {});

// The lowercase hex SHA-256 of a file's bytes (kIo naming the file when it cannot be read).
std::string file_sha256(const std::string& path);
inline std::string onnx_file_sha256(const std::string& path) { return file_sha256(path); }

// JSON text of a calibration, and the file written atomically (AtomicFile).
std::string int8_calibration_json(const Int8Calibration& c);
void save_int8_calibration(const Int8Calibration& c, const std::string& path);
// Reads and validates a calibration file: kParse (malformed, naming the field), kInvalidArgument
// for an unknown format version or, when `model_sha256` is not empty, a file made for another
// model (naming both hashes).
Int8Calibration parse_int8_calibration(const std::string& json_text, const std::string& what,
                                       const std::string& model_sha256 = "");
Int8Calibration load_int8_calibration(const std::string& path, const std::string& model_sha256 = "");
// kInvalidArgument unless every convolution of `model` with constant weights has its scales and
// its input tensor's scale in `c` (one kept in float needs no input scale), and each weight-scale
// count matches its output channels (names the first missing one).
void check_int8_calibration(const Int8Calibration& c, const Model& model);

// What the GPU engine runs in INT8 with this calibration (its step planning alone: no GPU needed;
// `yolocu inspect --calibration` prints it): the convolutions on the INT8 kernels, the others with
// the reason they stay in float (the calibration's choice, the kernels' limits, the GPU plan), the
// int8 copies quantised from fp16 values and the Concats that run on int8 values. The network input
// at height x width (0: the model's static size, else 640). Throws what check_int8_calibration and
// the GPU planning throw (kUnsupported for a model the GPU engine does not run).
struct Int8EnginePlan {
  std::vector<std::string> int8_convs;                           // node names, in order
  std::vector<std::pair<std::string, std::string>> float_convs;  // (node, why), in order
  int quantize_steps = 0;
  int int8_concats = 0;
};
Int8EnginePlan plan_int8_engine(const Model& model, const Int8Calibration& c, int height = 0, int width = 0);

// An already quantised export (QDQ: a QAT flow's, or ONNX Runtime's quantize_static with symmetric
// int8 activations) as the float model the GPU engine runs and the calibration its Q / DQ nodes
// carry: their scales win (docs/int8.md). The weights' and biases' DequantizeLinear fold into float
// initializers (the weights' scales kept per output channel); each activation's QuantizeLinear ->
// DequantizeLinear pair goes (its scale kept). A convolution whose input had such a pair and whose
// weights had scales is INT8 at those scales; every other convolution stays in float. Pairs in front
// of anything but a convolution are dropped (those tensors stay float; `dropped_pairs` counts them).
// kUnsupported naming the node for what yolocu's INT8 does not take: a zero point other than 0,
// uint8 activations, per-channel activation scales, a Q / DQ node of another shape of graph.
struct QdqImport {
  std::shared_ptr<const Model> model;
  Int8Calibration calibration;
  int dropped_pairs = 0;
};
bool has_qdq_nodes(const Model& model);
// The network input at width x height (0: the model's static size, else 640), as the engine plans it.
QdqImport import_qdq_int8(const Model& model, int width = 0, int height = 0);

}  // namespace yolocu

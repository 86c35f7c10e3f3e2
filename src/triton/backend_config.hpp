// The yolocu Triton backend's settings, read from the model's configuration (config.pbtxt, which
// Triton hands the backend as JSON): max_batch_size and the `parameters` the backend documents in
// docs/serving.md. Host-only and independent of Triton, so that it is tested without a server.
#pragma once

#include <cstdint>
#include <string>

#include "yolocu/detector.hpp"

namespace yolocu::triton {

struct BackendConfig {
  int max_batch_size = 8;          // Triton's max_batch_size: the most images of one execution
  std::string model_file = "model.onnx";  // in the version folder: <repo>/<model>/<version>/<file>
  Precision precision = Precision::kFloat16;  // kInt8: simulated INT8, KIND_CPU instances only
  std::string calibration_file;    // precision int8: the calibration in the version folder
  PostprocessOptions postprocess;  // conf, iou, max_det, classes, agnostic; iou kFamilyDefault: the family's
  std::string tactic_cache;        // "" the engine's default file, "none" no file
  std::string decode = "auto";     // "gpu" (nvJPEG), "cpu", "auto": gpu where a GPU instance has nvJPEG
  std::string engine_graphs = "on";  // "on": the engine replayed as CUDA graphs, "off": eager launches
  int engine_graph_segments = 1;   // with graphs: the forward as this many graphs (1..64)
  DecodeLimits decode_limits;      // max_pixels, max_width, max_height per image
  uint64_t max_request_bytes = uint64_t{64} << 20;  // encoded bytes of one request's IMAGE tensor
  int contexts = 1;                // execution contexts per GPU instance
  int input_height = 0, input_width = 0;  // network input; 0: the model's static size, else 640
  int cpu_threads = 0;             // KIND_CPU instances: CPU engine threads (0: all cores)
  int slow_execution_ms = 0;       // an execution at least this long is logged with its phases (0: off)
  bool blocking_sync = false;      // DetectorOptions::blocking_sync (GPU instances)
  bool fast_start = false;         // DetectorOptions::fast_start (GPU instances)
  bool response_thread = true;     // answers sent by a thread of the instance's own (ResponseQueue)
};

// Parses Triton's model configuration JSON. Throws yolocu::Error(kInvalidArgument) naming the
// parameter and the value at fault (an unknown parameter name too, so that a typo is not ignored).
BackendConfig parse_backend_config(const std::string& model_config_json);

// The options of one instance's Detector: `gpu` for a KIND_GPU instance on device `device_id`,
// `nvjpeg` whether this build has GPU JPEG decode.
DetectorOptions detector_options(const BackendConfig& config, bool gpu, int device_id, bool nvjpeg);

}  // namespace yolocu::triton

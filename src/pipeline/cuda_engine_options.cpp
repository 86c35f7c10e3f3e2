#include "pipeline/cuda_engine_options.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace yolocu::detail {

CudaEngineOptions cuda_engine_options(const DetectorOptions& options) {
  CudaEngineOptions eo;
  eo.device = options.cuda_device;
  eo.precision = options.precision;
  if (options.precision == Precision::kInt8) eo.int8_calibration = options.int8_calibration;
  eo.max_batch = options.max_batch;
  eo.width = options.input_width;
  eo.height = options.input_height;
  eo.tune_batches = options.tune_batches;
  eo.pad_batches = options.pad_batches;
  if (options.fast_start) {
    eo.pad_batches = true;
    if (eo.tune_batches.empty()) eo.tune_batches = {options.max_batch};
    eo.max_graph_plans = std::min(eo.max_graph_plans, 4);
    eo.derive_without_compiling = true;
  }
  eo.tactic_cache = options.tactic_cache;
  eo.max_device_memory = options.max_device_memory;
  eo.cuda_graphs = options.engine_graphs;
  eo.graph_segments = options.engine_graph_segments;
  // YOLOCU_GRAPH_BRANCHES=0 (a measurement switch, as YOLOCU_UPLOAD_CHUNKS): the engine's graphs
  // as one chain of steps (CudaEngineOptions::graph_branches).
  if (const char* v = std::getenv("YOLOCU_GRAPH_BRANCHES"); v && std::string(v) == "0") eo.graph_branches = false;
  // YOLOCU_INT8_RESIDUALS=int8 (a measurement switch too): INT8 residuals added from the value's int8
  // copy (CudaEngineOptions::int8_residuals).
  if (const char* v = std::getenv("YOLOCU_INT8_RESIDUALS"); v && std::string(v) == "int8") eo.int8_residuals = true;
  return eo;
}

}  // namespace yolocu::detail

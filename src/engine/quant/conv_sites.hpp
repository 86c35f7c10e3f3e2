// The convolution sites INT8 calibration works on (calibrate.cpp, qdq_import.cpp): every Conv step
// of the CPU plan, with the tensors its step reads and writes and its weights' per-channel scales.
#pragma once

#include <vector>

#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"

namespace yolocu::engine::quant {

struct ConvSite {
  Int8ConvScales scales;
  bool stem = false;  // reads the graph input
  bool head = false;  // a graph output is reachable from its output without another Conv
};

// The convolution steps of the CPU plan at width x height (the Detect tail unfused, so that head
// convolutions write their raw output), with their tensors and weight scales (max |w| / 127 per
// output channel). kUnsupported for a model without convolutions or with non-float32 weights.
std::vector<ConvSite> conv_sites(const Model& model, int width, int height);

}  // namespace yolocu::engine::quant

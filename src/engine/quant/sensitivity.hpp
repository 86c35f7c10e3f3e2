// The mixed-precision pass of the INT8 calibration: which convolutions stay in float. Each
// candidate convolution is simulated in INT8 alone (every other one in float) over the given
// inputs, and its sensitivity is the relative L2 error of all model outputs together against
// FP32; the `keep_worst` most sensitive are kept in float (Int8ConvScales::keep_float, ties broken
// by the order of the convolutions). Deterministic for the same inputs.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu::engine::quant {

// Measures every convolution whose keep_float is not set already (those are left as they are) and
// marks the keep_worst worst. `progress(done, total)` after each convolution.
void sensitivity_pass(const std::shared_ptr<const Model>& model, const std::vector<Tensor>& inputs, int keep_worst,
                      int num_threads, Int8Calibration& c, const std::function<void(int64_t, int64_t)>& progress);

}  // namespace yolocu::engine::quant

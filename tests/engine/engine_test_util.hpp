// Helpers for the engine tests: ONNX Runtime as the peer, tolerance checks.
#pragma once

#include <string>
#include <vector>

#include "test_util.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu::test {

// Runs ONNX Runtime (CPU, tests/python/ort_run.py) on `inputs`; empty vector if no .venv python
// (the caller skips). Fails the test if the script fails.
std::vector<Tensor> run_ort(const std::string& model, const std::vector<Tensor>& inputs, const std::string& tag);

// A float32 tensor of shape `s` with values uniform in [0, 1) from a fixed generator (image-like
// model input that does not depend on the standard library's distributions).
Tensor uniform_input(const Shape& s, uint32_t seed);

// YOLOv5 merged-output tolerance: every element within atol + rtol * |ref|. The w/h columns of the
// merged output are (2*sigmoid)^2 * anchor, which scales float rounding differences of the
// convolutions by up to 4 * 373 px, hence the relative term.
::testing::AssertionResult close_to(const Tensor& got, const Tensor& ref, double atol, double rtol, double max_rel_l2);

}  // namespace yolocu::test

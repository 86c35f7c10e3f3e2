// What a GPU detector's options ask of its engines (host-only; unit-tested without a GPU).
#pragma once

#include "yolocu/cuda_engine.hpp"
#include "yolocu/detector.hpp"

namespace yolocu::detail {

// The engine options of every execution context of a CudaDetector built with `options`:
// device, precision, sizes, tuned / padded batch sizes, tactic cache, memory, graphs; fast_start as
// DetectorOptions documents it (pad_batches, only max_batch tuned unless tune_batches says
// otherwise, at most 4 cuDNN graph plans a layer, derive_without_compiling).
CudaEngineOptions cuda_engine_options(const DetectorOptions& options);

}  // namespace yolocu::detail

// Internal: CUDA error checking for the training kernels (throws yolocu::Error(kCuda)).
#pragma once

#include <cuda_runtime.h>

#include "core/check.hpp"

#define YOLOCU_TRAIN_CUDA_CHECK(stmt)                                                            \
  do {                                                                                           \
    const cudaError_t yolocu_err_ = (stmt);                                                      \
    if (yolocu_err_ != cudaSuccess)                                                              \
      ::yolocu::detail::fail(::yolocu::ErrorCode::kCuda, __FILE__, ":", __LINE__, ": ", #stmt,   \
                             " failed: ", cudaGetErrorString(yolocu_err_));                      \
  } while (0)

// Checks the launch that was just enqueued (configuration errors, not asynchronous faults).
#define YOLOCU_TRAIN_CHECK_LAUNCH() YOLOCU_TRAIN_CUDA_CHECK(cudaGetLastError())

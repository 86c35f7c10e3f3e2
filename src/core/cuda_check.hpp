// The one check macro family for CUDA runtime and cuDNN calls: a failing call throws
// yolocu::Error(kCuda, "file:line: statement: message"). The cuDNN macro needs <cudnn.h> at the
// point of use only.
#pragma once

#include <cuda_runtime_api.h>

#include "core/check.hpp"

#ifndef YOLOCU_CUDA_CHECK
#define YOLOCU_CUDA_CHECK(stmt)                                                                 \
  do {                                                                                          \
    const cudaError_t e_ = (stmt);                                                              \
    if (e_ != cudaSuccess)                                                                      \
      ::yolocu::detail::fail(::yolocu::ErrorCode::kCuda, __FILE__, ":", __LINE__, ": ", #stmt, \
                             ": ", cudaGetErrorName(e_), " (", cudaGetErrorString(e_), ")");   \
  } while (0)
#endif

#define YOLOCU_CUDNN_CHECK(stmt)                                                                \
  do {                                                                                          \
    const cudnnStatus_t s_ = (stmt);                                                            \
    if (s_ != CUDNN_STATUS_SUCCESS)                                                             \
      ::yolocu::detail::fail(::yolocu::ErrorCode::kCuda, __FILE__, ":", __LINE__, ": ", #stmt, \
                             ": ", cudnnGetErrorString(s_));                                   \
  } while (0)

// After a kernel launch: reports launch-configuration errors (asynchronous faults surface at the
// next synchronising call).
#define YOLOCU_CUDA_CHECK_LAUNCH() YOLOCU_CUDA_CHECK(cudaGetLastError())

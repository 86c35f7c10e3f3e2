// Internal: CUDA error checking for the training kernels: the project's one check macro family
// (core/cuda_check.hpp) under the names the training sources use.
#pragma once

#include <cuda_runtime.h>

#include "core/cuda_check.hpp"

#define YOLOCU_TRAIN_CUDA_CHECK(stmt) YOLOCU_CUDA_CHECK(stmt)
#define YOLOCU_TRAIN_CHECK_LAUNCH() YOLOCU_CUDA_CHECK_LAUNCH()

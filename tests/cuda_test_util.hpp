// Helpers of the CUDA-source tests (tests/**/*.cu): a device buffer freed on scope exit.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>

namespace yolocu::test {

// n bytes of device memory (at least 1), freed on scope exit; a failed allocation fails the test.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&p, n > 0 ? n : 1), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace yolocu::test

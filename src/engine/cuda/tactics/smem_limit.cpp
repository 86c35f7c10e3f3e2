// Own kernels' dynamic shared-memory limits (smem_limit.hpp).
#include "engine/cuda/tactics/smem_limit.hpp"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <utility>

#include "core/cuda_check.hpp"

namespace yolocu::engine {

void raise_smem_limit(const void* kernel, size_t bytes) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, size_t> raised;  // (device, kernel) -> limit set
  int device = 0;
  YOLOCU_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  size_t& limit = raised[{device, kernel}];
  if (bytes <= limit) return;
  YOLOCU_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  limit = bytes;
}

}  // namespace yolocu::engine

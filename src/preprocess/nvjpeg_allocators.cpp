// nvJPEG's allocators for CudaJpegDecoder (see the header).
#ifdef YOLOCU_WITH_NVJPEG
#include "preprocess/nvjpeg_allocators.hpp"

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.hpp"

namespace yolocu::detail {
namespace {

int pool_malloc(void* pool, void** ptr, size_t size, cudaStream_t stream) {
  return cudaMallocFromPoolAsync(ptr, size, static_cast<cudaMemPool_t>(pool), stream) == cudaSuccess ? 0 : 1;
}
int pool_free(void*, void* ptr, size_t, cudaStream_t stream) { return cudaFreeAsync(ptr, stream) == cudaSuccess ? 0 : 1; }
int pinned_malloc(void* cache, void** ptr, size_t size, cudaStream_t) {
  return static_cast<PinnedCache*>(cache)->alloc(ptr, size);
}
int pinned_free(void* cache, void* ptr, size_t, cudaStream_t) { return static_cast<PinnedCache*>(cache)->release(ptr); }

}  // namespace

int PinnedCache::alloc(void** ptr, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
  if (best != free_.end()) {
    *ptr = best->first;
    used_.push_back(*best);
    free_bytes_ -= best->second;
    free_.erase(best);
    return 0;
  }
  if (cudaHostAlloc(ptr, size, cudaHostAllocDefault) != cudaSuccess) return 1;
  used_.emplace_back(*ptr, size);
  return 0;
}

int PinnedCache::release(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(used_.begin(), used_.end(), [&](const auto& b) { return b.first == ptr; });
  if (it == used_.end()) return cudaFreeHost(ptr) == cudaSuccess ? 0 : 1;  // not from alloc() (never expected)
  int r = 0;
  if (free_bytes_ + it->second > kKeep) {
    r = cudaFreeHost(ptr) == cudaSuccess ? 0 : 1;
  } else {
    free_bytes_ += it->second;
    free_.push_back(*it);
  }
  used_.erase(it);
  return r;
}

void PinnedCache::clear() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& b : free_) cudaFreeHost(b.first);
  for (const auto& b : used_) cudaFreeHost(b.first);
  free_.clear();
  used_.clear();
  free_bytes_ = 0;
}

cudaMemPool_t make_nvjpeg_device_pool(int device) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  YOLOCU_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
  uint64_t keep = UINT64_MAX;  // never trimmed at synchronisations
  if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) {
    cudaMemPoolDestroy(pool);
    YOLOCU_CUDA_CHECK(cudaGetLastError());
  }
  return pool;
}

nvjpegDevAllocatorV2_t nvjpeg_device_allocator(cudaMemPool_t pool) { return {pool_malloc, pool_free, pool}; }

nvjpegPinnedAllocatorV2_t nvjpeg_pinned_allocator(PinnedCache* cache) { return {pinned_malloc, pinned_free, cache}; }

}  // namespace yolocu::detail
#endif  // YOLOCU_WITH_NVJPEG

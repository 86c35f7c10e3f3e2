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
int pinned_free(void* cache, void* ptr, size_t, cudaStream_t stream) {
  return static_cast<PinnedCache*>(cache)->release(ptr, stream);
}

}  // namespace

std::atomic<uint64_t> PinnedCache::allocations_{0}, PinnedCache::frees_{0};

int PinnedCache::host_alloc(void** ptr, size_t size) {
  if (cudaHostAlloc(ptr, size, cudaHostAllocDefault) != cudaSuccess) return 1;
  allocations_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

int PinnedCache::host_free(void* ptr) {
  frees_.fetch_add(1, std::memory_order_relaxed);
  return cudaFreeHost(ptr) == cudaSuccess ? 0 : 1;
}

PinnedAllocationCounts PinnedCache::counts() noexcept {
  return {allocations_.load(std::memory_order_relaxed), frees_.load(std::memory_order_relaxed)};
}

void PinnedCache::reap() {
  for (size_t i = 0; i < waiting_.size();) {
    Block& b = waiting_[i];
    const cudaError_t q = cudaEventQuery(b.ready);
    if (q == cudaErrorNotReady) {
      ++i;
      continue;
    }
    if (q != cudaSuccess) (void)cudaGetLastError();  // a failed event: the device is gone, the block is idle
    events_.push_back(b.ready);
    b.ready = nullptr;
    free_.push_back(b);
    waiting_[i] = waiting_.back();
    waiting_.pop_back();
  }
}

int PinnedCache::alloc(void** ptr, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  reap();
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->size >= size && (best == free_.end() || it->size < best->size)) best = it;
  if (best != free_.end()) {
    *ptr = best->ptr;
    used_.push_back(*best);
    free_bytes_ -= best->size;
    free_.erase(best);
    return 0;
  }
  if (host_alloc(ptr, size) != 0) return 1;
  used_.push_back({*ptr, size, nullptr});
  return 0;
}

int PinnedCache::release(void* ptr, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(used_.begin(), used_.end(), [&](const Block& b) { return b.ptr == ptr; });
  if (it == used_.end()) return host_free(ptr);  // not from alloc() (never expected)
  Block b = *it;
  used_.erase(it);
  reap();
  if (free_bytes_ + b.size > kKeep) return host_free(b.ptr);  // waits for the device
  if (events_.empty()) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      (void)cudaGetLastError();
      return host_free(b.ptr);
    }
    events_.push_back(e);
  }
  b.ready = events_.back();
  if (cudaEventRecord(b.ready, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    b.ready = nullptr;
    return host_free(b.ptr);
  }
  events_.pop_back();
  free_bytes_ += b.size;  // idle bytes: waiting and free
  waiting_.push_back(b);
  return 0;
}

size_t PinnedCache::blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size() + used_.size() + waiting_.size();
}

void PinnedCache::clear() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Block& b : waiting_) {
    if (cudaEventSynchronize(b.ready) != cudaSuccess) (void)cudaGetLastError();
    cudaEventDestroy(b.ready);
    host_free(b.ptr);
  }
  for (const Block& b : free_) host_free(b.ptr);
  for (const Block& b : used_) host_free(b.ptr);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  free_.clear();
  used_.clear();
  waiting_.clear();
  events_.clear();
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

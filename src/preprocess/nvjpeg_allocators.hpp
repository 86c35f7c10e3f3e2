// The allocators CudaJpegDecoder gives nvJPEG (nvjpegCreateExV2). With nvJPEG's defaults
// (cudaMalloc / cudaFree, cudaHostAlloc / cudaFreeHost), an internal buffer that grows for a larger
// image frees the old one with a call that waits for the whole device: every execution context's
// work, not only the decoder's, so decoders that should overlap the engine serialised with it.
// Device memory comes stream-ordered from a pool of the decoder's own (never trimmed); pinned host
// blocks are cached and handed out again. (Padding nvJPEG's pinned allocations instead made the
// hybrid backend refuse every image.) Only with nvJPEG in the build.
#pragma once

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "yolocu/image_decode_cuda.hpp"  // PinnedAllocationCounts

namespace yolocu::detail {

// Pinned host blocks: a freed block is kept and handed out again (the smallest free block large
// enough); blocks go back to CUDA in clear() (after nvJPEG's handle is gone), or at once when more
// than kKeep bytes already wait unused. nvJPEG frees stream-ordered (the V2 allocators pass the
// stream whose queued work may still read or write the block), so a released block is handed out
// again only once the work queued on that stream before the release has finished (an event per
// release); until then an allocation of its size gets another block. Thread-safe.
class PinnedCache {
 public:
  static constexpr size_t kKeep = size_t{256} << 20;
  PinnedCache() = default;
  PinnedCache(const PinnedCache&) = delete;
  PinnedCache& operator=(const PinnedCache&) = delete;
  ~PinnedCache() { clear(); }
  int alloc(void** ptr, size_t size);                // 0 on success, like cudaHostAlloc
  int release(void* ptr, cudaStream_t stream = 0);   // 0 on success
  void clear() noexcept;
  size_t blocks() const;                             // held blocks: in use, waiting and free
  // cudaHostAlloc / cudaFreeHost calls of every PinnedCache of the process so far.
  static PinnedAllocationCounts counts() noexcept;

 private:
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;
    cudaEvent_t ready = nullptr;  // released blocks: recorded on the releasing stream
  };
  void reap();  // blocks whose event completed: from waiting_ to free_ (mutex held)
  static int host_alloc(void** ptr, size_t size);  // cudaHostAlloc, counted; 0 on success
  static int host_free(void* ptr);                 // cudaFreeHost, counted; 0 on success
  static std::atomic<uint64_t> allocations_, frees_;
  mutable std::mutex mutex_;
  std::vector<Block> free_, used_, waiting_;
  std::vector<cudaEvent_t> events_;  // unused events, kept for the next release
  size_t free_bytes_ = 0;
};

// A device memory pool on `device` whose memory is kept at synchronisations (kCuda on failure).
cudaMemPool_t make_nvjpeg_device_pool(int device);
// nvJPEG allocators over that pool (stream-ordered) and over a PinnedCache.
nvjpegDevAllocatorV2_t nvjpeg_device_allocator(cudaMemPool_t pool);
nvjpegPinnedAllocatorV2_t nvjpeg_pinned_allocator(PinnedCache* cache);

}  // namespace yolocu::detail

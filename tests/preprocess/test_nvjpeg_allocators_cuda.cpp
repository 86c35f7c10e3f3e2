// The pinned host cache CudaJpegDecoder gives nvJPEG (label gpu; skips without a device). nvJPEG
// frees its pinned buffers stream-ordered: a block released while work queued on the stream may
// still copy from it must not be handed out again before that work has run, or the next image's
// bitstream would overwrite the bytes a queued copy has yet to read. The process-wide counts of
// cudaHostAlloc / cudaFreeHost calls grow only when a block is made or given back, not on reuse.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "preprocess/nvjpeg_allocators.hpp"
#include "test_util.hpp"

namespace yolocu {
namespace {

// Holds a stream in a host function until open() is called: the work queued behind it waits.
class Gate {
 public:
  explicit Gate(cudaStream_t s) { EXPECT_EQ(cudaLaunchHostFunc(s, &Gate::wait, this), cudaSuccess); }
  void open() { open_.store(true); }

 private:
  static void CUDART_CB wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // never hangs the test
    while (!g->open_.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }
  std::atomic<bool> open_{false};
};

TEST(NvjpegPinnedCache, ReleasedBlockWaitsForItsStream) {
  YOLOCU_REQUIRE_GPU();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const PinnedAllocationCounts before = detail::PinnedCache::counts();
  {
    detail::PinnedCache cache;
    void* a = nullptr;
    ASSERT_EQ(cache.alloc(&a, 1 << 20), 0);
    Gate gate(s);  // work on s before the release is still queued
    ASSERT_EQ(cache.release(a, s), 0);
    void* b = nullptr;
    ASSERT_EQ(cache.alloc(&b, 1 << 20), 0);
    EXPECT_NE(a, b) << "a block was handed out again while its stream's work was still queued";
    EXPECT_EQ(cache.blocks(), 2u);
    gate.open();
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    void* c = nullptr;
    ASSERT_EQ(cache.alloc(&c, 1 << 20), 0);
    EXPECT_EQ(c, a) << "once its stream has run, the released block is reused";
    EXPECT_EQ(cache.blocks(), 2u);
    // a smaller request reuses the smallest free block large enough; released on the legacy stream
    ASSERT_EQ(cache.release(b, nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    void* d = nullptr;
    ASSERT_EQ(cache.alloc(&d, 4096), 0);
    EXPECT_EQ(d, b);
    EXPECT_EQ(detail::PinnedCache::counts().allocations, before.allocations + 2) << "a, b made; c, d reused";
    EXPECT_EQ(detail::PinnedCache::counts().frees, before.frees);
    ASSERT_EQ(cache.release(c, s), 0);
    ASSERT_EQ(cache.release(d, s), 0);
  }  // clear() waits for the waiting blocks and frees everything
  EXPECT_EQ(detail::PinnedCache::counts().frees, before.frees + 2);
  EXPECT_EQ(nvjpeg_pinned_allocation_counts().allocations, detail::PinnedCache::counts().allocations);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace yolocu

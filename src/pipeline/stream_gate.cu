// StreamGate (stream_gate.hpp): a kernel that polls a mapped host word, with a time limit.
#include "pipeline/stream_gate.hpp"

#include <atomic>

#include "core/cuda_check.hpp"

namespace yolocu::detail {

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Waits until words[0] reaches `seq` (wrap-around safe), or `limit_ns` passed: then words[1] = seq.
__global__ void gate_wait_kernel(volatile uint32_t* words, uint32_t seq, unsigned long long limit_ns) {
  const unsigned long long t0 = global_ns();
  while (static_cast<int32_t>(words[0] - seq) < 0) {
    if (global_ns() - t0 > limit_ns) {
      words[1] = seq;
      __threadfence_system();
      return;
    }
    __nanosleep(2000);
  }
}

}  // namespace

StreamGate::StreamGate() {
  YOLOCU_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&words_), 2 * sizeof(uint32_t), cudaHostAllocMapped));
  words_[0] = words_[1] = 0;
  YOLOCU_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_words_), words_, 0));
}

StreamGate::~StreamGate() {
  if (words_) cudaFreeHost(words_);
}

void StreamGate::close(cudaStream_t stream, double limit_ms) {
  ++seq_;
  const auto limit_ns = static_cast<unsigned long long>(limit_ms * 1e6);
  gate_wait_kernel<<<1, 1, 0, stream>>>(d_words_, seq_, limit_ns);
  YOLOCU_CUDA_CHECK(cudaGetLastError());
}

void StreamGate::open() noexcept {
  std::atomic_thread_fence(std::memory_order_release);
  *static_cast<volatile uint32_t*>(&words_[0]) = seq_;
}

bool StreamGate::timed_out() const noexcept {
  return *static_cast<const volatile uint32_t*>(&words_[1]) == seq_ && seq_ != 0;
}

}  // namespace yolocu::detail

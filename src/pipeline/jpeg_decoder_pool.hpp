// The CUDA detector's nvJPEG decoders (DecodeDevice::kGpu), pooled apart from its execution
// contexts: a detect_encoded() call decodes its batch before it takes a context, so that decoding
// the next batches runs while the contexts compute. nvJPEG's decode() holds its caller for most of
// the decode (longer next to busy contexts), and a context that waited for its own decoder idled
// meanwhile (docs/performance.md section 10).
#pragma once

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "yolocu/image_decode_cuda.hpp"

namespace yolocu::detail {

class JpegDecoderPool {
 public:
  // One decoder with its stream (the device's highest priority: the decode's own kernels are not
  // queued behind engine kernels) and an event that marks the end of its last decode.
  struct Slot {
    std::unique_ptr<CudaJpegDecoder> jpeg;
    cudaStream_t stream = nullptr;
    cudaEvent_t done = nullptr;
    bool busy = false;
    ~Slot();
  };

  // Returns a slot to the pool when it goes out of scope.
  class Lease {
   public:
    Lease(JpegDecoderPool* pool, Slot* slot) : pool_(pool), slot_(slot) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), slot_(o.slot_) { o.slot_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (slot_) pool_->release(*slot_);
    }
    Slot& operator*() const { return *slot_; }
    Slot* operator->() const { return slot_; }

   private:
    JpegDecoderPool* pool_;
    Slot* slot_;
  };

  // `count` decoders (>= 1) on options.device.
  JpegDecoderPool(int count, const CudaJpegDecoderOptions& options);
  // Blocks until a decoder is free.
  Lease acquire();
  // A free decoder, or none (without waiting).
  std::optional<Lease> try_acquire();
  int size() const { return static_cast<int>(slots_.size()); }

 private:
  void release(Slot& s);
  std::vector<std::unique_ptr<Slot>> slots_;
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace yolocu::detail

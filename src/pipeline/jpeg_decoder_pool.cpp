// The CUDA detector's pooled nvJPEG decoders (see the header).
#include "pipeline/jpeg_decoder_pool.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "core/cuda_check.hpp"

namespace yolocu::detail {

JpegDecoderPool::Slot::~Slot() {
  if (stream) cudaStreamSynchronize(stream);  // no decode still writes the decoder's buffer
  jpeg.reset();
  if (done) cudaEventDestroy(done);
  if (stream) cudaStreamDestroy(stream);
}

JpegDecoderPool::JpegDecoderPool(int count, const CudaJpegDecoderOptions& options) {
  YOLOCU_CHECK(count >= 1, kInvalidArgument, "JpegDecoderPool: count must be >= 1, got ", count);
  int least = 0, greatest = 0;
  YOLOCU_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  for (int i = 0; i < count; ++i) {
    auto s = std::make_unique<Slot>();
    s->jpeg = std::make_unique<CudaJpegDecoder>(options);
    YOLOCU_CUDA_CHECK(cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking, greatest));
    YOLOCU_CUDA_CHECK(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
    slots_.push_back(std::move(s));
  }
}

JpegDecoderPool::Lease JpegDecoderPool::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    for (auto& s : slots_)
      if (!s->busy) {
        s->busy = true;
        return Lease(this, s.get());
      }
    cv_.wait(lock);
  }
}

std::optional<JpegDecoderPool::Lease> JpegDecoderPool::try_acquire() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& s : slots_)
    if (!s->busy) {
      s->busy = true;
      return std::optional<Lease>(std::in_place, this, s.get());
    }
  return std::nullopt;
}

void JpegDecoderPool::release(Slot& s) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s.busy = false;
  }
  cv_.notify_one();
}

}  // namespace yolocu::detail

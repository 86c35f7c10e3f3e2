// Internal: the pipeline's decode pool. Worker threads decode the sources (encoded mode: only read
// the files) in input order, at most `ahead` sources in front of the consumer, which bounds the
// memory the decoded images hold; the consumer takes them in input order.
#pragma once

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "yolocu/image.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu::detail {

class DecodePool {
 public:
  // One source, ready for the detector.
  struct Item {
    Image image;                  // decoding mode, kFile / kEncoded: the decoded pixels
    ImageView view;               // decoding mode: the pixels to detect on (image's, or kDecoded's own)
    std::string bytes;            // encoded mode, kFile: the file's bytes
    const void* data = nullptr;   // encoded mode, kEncoded: the caller's bytes
    size_t size = 0;
    std::string error;            // describe_error() of the failure, or Source::error
    std::exception_ptr exception; // the failure (null for Source::error)
  };

  // `sources` must outlive the pool. threads: 1.. (at most one per source). `limits`: what one
  // image may cost the decoder (the detector's DetectorOptions::decode_limits).
  DecodePool(const std::vector<Source>& sources, int threads, size_t ahead, bool encoded, const DecodeLimits& limits);
  ~DecodePool();
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  // Blocks until source i is ready (or failed) and moves it out. Call with i = 0, 1, 2, ...
  Item take(size_t i);

 private:
  void work();
  Item prepare(const Source& source) const;

  const std::vector<Source>& sources_;
  const size_t ahead_;
  const bool encoded_;
  const DecodeLimits limits_;
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::map<size_t, Item> done_;
  size_t next_ = 0, consumed_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace yolocu::detail

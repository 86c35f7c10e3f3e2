#include "pipeline/decode_pool.hpp"

#include <algorithm>

namespace yolocu::detail {

DecodePool::DecodePool(const std::vector<Source>& sources, int threads, size_t ahead, bool encoded,
                       const DecodeLimits& limits)
    : sources_(sources), ahead_(std::max<size_t>(ahead, 1)), encoded_(encoded), limits_(limits) {
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(sources.size(), 1))));
  for (int t = 0; t < n; ++t) workers_.emplace_back([this] { work(); });
}

DecodePool::~DecodePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  for (auto& w : workers_) w.join();
}

DecodePool::Item DecodePool::take(size_t i) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [&] { return done_.count(i) != 0; });
  Item item = std::move(done_[i]);
  done_.erase(i);
  consumed_ = i + 1;
  lock.unlock();
  space_.notify_all();
  return item;
}

DecodePool::Item DecodePool::prepare(const Source& s) const {
  Item item;
  if (!s.error.empty()) {
    item.error = s.error;
    return item;
  }
  try {
    if (s.kind == Source::Kind::kDecoded) {
      item.view = s.image;
    } else if (encoded_ && s.kind == Source::Kind::kEncoded) {
      item.data = s.data, item.size = s.size;
    } else if (encoded_) {
      item.bytes = read_file_bytes(s.name);
    } else {
      item.image = s.kind == Source::Kind::kFile ? decode_image_file(s.name, limits_)
                                                  : decode_image(s.data, s.size, limits_, s.name);
      item.view = item.image.view();
    }
  } catch (const std::exception& e) {
    item.error = describe_error(e);
    item.exception = std::current_exception();
  }
  return item;
}

void DecodePool::work() {
  for (;;) {
    size_t i;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [&] { return stop_ || next_ >= sources_.size() || next_ < consumed_ + ahead_; });
      if (stop_ || next_ >= sources_.size()) return;
      i = next_++;
    }
    Item item = prepare(sources_[i]);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_[i] = std::move(item);
    }
    ready_.notify_all();
  }
}

}  // namespace yolocu::detail

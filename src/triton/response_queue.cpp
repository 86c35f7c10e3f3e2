#include "triton/response_queue.hpp"

#include <utility>

namespace yolocu::triton {

ResponseQueue::ResponseQueue(size_t depth) : depth_(depth > 0 ? depth : 1), thread_([this] { loop(); }) {}

ResponseQueue::~ResponseQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ResponseQueue::post(std::function<void()> job) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return jobs_.size() + (running_ ? 1 : 0) < depth_; });
  jobs_.push_back(std::move(job));
  lock.unlock();
  changed_.notify_all();
}

void ResponseQueue::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    lock.unlock();
    job();
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

}  // namespace yolocu::triton

// A thread of a model instance's own that answers its executions' requests (responses,
// statistics, release) while the instance runs the next execution: with requests of one image the
// answers are a large share of an execution (docs/performance.md section 8), time in which the
// instance's detector would stand idle. Parameter response_thread (docs/serving.md).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace yolocu::triton {

class ResponseQueue {
 public:
  // `depth`: executions whose answers may wait; post() blocks while that many do, so that an
  // instance never runs further ahead of its answers (Triton then keeps the requests queued).
  explicit ResponseQueue(size_t depth = 2);
  ~ResponseQueue();  // runs every job posted, then joins the thread
  ResponseQueue(const ResponseQueue&) = delete;
  ResponseQueue& operator=(const ResponseQueue&) = delete;

  // Runs `job` on the queue's thread after those posted before it. A job must not throw.
  void post(std::function<void()> job);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  size_t depth_;
  bool running_ = false;  // a job is being run
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace yolocu::triton

// The Triton backend's response thread (src/triton/response_queue.hpp): jobs run in order on one
// thread other than the caller's, post() blocks while `depth` executions wait, and the destructor
// runs what is queued before it returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "triton/response_queue.hpp"

namespace yt = yolocu::triton;

TEST(TritonResponseQueue, RunsJobsInOrderOnItsOwnThreadAndAllBeforeItIsGone) {
  std::vector<int> order;
  std::mutex m;
  std::thread::id ran_on;
  {
    yt::ResponseQueue q(4);
    for (int i = 0; i < 100; ++i)
      q.post([&, i] {
        std::lock_guard<std::mutex> lock(m);
        order.push_back(i);
        ran_on = std::this_thread::get_id();
      });
  }  // the destructor returns only after the 100 jobs
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(TritonResponseQueue, PostWaitsWhileDepthExecutionsWait) {
  yt::ResponseQueue q(1);
  std::promise<void> started, release;
  std::shared_future<void> go = release.get_future().share();
  q.post([&] {
    started.set_value();
    go.wait();
  });
  started.get_future().wait();  // the first job runs and holds the queue's one place
  std::atomic<bool> posted{false};
  std::thread poster([&] {
    q.post([] {});
    posted = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(posted.load()) << "post() returned while the queue was full";
  release.set_value();
  poster.join();
  EXPECT_TRUE(posted.load());
}

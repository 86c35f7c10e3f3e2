// bench --timeline: the Chrome trace of GPU batch spans and the account of their overlap, on
// hand-made spans (what the CUDA detector's stage profiling returns), so no GPU is needed.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "stats.hpp"
#include "timeline.hpp"

namespace yolocu::cli {
namespace {

BatchSpan span(int context, double upload, double letterbox, double engine, double post, double end) {
  BatchSpan s;
  s.context = context;
  s.images = 32;
  const double t[5] = {upload, letterbox, engine, post, end};
  for (int i = 0; i < 5; ++i) s.t[i] = t[i];
  return s;
}

TEST(Timeline, OverlapCountsEnginesAtOnceAndHiddenUploads) {
  // Context 0 uploads 0-1.5 ms and computes 2-6; context 1 uploads 1-3 (its 2-3 under context 0's
  // engine: half) and computes 6-10; context 2 uploads 5-7 (1 ms under engine 0, 1 ms under engine 1:
  // all of it) and computes 7-11, beside context 1's engine.
  const std::vector<BatchSpan> spans = {span(0, 0, 1.5, 2, 6, 6.5), span(1, 1, 3, 6, 10, 10.5),
                                        span(2, 5, 7, 7, 11, 11.5)};
  const std::string d = describe_overlap(spans);
  EXPECT_NE(d.find("3 batches on 3 contexts in 11.500 ms"), std::string::npos) << d;
  EXPECT_NE(d.find("engines running at once max 2"), std::string::npos) << d;
  // uploads: 1.5 ms (none hidden) + 2 ms (1 hidden) + 2 ms (2 hidden) = 3 of 5.5 ms = 55%
  EXPECT_NE(d.find("55% of the upload time"), std::string::npos) << d;
  EXPECT_EQ(describe_overlap({}), "no batches");
  // back to back on one context: nothing at once, nothing hidden
  const std::string serial = describe_overlap({span(0, 0, 1, 2, 3, 4), span(0, 4, 5, 6, 7, 8)});
  EXPECT_NE(serial.find("engines running at once max 1; 0% of the upload time"), std::string::npos) << serial;
}

TEST(Timeline, TraceEventsAreChromeSlices) {
  const std::string t = trace_events({span(1, 0.5, 1, 2, 3, 3.25)}, 32);
  EXPECT_NE(t.find("{\"name\": \"upload\", \"cat\": \"batch 0\", \"ph\": \"X\", \"pid\": 32, \"tid\": 1, \"ts\": 500.000, "
                   "\"dur\": 500.000"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\"name\": \"engine\""), std::string::npos) << t;
  EXPECT_NE(t.find("\"name\": \"decode+NMS+copy back\", \"cat\": \"batch 0\", \"ph\": \"X\", \"pid\": 32, \"tid\": 1, "
                   "\"ts\": 3000.000, \"dur\": 250.000"),
            std::string::npos)
      << t;
  EXPECT_EQ(trace_events({}, 1), "");
}

// The video summary's rate over the middle half of the frames: a slow start (10 frames a second
// while the sources open) and a slow end leave it out; the whole run would say 57 frames/s.
TEST(MiddleRate, CountsFromTheQuarterToTheThreeQuartersMark) {
  const auto t0 = std::chrono::steady_clock::now();
  auto at = [&](double s) { return t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s)); };
  MiddleRate r;
  const std::vector<std::pair<double, int64_t>> marks = {{1, 10}, {2, 20}, {3, 120}, {4, 220}, {5, 320}, {6, 390}, {7, 400}};
  for (const auto& [s, n] : marks) r.mark(n, at(s));
  EXPECT_DOUBLE_EQ(r.frames_per_s(), 100.0);  // (320 - 120) frames in the 2 s from 3 to 5
}

// An endless (live) run keeps a bounded number of marks; the rate stays right: 200,000 batches of
// 2 frames a millisecond (2,000 frames/s) after 1,000 slow ones (a frame every 10 ms).
TEST(MiddleRate, StaysRightOverLongRuns) {
  const auto t0 = std::chrono::steady_clock::now();
  MiddleRate r;
  int64_t frames = 0;
  auto t = t0;
  for (int i = 0; i < 1000; ++i) r.mark(++frames, t += std::chrono::milliseconds(10));
  for (int i = 0; i < 200000; ++i) r.mark(frames += 2, t += std::chrono::milliseconds(1));
  EXPECT_NEAR(r.frames_per_s(), 2000.0, 2.0);
}

TEST(MiddleRate, TooFewMarksSayNothing) {
  MiddleRate none, two, one_batch;
  const auto t0 = std::chrono::steady_clock::now();
  two.mark(10, t0);
  two.mark(20, t0 + std::chrono::seconds(1));
  EXPECT_EQ(none.frames_per_s(), 0);
  EXPECT_EQ(two.frames_per_s(), 0);
  for (int i = 0; i < 3; ++i) one_batch.mark(64, t0 + std::chrono::seconds(i));  // every frame in the first batch
  EXPECT_EQ(one_batch.frames_per_s(), 0);
}

}  // namespace
}  // namespace yolocu::cli

// Summary statistics of timings, as the CLI prints them (bench, video timeline, --latency).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace yolocu::cli {

struct Stats {
  double median = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

// Nearest-rank quantiles of v (index q * (n - 1), rounded); zeros for an empty v.
inline Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5))]; };
  s.median = at(0.5);
  s.p90 = at(0.9);
  s.p99 = at(0.99);
  s.max = v.back();
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

// Frames per second over the middle half of a run's frames (from the frame that reaches a quarter of
// the total to the one that reaches three quarters): the rate once every source runs, without the
// sources' start (decoders created, first pictures) or the tail of the last ones to end, which a
// whole-run rate of a short clip mixes in. mark() after each batch with the frames so far. Memory
// stays bounded on endless (live) runs: past kMaxPoints marks, every second one is dropped and
// later marks are kept at half the rate, so the quarter marks move by at most 1/kMaxPoints of the run.
class MiddleRate {
 public:
  void mark(int64_t frames_so_far, std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now()) {
    last_ = {t, frames_so_far};
    if (++marks_ % stride_ != 0) return;
    points_.push_back(last_);
    if (points_.size() < kMaxPoints) return;
    for (size_t i = 1; i < points_.size() / 2; ++i) points_[i] = points_[2 * i];
    points_.resize(points_.size() / 2);
    stride_ *= 2;
  }
  // 0 when the run had too few marks to tell
  double frames_per_s() const {
    if (marks_ < 3) return 0;
    std::vector<Point> p = points_;
    if (p.empty() || p.back().t != last_.t) p.push_back(last_);
    const int64_t total = p.back().frames;
    auto reach = [&](int64_t n) {
      return *std::find_if(p.begin(), p.end(), [n](const Point& q) { return q.frames >= n; });
    };
    const Point a = reach((total + 3) / 4), b = reach((3 * total + 3) / 4);
    const double s = std::chrono::duration<double>(b.t - a.t).count();
    return s > 0 && b.frames > a.frames ? static_cast<double>(b.frames - a.frames) / s : 0;
  }

 private:
  static constexpr size_t kMaxPoints = 4096;
  struct Point {
    std::chrono::steady_clock::time_point t;
    int64_t frames = 0;
  };
  std::vector<Point> points_;  // every stride_-th mark
  Point last_;                 // the latest mark (the run's total)
  int64_t marks_ = 0, stride_ = 1;
};

}  // namespace yolocu::cli

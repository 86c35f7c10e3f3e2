// Summary statistics of timings, as the CLI prints them (bench, video timeline, --latency).
#pragma once

#include <algorithm>
#include <cstddef>
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

}  // namespace yolocu::cli

// Calibration statistics and thresholds (calib_stats.hpp).
#include "engine/quant/calib_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.hpp"

namespace yolocu::engine::quant {

void MinMax::add(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!(v == v)) continue;  // NaN: not a value
    if (!seen) min = max = v, seen = true;
    min = std::min(min, v);
    max = std::max(max, v);
  }
}

float MinMax::amax() const { return seen ? std::max(std::fabs(min), std::fabs(max)) : 0.f; }

AbsHistogram::AbsHistogram(double range, int bins) : range_(range), counts_(static_cast<size_t>(bins), 0) {
  YOLOCU_CHECK(bins >= 1, kInvalidArgument, "histogram: bins must be >= 1, got ", bins);
  YOLOCU_CHECK(range >= 0 && std::isfinite(range), kInvalidArgument, "histogram: bad range ", range);
  step_ = range / bins;
}

double AbsHistogram::edge(int i) const {
  const int bins = static_cast<int>(counts_.size());
  return i >= bins ? range_ : static_cast<double>(i) * step_;
}

// numpy's uniform-bin search: ((a - first) / (last - first)) * bins truncated, then corrected
// against the linspace edges.
int AbsHistogram::bin_of(double a) const {
  const int bins = static_cast<int>(counts_.size());
  if (!(range_ > 0) || a >= range_) return bins - 1;
  int i = static_cast<int>((a / range_) * bins);
  i = std::min(i, bins - 1);
  if (a < edge(i)) --i;
  if (i + 1 < bins && a >= edge(i + 1)) ++i;
  return std::max(i, 0);
}

void AbsHistogram::add(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!(v == v)) continue;
    ++counts_[static_cast<size_t>(bin_of(std::fabs(static_cast<double>(v))))];
  }
}

float percentile_amax(const AbsHistogram& h, double percentile, float max_abs) {
  YOLOCU_CHECK(percentile > 0 && percentile <= 100, kInvalidArgument, "percentile must be in (0, 100], got ", percentile);
  const std::vector<int64_t>& hist = h.counts();
  int64_t total = 0;
  for (int64_t c : hist) total += c;
  if (total == 0) return 0.f;
  const double target = percentile / 100.0, t = static_cast<double>(total);
  double cdf = 0;
  size_t idx = hist.size();  // searchsorted(cdf, target), side 'left'
  for (size_t i = 0; i < hist.size(); ++i) {
    cdf += static_cast<double>(hist[i]) / t;
    if (cdf >= target) {
      idx = i;
      break;
    }
  }
  return std::min(static_cast<float>(h.edge(static_cast<int>(idx))), max_abs);
}

namespace {

constexpr int kLevels = 128;  // 2^(8 - 1): the positive int8 levels
constexpr int kStartBin = 128;

// numpy.digitize(j, numpy.linspace(0, i, kLevels + 1)) - 1 for 0 <= j < i: the level holding bin j.
int level_of(int j, int i) {
  const double step = static_cast<double>(i) / kLevels;
  int k = std::min(static_cast<int>(j / step), kLevels - 1);
  while (k + 1 < kLevels && static_cast<double>(k + 1) * step <= j) ++k;
  while (k > 0 && static_cast<double>(k) * step > j) --k;
  return k;
}

// scipy.stats.entropy(p, q): both normalised, sum p * log(p / q); inf where q = 0 < p.
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double sp = 0, sq = 0;
  for (double v : p) sp += v;
  for (double v : q) sq += v;
  double kl = 0;
  for (size_t j = 0; j < p.size(); ++j) {
    const double pj = p[j] / sp, qj = q[j] / sq;
    if (pj > 0 && qj > 0) kl += pj * std::log(pj / qj);
    else if (pj > 0) return std::numeric_limits<double>::infinity();
  }
  return kl;
}

}  // namespace

float entropy_amax(const AbsHistogram& h, float max_abs) {
  std::vector<double> bins(h.counts().begin(), h.counts().end());
  const int nb = static_cast<int>(bins.size());
  if (nb < kStartBin + 1) return max_abs;
  bins[0] = bins[1];
  double best = std::numeric_limits<double>::infinity();
  int best_i = nb;
  std::vector<double> ref, quant, level_sum(kLevels), level_n(kLevels);
  double tail = 0;
  for (int j = kStartBin; j < nb; ++j) tail += bins[static_cast<size_t>(j)];
  for (int i = kStartBin; i <= nb; ++i) {
    if (i > kStartBin) tail -= bins[static_cast<size_t>(i - 1)];  // tail = sum(bins[i:])
    std::fill(level_sum.begin(), level_sum.end(), 0.0);
    std::fill(level_n.begin(), level_n.end(), 0.0);
    for (int j = 0; j < i; ++j)
      if (bins[static_cast<size_t>(j)] != 0) {
        const int k = level_of(j, i);
        level_sum[static_cast<size_t>(k)] += bins[static_cast<size_t>(j)];
        level_n[static_cast<size_t>(k)] += 1;
      }
    quant.assign(static_cast<size_t>(i), 0.0);
    for (int j = 0; j < i; ++j)
      if (bins[static_cast<size_t>(j)] != 0) {
        const size_t k = static_cast<size_t>(level_of(j, i));
        quant[static_cast<size_t>(j)] = level_sum[k] / level_n[k];
      }
    ref.assign(bins.begin(), bins.begin() + i);
    ref.back() += std::max(tail, 0.0);
    const double kl = kl_divergence(ref, quant);
    if (kl <= best) best = kl, best_i = i;  // ties: the largest i (pytorch-quantization's last argmin)
  }
  return std::min(static_cast<float>(h.edge(best_i)), max_abs);
}

}  // namespace yolocu::engine::quant

// Per-tensor activation statistics of the INT8 calibration and the three ways to turn them into a
// clipping threshold amax (scale = amax / 127, quant/int8_math.hpp). Pure host code, no engine.
//
// Histogram: `bins` equal bins of |x| over [0, range] with the bin of each value chosen as
// numpy.histogram(np.abs(x).astype(np.float64), bins, range=(0, range)) chooses it (edges
// np.linspace(0, range, bins + 1); a value equal to range in the last bin; values above range are
// counted in the last bin). The calibration takes range = max |x| over all images (a first pass),
// so the histogram of the second pass covers every value.
//
//   minmax:     amax = max |x|
//   percentile: amax = edges[searchsorted(cumsum(hist / total), p / 100)] (pytorch-quantization's
//               and ONNX Runtime's symmetric rule), at most max |x|
//   entropy:    TensorRT's calibration (NVIDIA GTC 2017, "8-bit inference with TensorRT") as
//               pytorch-quantization's _compute_amax_entropy implements it (num_bits 8, start bin
//               128, stride 1): for each i in [128, bins] the reference distribution P = hist[0, i)
//               with the outliers hist[i, bins) added to its last bin, Q = hist[0, i) merged into 128
//               levels and spread back uniformly over the non-empty bins of each level; amax =
//               edges[i] of the smallest KL(P || Q) (the largest i among ties). As there, bin 0's
//               count is replaced by bin 1's first (the spike of zeros a ReLU / padding leaves).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace yolocu::engine::quant {

struct MinMax {
  float min = 0, max = 0;
  bool seen = false;
  void add(const float* x, size_t n);
  float amax() const;  // max(|min|, |max|), 0 before any value
};

class AbsHistogram {
 public:
  AbsHistogram() = default;
  AbsHistogram(double range, int bins);
  void add(const float* x, size_t n);
  const std::vector<int64_t>& counts() const { return counts_; }
  double range() const { return range_; }
  double edge(int i) const;  // numpy.linspace(0, range, bins + 1)[i]

 private:
  int bin_of(double a) const;
  double range_ = 0, step_ = 0;
  std::vector<int64_t> counts_;
};

float percentile_amax(const AbsHistogram& h, double percentile, float max_abs);
float entropy_amax(const AbsHistogram& h, float max_abs);

}  // namespace yolocu::engine::quant

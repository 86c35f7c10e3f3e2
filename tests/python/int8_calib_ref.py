"""numpy reference of the INT8 calibration thresholds (src/engine/quant/calib_stats.hpp).

usage: int8_calib_ref.py TENSOR.npy BINS PERCENTILE > result.json
Writes {"max_abs", "hist", "percentile_amax", "entropy_amax"} for the float32 tensor:
  hist             numpy.histogram(|x| as float64, BINS, range=(0, max |x|))
  percentile_amax  pytorch-quantization's _compute_amax_percentile: edges[searchsorted(cdf, p / 100)]
  entropy_amax     pytorch-quantization's _compute_amax_entropy (TensorRT's KL calibration, num_bits 8,
                   unsigned False, stride 1, start_bin 128), transcribed with numpy and scipy's entropy
                   definition written out (scipy is not a dependency)
An independent implementation in numpy for the C++ test to compare against.
"""
import json
import sys
from collections import Counter

import numpy as np


def kl(pk, qk):
    """scipy.stats.entropy(pk, qk): both normalised, sum pk * log(pk / qk), inf where qk = 0 < pk."""
    pk = pk / np.sum(pk)
    qk = qk / np.sum(qk)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(pk > 0, np.where(qk > 0, pk * np.log(pk / qk), np.inf), 0.0)
    return float(np.sum(terms))


def entropy_amax(calib_hist, calib_bin_edges, num_bits=8, unsigned=False, stride=1, start_bin=128):
    bins = calib_hist.astype(np.float64).copy()
    bins[0] = bins[1]
    divergences = []
    nbins = 1 << (num_bits - 1 + int(unsigned))
    new_density_counts = np.zeros(nbins, dtype=np.float64)
    for i in range(start_bin, len(bins) + 1, stride):
        new_density_counts.fill(0)
        space = np.linspace(0, i, num=nbins + 1)
        digitized_space = np.digitize(range(i), space) - 1
        digitized_space[bins[:i] == 0] = -1
        for idx, digitized in enumerate(digitized_space):
            if digitized != -1:
                new_density_counts[digitized] += bins[idx]
        counter = Counter(digitized_space)
        for key, val in counter.items():
            if key != -1:
                new_density_counts[key] = new_density_counts[key] / val
        new_density = np.zeros(i, dtype=np.float64)
        for idx, digitized in enumerate(digitized_space):
            if digitized != -1:
                new_density[idx] = new_density_counts[digitized]
        reference_density = np.array(bins[: len(digitized_space)])
        reference_density[-1] += np.sum(bins[i:])
        divergences.append(kl(reference_density, new_density))
    divergences = np.array(divergences)
    last_argmin = len(divergences) - 1 - np.argmin(divergences[::-1])
    return float(calib_bin_edges[last_argmin * stride + start_bin])


def main() -> int:
    x = np.load(sys.argv[1]).astype(np.float32).ravel()
    nbins, percentile = int(sys.argv[2]), float(sys.argv[3])
    a = np.abs(x).astype(np.float64)
    max_abs = float(np.max(a))
    hist, edges = np.histogram(a, bins=nbins, range=(0.0, max_abs))
    cdf = np.cumsum(hist / hist.sum())
    pct = min(float(edges[np.searchsorted(cdf, percentile / 100.0)]), max_abs)
    ent = min(entropy_amax(hist, edges), max_abs)
    json.dump({"max_abs": max_abs, "hist": hist.tolist(), "percentile_amax": pct, "entropy_amax": ent}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

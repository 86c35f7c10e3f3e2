// Anchor batch sizes, padding and derivation sources (see the header).
#include "engine/cuda/tactics/batch_sizes.hpp"

#include <algorithm>
#include <cmath>

namespace yolocu::engine {

std::vector<int> batch_anchors(int max_batch, const std::vector<int>& tuned) {
  std::vector<int> a(tuned.begin(), tuned.end());
  for (int p = 1; p < max_batch; p *= 2) a.push_back(p);
  a.push_back(std::max(1, max_batch));
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

int run_batch(int batch, const std::vector<int>& anchors) {
  if (anchors.empty()) return batch;
  const auto it = std::lower_bound(anchors.begin(), anchors.end(), batch);
  return it == anchors.end() ? anchors.back() : *it;
}

int nearest_tuned(int batch, const std::vector<int>& tuned) {
  int near = tuned.front();
  for (int t : tuned)
    if (std::abs(std::log(static_cast<double>(t) / batch)) <= std::abs(std::log(static_cast<double>(near) / batch)))
      near = t;
  return near;
}

std::vector<int> sizes_to_prepare(const std::vector<int>& batches, const std::vector<int>& anchors,
                                  const std::vector<int>& ready) {
  std::vector<int> out;
  for (int b : batches) {
    const int r = run_batch(b, anchors);
    if (std::find(ready.begin(), ready.end(), r) == ready.end()) out.push_back(r);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace yolocu::engine

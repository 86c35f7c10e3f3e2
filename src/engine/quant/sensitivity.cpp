// The INT8 sensitivity pass (sensitivity.hpp).
#include "engine/quant/sensitivity.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "yolocu/engine.hpp"

namespace yolocu::engine::quant {
namespace {

std::vector<std::vector<Tensor>> run_all(const std::shared_ptr<const Model>& model, const CpuEngineOptions& eo,
                                         const std::vector<Tensor>& inputs) {
  CpuEngine engine(model, eo);
  std::vector<std::vector<Tensor>> outs;
  for (const Tensor& x : inputs) outs.push_back(engine.run({x}));
  return outs;
}

double squared_norm(const Tensor& t) {
  const Tensor f = cast_tensor(t, DType::kFloat32);
  double s = 0;
  for (int64_t i = 0; i < f.numel(); ++i) s += static_cast<double>(f.data_as<float>()[i]) * f.data_as<float>()[i];
  return s;
}

// ||a - b|| / ||b|| over all outputs of all inputs.
double relative_l2(const std::vector<std::vector<Tensor>>& a, const std::vector<std::vector<Tensor>>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < a[i].size(); ++k) {
      const Tensor x = cast_tensor(a[i][k], DType::kFloat32), y = cast_tensor(b[i][k], DType::kFloat32);
      for (int64_t e = 0; e < x.numel(); ++e) {
        const double d = static_cast<double>(x.data_as<float>()[e]) - y.data_as<float>()[e];
        num += d * d;
      }
      den += squared_norm(b[i][k]);
    }
  return den > 0 ? std::sqrt(num / den) : 0.0;
}

}  // namespace

void sensitivity_pass(const std::shared_ptr<const Model>& model, const std::vector<Tensor>& inputs, int keep_worst,
                      int num_threads, Int8Calibration& c, const std::function<void(int64_t, int64_t)>& progress) {
  CpuEngineOptions eo;
  eo.num_threads = num_threads;
  const auto reference = run_all(model, eo, inputs);
  std::vector<size_t> candidates;
  for (size_t k = 0; k < c.convs.size(); ++k)
    if (!c.convs[k].keep_float) candidates.push_back(k);
  auto single = std::make_shared<Int8Calibration>(c);
  for (size_t n = 0; n < candidates.size(); ++n) {
    for (size_t k = 0; k < single->convs.size(); ++k) single->convs[k].keep_float = k != candidates[n];
    eo.int8 = single;
    c.convs[candidates[n]].sensitivity = relative_l2(run_all(model, eo, inputs), reference);
    if (progress) progress(static_cast<int64_t>(n + 1), static_cast<int64_t>(candidates.size()));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](size_t a, size_t b) { return c.convs[a].sensitivity > c.convs[b].sensitivity; });
  const size_t keep = std::min(candidates.size(), static_cast<size_t>(std::max(keep_worst, 0)));
  for (size_t n = 0; n < keep; ++n) c.convs[candidates[n]].keep_float = true;
  c.sensitivity_keep = static_cast<int>(keep);
}

}  // namespace yolocu::engine::quant

#include "engine/engine_test_util.hpp"

#include <cmath>
#include <filesystem>

#include "yolocu/npy.hpp"

namespace yolocu::test {

std::vector<Tensor> run_ort(const std::string& model, const std::vector<Tensor>& inputs, const std::string& tag) {
  const std::string py = python();
  if (py.empty()) return {};
  const std::string dir = scratch_dir("ort/" + tag);
  std::string cmd = py + " " + source_dir() + "/tests/python/ort_run.py " + model + " " + dir + "/out";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string p = dir + "/in" + std::to_string(i) + ".npy";
    save_npy(p, inputs[i]);
    cmd += " " + p;
  }
  std::string out;
  const int rc = run_command(cmd, &out);
  EXPECT_EQ(rc, 0) << out;
  if (rc != 0) return {};
  // Outputs in graph order: the script names files after the outputs; read them sorted by the
  // model's output names (the caller passes them in order through the engine's model).
  std::vector<Tensor> result;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/out")) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) result.push_back(load_npy(f));
  return result;
}

::testing::AssertionResult close_to(const Tensor& got, const Tensor& ref, double atol, double rtol, double max_rel_l2) {
  if (got.shape() != ref.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape()) << " vs " << shape_str(ref.shape());
  const Tensor g = cast_tensor(got, DType::kFloat32), r = cast_tensor(ref, DType::kFloat32);
  const float* a = g.data_as<float>();
  const float* b = r.data_as<float>();
  double num = 0, den = 0, worst = 0;
  int64_t worst_i = -1, bad = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
    num += e * e;
    den += static_cast<double>(b[i]) * b[i];
    const double allowed = atol + rtol * std::fabs(b[i]);
    if (!(e <= allowed)) {
      ++bad;
      if (e - allowed > worst || worst_i < 0) {
        worst = e - allowed;
        worst_i = i;
      }
    }
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (bad || !(rel <= max_rel_l2))
    return ::testing::AssertionFailure() << bad << " elements outside atol " << atol << " + rtol " << rtol
                                         << " (worst at " << worst_i << ": " << (worst_i >= 0 ? a[worst_i] : 0) << " vs "
                                         << (worst_i >= 0 ? b[worst_i] : 0) << "), relative L2 " << rel << " (limit "
                                         << max_rel_l2 << ")";
  return ::testing::AssertionSuccess() << "relative L2 " << rel;
}

Tensor uniform_input(const Shape& s, uint32_t seed) {
  Tensor x(DType::kFloat32, s);
  uint32_t v = seed;
  for (int64_t i = 0; i < x.numel(); ++i) {
    v = v * 1664525u + 1013904223u;
    x.data_as<float>()[i] = static_cast<float>(v >> 8) / 16777216.f;
  }
  return x;
}

}  // namespace yolocu::test

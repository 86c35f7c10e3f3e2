#include "test_util.hpp"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#ifdef YOLOCU_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace yolocu::test {

std::string data_dir() {
  const char* env = std::getenv("YOLOCU_DATA_DIR");  // overrides the configured path (GPU machine)
  return env && *env ? env : YOLOCU_DATA_DIR;
}

std::string source_dir() {
  const char* env = std::getenv("YOLOCU_SOURCE_DIR");
  return env && *env ? env : YOLOCU_SOURCE_DIR;
}

std::string data_file(const std::string& relative) {
  const std::string p = data_dir() + "/" + relative;
  struct stat st;
  return stat(p.c_str(), &st) == 0 ? p : std::string();
}

std::string v8_dir() {
  const char* env = std::getenv("YOLOCU_V8_DIR");
  return env && *env ? env : source_dir() + "/.data/v8/refs";
}

std::string v8_file(const std::string& name) {
  struct stat st;
  const std::string done = v8_dir() + "/COMPLETE", p = v8_dir() + "/" + name;
  return stat(done.c_str(), &st) == 0 && stat(p.c_str(), &st) == 0 ? p : std::string();
}

std::string v8_trained_dir() {
  const char* env = std::getenv("YOLOCU_V8_TRAINED_DIR");
  if (env && *env) return env;
  struct stat st;
  for (const char* name : {"yolov8n", "yolo11n"})
    if (stat((v8_dir() + "/" + name + "_val.json").c_str(), &st) == 0) return v8_dir();
  return source_dir() + "/.data/v8/trained";
}

bool v8_required() {
  const char* env = std::getenv("YOLOCU_REQUIRE_V8");
  return env && *env && std::string(env) != "0";
}

std::string scratch_dir(const std::string& name) {
  const char* env = std::getenv("YOLOCU_SCRATCH_DIR");
  const std::string p = (env && *env ? std::string(env) : std::string(YOLOCU_BINARY_DIR) + "/test-scratch") + "/" + name;
  std::filesystem::create_directories(p);
  return p;
}

bool have_gpu() {
#ifdef YOLOCU_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
#else
  return false;
#endif
}

int run_command(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::string s;
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) s.append(buf, n);
  const int st = pclose(p);
  if (out) *out = s;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string op_cases_command(const std::string& dir, const std::string& prefix) {
  return python() + " " + source_dir() + "/tests/python/make_op_cases.py " + dir + (prefix.empty() ? "" : " " + prefix);
}

std::string python() {
  const char* env = std::getenv("YOLOCU_PYTHON");
  if (env) return env;  // empty: no Python oracles
  struct stat st;
  return stat(YOLOCU_PYTHON, &st) == 0 ? std::string(YOLOCU_PYTHON) : std::string();
}

Diff compare(const Tensor& a, const Tensor& b) {
  const Tensor fa = a.dtype() == DType::kFloat32 ? a : cast_tensor(a, DType::kFloat32);
  const Tensor fb = b.dtype() == DType::kFloat32 ? b : cast_tensor(b, DType::kFloat32);
  EXPECT_EQ(fa.numel(), fb.numel()) << shape_str(fa.shape()) << " vs " << shape_str(fb.shape());
  Diff d;
  double num = 0, den = 0;
  const float* x = fa.data_as<float>();
  const float* y = fb.data_as<float>();
  for (int64_t i = 0; i < std::min(fa.numel(), fb.numel()); ++i) {
    const double e = static_cast<double>(x[i]) - y[i];
    d.max_abs = std::max(d.max_abs, std::fabs(e));
    if (std::isnan(e)) d.max_abs = INFINITY;
    num += e * e;
    den += static_cast<double>(y[i]) * y[i];
  }
  d.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

}  // namespace yolocu::test

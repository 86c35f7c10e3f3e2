// Shared helpers for the test suite.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "yolocu/error.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu::test {

// The code of the yolocu::Error that f() throws (its message into *message); a test failure and
// kInternal when it throws none.
inline ErrorCode code_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "no yolocu::Error thrown";
  return ErrorCode::kInternal;
}

// The test material directory: $YOLOCU_DATA_DIR if set, else the configured YOLOCU_DATA_DIR.
std::string data_dir();
// The source tree ($YOLOCU_SOURCE_DIR if set): tests/python scripts live there.
std::string source_dir();

// Absolute path of a file of the shared test material (YOLOCU_DATA_DIR); empty if absent.
std::string data_file(const std::string& relative);

// The YOLOv8 / YOLO11 reference folder made by scripts/v8/make_refs.sh (models and ultralytics'
// outputs, never committed): $YOLOCU_V8_DIR if set, else <source>/.data/v8/refs.
std::string v8_dir();
// Absolute path of a file there; empty if absent (or if the folder is incomplete: no COMPLETE).
std::string v8_file(const std::string& name);
// The folder of trained YOLOv8 / YOLO11 weights' exports and ultralytics' val of them
// (<model>.onnx, <model>_val.json: scripts/v8/train_coco128.py, then make_refs.sh with
// YOLOCU_V8_WEIGHTS): $YOLOCU_V8_TRAINED_DIR if set, else v8_dir() when it holds such a val file
// (a GPU bundle of the trained set), else <source>/.data/v8/trained.
std::string v8_trained_dir();
// True when $YOLOCU_REQUIRE_V8 is set (scripts/test.sh after generating the references): a
// missing reference is then a failure, not a skip.
bool v8_required();

// Path under the build tree for test outputs (created).
std::string scratch_dir(const std::string& name);

// True when a CUDA device is usable.
bool have_gpu();

// Runs a shell command, returns its exit status; output captured into *out if given.
int run_command(const std::string& cmd, std::string* out = nullptr);

// The project's Python (.venv) if it exists, else empty.
std::string python();

// The command that writes tests/python/make_op_cases.py's ONNX cases whose names start with
// `prefix` ("" = all), with ONNX Runtime's outputs, into `dir` (see YOLOCU_REQUIRE_OP_CASES).
std::string op_cases_command(const std::string& dir, const std::string& prefix);

// max |a-b| and ||a-b|| / ||b|| over float32 (or float16, converted) tensors of equal numel.
struct Diff {
  double max_abs = 0, rel_l2 = 0;
};
Diff compare(const Tensor& a, const Tensor& b);

// An environment variable set for a scope; its earlier value (or its absence) comes back at the end.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace yolocu::test

// Skips the current test (visibly) when a data file is missing.
#define YOLOCU_REQUIRE_DATA(var, rel)                                                      \
  const std::string var = ::yolocu::test::data_file(rel);                                  \
  if (var.empty()) GTEST_SKIP() << "test material not found: " << ::yolocu::test::data_dir() << "/" << rel

// Generates make_op_cases.py's cases starting with `prefix` into scratch dir `scratch` (their
// directory in `var`); skips the test (visibly) without the project's Python, fails it (with the
// script's output) when the script fails.
#define YOLOCU_REQUIRE_OP_CASES(var, scratch, prefix)                                                            \
  const std::string var = ::yolocu::test::scratch_dir(scratch);                                                  \
  if (::yolocu::test::python().empty()) GTEST_SKIP() << "no .venv python with onnx/onnxruntime (run scripts/setup.sh)"; \
  do {                                                                                                           \
    std::string log_;                                                                                            \
    ASSERT_EQ(::yolocu::test::run_command(::yolocu::test::op_cases_command(var, prefix), &log_), 0) << log_;     \
  } while (0)

// Skips the current test (visibly) when a YOLOv8 reference file is missing; fails instead when
// YOLOCU_REQUIRE_V8 is set.
#define YOLOCU_REQUIRE_V8(var, name)                                                              \
  const std::string var = ::yolocu::test::v8_file(name);                                          \
  if (var.empty()) {                                                                              \
    if (::yolocu::test::v8_required())                                                            \
      FAIL() << "YOLOCU_REQUIRE_V8: reference missing: " << ::yolocu::test::v8_dir() << "/" << name; \
    GTEST_SKIP() << "YOLOv8 reference not found (run scripts/v8/make_refs.sh): " << ::yolocu::test::v8_dir() \
                 << "/" << name;                                                                  \
  }

#define YOLOCU_REQUIRE_GPU() \
  if (!::yolocu::test::have_gpu()) GTEST_SKIP() << "no CUDA device: GPU test skipped"

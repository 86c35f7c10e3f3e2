// The CPU path under a tight address-space limit (ulimit -v): loading and running a model either
// works or stops with a clear "out of memory" error (exit status 1), never a crash, at every limit
// of a sweep from far too small to enough. Not in the ASan build (ASan reserves terabytes of
// address space for its shadow memory, so no ulimit -v fits it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/cli_test_util.hpp"
#include "onnx_builder.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

namespace {

struct Run {
  uint64_t limit_kb;
  int rc;
  std::string err;
};

// `yolocu <args>` under `ulimit -v limit_kb`, two OpenMP threads.
Run run_limited(uint64_t limit_kb, const std::string& args) {
  static int calls = 0;
  const std::string err_file = test::scratch_dir("cli_limits") + "/stderr." + std::to_string(++calls) + ".txt";
  const std::string cmd = "( ulimit -v " + std::to_string(limit_kb) + " && OMP_NUM_THREADS=2 " +
                          test::quote(test::yolocu_binary()) + " " + args + " 2>" + test::quote(err_file) + " )";
  Run r{limit_kb, test::run_command(cmd, nullptr), test::slurp(err_file)};
  return r;
}

void sweep(const std::string& args) {
  const uint64_t exe_bytes = std::filesystem::file_size(test::yolocu_binary());
  std::vector<Run> runs;
  for (uint64_t mb : {16, 48, 96, 104, 112, 120, 128, 144, 160, 180, 200, 230, 256, 320, 400, 512, 768, 1024, 2048})
    runs.push_back(run_limited(mb * 1024, args));
  int refused = 0;
  bool started = false;
  for (const Run& r : runs) {
    SCOPED_TRACE("ulimit -v " + std::to_string(r.limit_kb) + ": exit " + std::to_string(r.rc) + ", stderr: " + r.err);
    // Before any yolocu code runs, acceptable only until the program has started once: 127, the
    // dynamic loader could not map the program's libraries; 139 below the program's own size, the
    // kernel could not map the program itself and kills it in exec (a CUDA build's binary, with
    // its GPU kernels, is larger than the smallest limits)
    const bool unmappable = r.rc == 139 && r.limit_kb * 1024 < exe_bytes;
    if ((r.rc == 127 || unmappable) && !started) continue;
    started = true;
    EXPECT_TRUE(r.rc == 0 || r.rc == 1) << "crashed or killed";
    if (r.rc == 1) {
      ++refused;
      EXPECT_NE(r.err.find("out of memory"), std::string::npos);
      EXPECT_EQ(r.err.find("unexpected error"), std::string::npos);
    }
  }
  EXPECT_GT(refused, 0) << "no limit of the sweep was too small: it tests nothing";
  EXPECT_EQ(runs.back().rc, 0) << runs.back().err;
}

}  // namespace

TEST(CliLimits, InferUnderAddressSpaceLimits) {
  fuzz::Builder b(13);
  b.input("x", {1, 8, 64, 64});
  b.conv_silu("x", "c1", 8, 16, 3, 2);
  b.conv_silu("c1", "y", 16, 8, 3, 1);
  b.output("y");
  const std::string dir = test::scratch_dir("cli_limits");
  std::ofstream(dir + "/conv.onnx", std::ios::binary) << b.bytes();
  save_npy(dir + "/x.npy", Tensor(DType::kFloat32, {1, 8, 64, 64}));
  sweep("infer --model " + test::quote(dir + "/conv.onnx") + " --input " + test::quote(dir + "/x.npy") +
        " --output-dir " + test::quote(dir + "/out"));
}

TEST(CliLimits, DetectUnderAddressSpaceLimits) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(image, "images/bus.jpg");
  sweep("detect --device cpu --quiet --model " + test::quote(model) + " " + test::quote(image));
}

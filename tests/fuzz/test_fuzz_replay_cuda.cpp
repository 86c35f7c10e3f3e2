// The onnx fuzz corpus on the GPU engine (label gpu; run under compute-sanitizer by
// scripts/gpu/run_all.sh fuzz): every model that loads and plans on the CPU side is built by the
// CUDA engine (FP32, batch 1, no tactic cache) and, if that succeeds, runs one forward pass on
// zeros. A yolocu::Error (unsupported op, shape, no memory) is fine; another exception, a crash or
// a compute-sanitizer report is a finding.
//   YOLOCU_FUZZ_REPLAY_DIR   folders to replay, ':'-separated (default: fuzz/corpus/onnx and
//                            fuzz/regressions/onnx of the source tree)
//   YOLOCU_FUZZ_REPLAY_SHARD "k/n": only every n-th file from the k-th (0-based), to split a large
//                            corpus over several calls
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/file_util.hpp"
#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"

namespace fs = std::filesystem;
using namespace yolocu;

TEST(FuzzReplayCuda, OnnxCorpusBuildsAndRunsOrFailsCleanly) {
  YOLOCU_REQUIRE_GPU();
  const char* src_env = std::getenv("YOLOCU_SOURCE_DIR");
  const std::string src = src_env ? src_env : YOLOCU_SOURCE_DIR;
  std::string dirs = src + "/fuzz/corpus/onnx:" + src + "/fuzz/regressions/onnx";
  if (const char* d = std::getenv("YOLOCU_FUZZ_REPLAY_DIR")) dirs = d;
  int shard = 0, shards = 1;
  if (const char* s = std::getenv("YOLOCU_FUZZ_REPLAY_SHARD")) {
    ASSERT_EQ(std::sscanf(s, "%d/%d", &shard, &shards), 2) << s;
    ASSERT_TRUE(shards >= 1 && shard >= 0 && shard < shards) << s;
  }
  std::vector<fs::path> files;
  std::stringstream ss(dirs);
  for (std::string dir; std::getline(ss, dir, ':');) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  int tried = 0, loaded = 0, built = 0, ran = 0;
  for (size_t i = static_cast<size_t>(shard); i < files.size(); i += static_cast<size_t>(shards)) {
    SCOPED_TRACE(files[i].string());
    ++tried;
    try {
      auto model = std::make_shared<const Model>(load_onnx(files[i].string()));
      ++loaded;
      if (model->graph.inputs.size() != 1 || model->graph.inputs[0].dims.size() != 4) continue;  // not an image model
      CudaEngineOptions o;
      o.precision = Precision::kFloat32;
      o.tactic_cache = "none";
      o.print_warnings = false;
      o.max_graph_plans = 2;
      const auto& dims = model->graph.inputs[0].dims;
      if (!dims[2].is_static() || !dims[3].is_static()) o.height = o.width = 64;
      CudaEngine engine(model, o);
      ++built;
      (void)engine.run_host({Tensor(DType::kFloat32, engine.input_shape(1))});
      ++ran;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-yolocu exception: " << e.what();
    }
  }
  std::printf("[ replay ] %d files (shard %d/%d of %zu): %d loaded, %d built on the GPU, %d ran a forward pass\n", tried,
              shard, shards, files.size(), loaded, built, ran);
  EXPECT_GT(tried, 0);
}

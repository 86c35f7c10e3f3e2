// YOLOv8n and YOLO11n exports through the GPU engine against ultralytics' own PyTorch outputs
// (scripts/v8/make_refs.sh): FP32 relative L2 <= 1e-5 (the CPU engine's bound: no TF32, the
// attention's MatMul and the DFL's Softmax in fp32 like the CPU loops), FP16 <= 5e-3 of the
// reference; static export at batch 1, dynamic export at batch 1 and 4. Skips without a GPU or
// without the references (YOLOCU_V8_DIR).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

CudaEngineOptions v8_options(Precision p, int max_batch) {
  CudaEngineOptions o;
  o.precision = p;
  o.max_batch = max_batch;
  o.tactic_cache = "none";
  return o;
}

void expect_output(const Tensor& got, const Tensor& ref, double bound, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  const test::Diff d = test::compare(got, ref);
  std::printf("[ v8 gpu   ] %-36s rel L2 %.3g  max abs %.3g (bound %.0e)\n", what.c_str(), d.rel_l2, d.max_abs, bound);
  EXPECT_LE(d.rel_l2, bound) << what << ": max abs " << d.max_abs;
}

class CudaV8 : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaV8, StaticBatch1MatchesUltralytics) {
  YOLOCU_REQUIRE_GPU();
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model_path, name + ".onnx");
  YOLOCU_REQUIRE_V8(bus_path, name + "_bus.npz");
  auto model = std::make_shared<const Model>(load_onnx(model_path));
  auto bus = load_npz(bus_path);
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    CudaEngine e(model, v8_options(p, 1));
    const auto out = e.run_host({bus["input"]});
    ASSERT_EQ(out.size(), 1u);
    const bool fp32 = p == Precision::kFloat32;
    expect_output(out[0], bus["output"], fp32 ? 1e-5 : 5e-3, name + (fp32 ? " fp32" : " fp16") + " static b1 bus");
  }
}

TEST_P(CudaV8, DynamicBatch1And4MatchUltralytics) {
  YOLOCU_REQUIRE_GPU();
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model_path, name + "_dyn.onnx");
  YOLOCU_REQUIRE_V8(bus_path, name + "_bus.npz");
  YOLOCU_REQUIRE_V8(b4_path, name + "_batch4.npz");
  auto model = std::make_shared<const Model>(load_onnx(model_path));
  auto bus = load_npz(bus_path);
  auto b4 = load_npz(b4_path);
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    CudaEngine e(model, v8_options(p, 4));
    const bool fp32 = p == Precision::kFloat32;
    const double bound = fp32 ? 1e-5 : 5e-3;
    const std::string tag = name + (fp32 ? " fp32" : " fp16") + " dynamic";
    expect_output(e.run_host({bus["input"]})[0], bus["output"], bound, tag + " b1 bus");
    expect_output(e.run_host({b4["input"]})[0], b4["output"], bound, tag + " b4");
  }
}

// The forward's CUDA graph as the steps' data dependencies (graph_branches, the default) against
// one chain in step order: the same kernels with the same tactics (this process's choices), so the
// same bits, replay after replay (a missing edge would let a branch read a buffer another is still
// writing); and within the bounds of ultralytics' output.
TEST_P(CudaV8, GraphBranchesEqualOneChain) {
  YOLOCU_REQUIRE_GPU();
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model_path, name + ".onnx");
  YOLOCU_REQUIRE_V8(bus_path, name + "_bus.npz");
  auto model = std::make_shared<const Model>(load_onnx(model_path));
  auto bus = load_npz(bus_path);
  for (Precision p : {Precision::kFloat16, Precision::kFloat32}) {
    const bool fp32 = p == Precision::kFloat32;
    CudaEngineOptions o = v8_options(p, 1);
    CudaEngine branches(model, o);
    o.graph_branches = false;
    CudaEngine chain(model, o);
    const CudaEngineStats st = branches.stats();
    std::printf("[ v8 gpu   ] %s %s: %d launching steps, longest dependency chain %d\n", name.c_str(),
                fp32 ? "fp32" : "fp16", st.launching_steps, st.step_depth);
    EXPECT_GT(st.step_depth, 0);
    EXPECT_LT(st.step_depth, st.launching_steps) << "no two steps of the head may run side by side";
    for (int run = 0; run < 5; ++run) {  // run 0 eager, 1 captures, then replays
      const auto a = branches.run_host({bus["input"]});
      const auto b = chain.run_host({bus["input"]});
      ASSERT_EQ(a.size(), 1u);
      ASSERT_EQ(a[0].nbytes(), b[0].nbytes());
      EXPECT_EQ(std::memcmp(a[0].data(), b[0].data(), a[0].nbytes()), 0) << name << " run " << run;
      if (run == 4) expect_output(a[0], bus["output"], fp32 ? 1e-5 : 5e-3, name + " graph branches, replay");
    }
    EXPECT_EQ(branches.stats().graphs_captured, 1);
    for (const auto& w : branches.stats().warnings) ADD_FAILURE() << w;  // e.g. captured as one chain instead
  }
}

INSTANTIATE_TEST_SUITE_P(Exports, CudaV8, ::testing::Values("yolov8n", "yolo11n"));

}  // namespace
}  // namespace yolocu

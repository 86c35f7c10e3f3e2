// Per-op parity, in the spirit of ggml's test-backend-ops: every op case of the CPU engine's op tests
// (tests/python/make_op_cases.py: every op the YOLOv5 / YOLOv8 / YOLO11 exports use at opsets
// 11-18, and the small fusion graphs) through the GPU engine against the CPU engine, FP32 and
// FP16, so that an op is checked alone and not only inside whole models; then a table of edge
// shapes built here. Both engines run the same model: the case's GPU form (op_cases.hpp: one rank-4
// float32 input, its other inputs as constants). The cases the GPU engine refuses by design
// (test::gpu_refusal) must be refused with kUnsupported naming the node or value, not skipped.
//
// Bounds (GPU output g vs CPU output c over each output tensor, scale = max(1, max |c|)):
//   FP32: rel L2 <= 1e-5 and max |g - c| <= 1e-5 * scale; data movement (copies, views, pooling,
//         nearest resize, concat, split, ReLU) exact. Both engines compute in fp32 without TF32; only
//         the order of sums (convolutions, matrix products, softmax) and exp's implementation
//         differ, each a few ulps (2^-24 relative); a wrong index, border or broadcast is O(1).
//   FP16: rel L2 <= 2e-3 and max |g - c| <= 2e-3 * scale, the input rounded to fp16 for both
//         engines (the GPU engine takes fp16 input), so that only the op's own rounding counts:
//         NHWC activations and convolution weights in fp16 (2^-11 relative each), fp32 sums.
// Label "gpu": the tests skip visibly without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/op_cases.hpp"
#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"

namespace yolocu {
namespace {

struct Bound {
  double rel_l2, max_rel;  // max |g - c| <= max_rel * max(1, max |c|)
  bool exact;
};

// Ops that only move, select or clamp values: bit-exact in FP32.
bool moves_data(const std::string& base) {
  static const std::set<std::string> kExact = {
      "Identity", "Relu",    "Reshape", "Transpose",  "Split",     "SplitEqual", "Slice",   "SliceNeg", "Concat",
      "ConcatNeg", "MaxPool", "MaxPool2", "Resize",   "ResizeSizes", "Unsqueeze", "Squeeze", "Floor", "CastF16"};
  return kExact.count(base) != 0;
}

Bound bound_of(Precision p, const std::string& base) {
  if (p == Precision::kFloat32) return {1e-5, 1e-5, moves_data(base)};
  return {2e-3, 2e-3, false};
}

CudaEngineOptions gpu_options(Precision p, int max_batch) {
  CudaEngineOptions o;
  o.precision = p;
  o.max_batch = max_batch;  // the case's batch: its static input is run at that batch
  o.tactic_cache = "none";  // tuned in this process only (the memo shares them across cases)
  o.max_graph_plans = 2;    // every candidate is checked anyway; fewer plan compilations
  o.print_warnings = false;
  return o;
}

// The fp16 value nearest each element (the FP16 engine's input).
Tensor round_to_half(const Tensor& t) { return cast_tensor(cast_tensor(t, DType::kFloat16), DType::kFloat32); }

// Compares every output; prints one line per output (the margins, for the record).
void expect_parity(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu, const Bound& b,
                   const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const Tensor c = cast_tensor(cpu[i], DType::kFloat32);
    // The GPU engine returns float32 whatever the model declares; an fp16 output (CastF16) is
    // compared as the model declares it, rounded to fp16 as the CPU engine rounds it.
    const Tensor g = cpu[i].dtype() == DType::kFloat16 ? round_to_half(gpu[i]) : gpu[i];
    ASSERT_EQ(g.shape(), c.shape()) << what << " output " << i;
    const test::Diff d = test::compare(g, c);
    double scale = 1;
    for (int64_t k = 0; k < c.numel(); ++k) scale = std::max(scale, static_cast<double>(std::fabs(c.data_as<float>()[k])));
    const bool finite = std::all_of(g.data_as<float>(), g.data_as<float>() + g.numel(),
                                    [](float v) { return std::isfinite(v); });
    std::printf("[ %-34s ] output %zu %-18s rel L2 %.2e  max |d| %.2e (scale %.3g)\n", what.c_str(), i,
                shape_str(c.shape()).c_str(), d.rel_l2, d.max_abs, scale);
    EXPECT_TRUE(finite) << what << " output " << i << ": non-finite values";
    if (b.exact) {
      EXPECT_EQ(d.max_abs, 0.0) << what << " output " << i << ": data movement must be exact in FP32";
    } else {
      EXPECT_LE(d.rel_l2, b.rel_l2) << what << " output " << i;
      EXPECT_LE(d.max_abs, b.max_rel * scale) << what << " output " << i;
    }
  }
}

// One case (its GPU form) in one precision: refused as listed (refusal: test::gpu_refusal's
// string, "" when it must run), else within the bound of its op `base`.
void run_case(const std::string& name, const std::string& base, const std::string& refusal, const test::GpuForm& g,
              Precision p) {
  const bool half = p == Precision::kFloat16;
  const std::string what = name + (half ? " fp16" : " fp32");
  std::unique_ptr<CudaEngine> gpu;
  try {
    gpu = std::make_unique<CudaEngine>(g.model, gpu_options(p, static_cast<int>(g.input.dim(0))));
  } catch (const Error& e) {
    if (refusal.empty()) {
      ADD_FAILURE() << what << ": the GPU engine refuses it: " << e.what();
    } else {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << what << ": " << e.what();
      if (refusal != "setup") {
        EXPECT_NE(std::string(e.what()).find(refusal), std::string::npos) << e.what();
      }
      std::printf("[ %-34s ] refused as listed: %s\n", what.c_str(), e.what());
    }
    return;
  }
  ASSERT_TRUE(refusal.empty()) << what << ": listed as refused (" << refusal << ") but the GPU engine takes it";
  const Tensor x = half ? round_to_half(g.input) : g.input;
  CpuEngine cpu(g.model);
  expect_parity(gpu->run_host({x}), cpu.run({x}), bound_of(p, base), what);
}

class OpsParity : public ::testing::TestWithParam<int> {};

// Every case of one opset (one test per opset: each stays within a test's time limit on the GPU
// machine; the first one tunes the convolutions, the later ones find the process's choices).
TEST_P(OpsParity, EveryOpCaseCpuVsGpu) {
  YOLOCU_REQUIRE_GPU();
  // make_op_cases.py writes every opset's cases: once per process (as YOLOCU_REQUIRE_OP_CASES)
  const std::string dir = test::scratch_dir("opcases_parity");
  if (test::python().empty()) GTEST_SKIP() << "no .venv python with onnx/onnxruntime (run scripts/setup.sh)";
  static bool written = false;
  if (!written) {
    std::string log;
    ASSERT_EQ(test::run_command(test::op_cases_command(dir, ""), &log), 0) << log;
    written = true;
  }
  const std::vector<test::OpCase> cases = test::read_op_cases(dir, GetParam());
  ASSERT_GE(cases.size(), 55u);
  int refused = 0;
  for (const test::OpCase& c : cases) {
    SCOPED_TRACE(c.name);
    const test::GpuForm g = test::gpu_form(*c.model(), c.inputs(), test::runs_at_own_batch(c.base));
    if (!g.model) {
      EXPECT_EQ(test::gpu_refusal(c.base), "no float input") << c.name << " has no GPU form: list it";
      std::printf("[ %-34s ] no GPU form (no float32 input): folds at plan time\n", c.name.c_str());
      ++refused;
      continue;
    }
    refused += test::gpu_refusal(c.base).empty() ? 0 : 1;
    for (Precision p : {Precision::kFloat32, Precision::kFloat16})
      run_case(c.name, c.base, test::gpu_refusal(c.base), g, p);
  }
  std::printf("opset %d: %zu cases, %d refused by design\n", GetParam(), cases.size(), refused);
}

INSTANTIATE_TEST_SUITE_P(Opsets, OpsParity, ::testing::Range(11, 19),
                         [](const ::testing::TestParamInfo<int>& i) { return "Opset" + std::to_string(i.param); });

// Images folded into dim 0 behind a batch-1 input (a Reshape from [1, 1, 1, n] to [2, c, h, w]):
// the engine plans convolutions with the network input's batch in dim 0, so it must refuse them,
// naming the node, rather than convolve one image of two.
TEST(OpsParity, FoldedBatchIsRefused) {
  YOLOCU_REQUIRE_GPU();
  const std::string dir = test::scratch_dir("opcases_parity");
  if (test::python().empty()) GTEST_SKIP() << "no .venv python with onnx/onnxruntime (run scripts/setup.sh)";
  std::string log;
  ASSERT_EQ(test::run_command(test::op_cases_command(dir, ""), &log), 0) << log;
  int folded = 0;
  for (const test::OpCase& c : test::read_op_cases(dir, 17)) {
    if (c.base != "Conv" && c.base != "ConvGroup") continue;
    const std::vector<Tensor> in = c.inputs();
    if (in.empty() || in[0].rank() != 4 || in[0].dim(0) < 2) continue;
    SCOPED_TRACE(c.name);
    const test::GpuForm g = test::gpu_form(*c.model(), in);  // folded behind a batch-1 input
    ASSERT_TRUE(g.model);
    for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
      try {
        CudaEngine e(g.model, gpu_options(p, 1));
        ADD_FAILURE() << c.name << ": the GPU engine took a convolution over images folded into dim 0";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
        EXPECT_NE(std::string(e.what()).find("images in dim 0"), std::string::npos) << e.what();
        std::printf("[ %-34s ] folded batch refused: %s\n", c.name.c_str(), e.what());
      }
    }
    ++folded;
  }
  EXPECT_GE(folded, 2) << "the op cases have no batch-2 Conv / ConvGroup case left to fold";
}

TEST(OpsParity, EdgeShapesCpuVsGpu) {
  YOLOCU_REQUIRE_GPU();
  for (const test::EdgeCase& e : test::edge_cases()) {
    SCOPED_TRACE(e.name);
    test::GpuForm g;
    g.model = test::one_node_model(e);
    g.input = test::tie_free(e.x, 1);
    for (Precision p : {Precision::kFloat32, Precision::kFloat16}) run_case(e.name, e.op, test::gpu_refusal(e.name), g, p);
  }
}

}  // namespace
}  // namespace yolocu

// Every op YOLOv5, YOLOv8 and YOLO11 exports use, at every opset 11-18, as a single-op model: the CPU engine against
// ONNX Runtime (the cases and the oracle outputs are generated at test time by
// tests/python/make_op_cases.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "engine/cuda/gpu_steps.hpp"
#include "engine/engine_test_util.hpp"
#include "engine/op_cases.hpp"
#include "engine/plan.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

TEST(Ops, EveryOpEveryOpsetAgainstOnnxRuntime) {
  YOLOCU_REQUIRE_OP_CASES(dir, "opcases", "");
  int cases = 0;
  std::map<int, int> per_opset;
  for (const test::OpCase& c : test::read_op_cases(dir)) {
    SCOPED_TRACE(c.name);
    try {
      CpuEngine engine(c.model());
      const auto outs = engine.run(c.inputs());
      ASSERT_EQ(static_cast<int>(outs.size()), c.n_out);
      // The fusion-pattern graphs: the engine must fuse exactly what the pattern allows (a wrong
      // fusion shows as a mismatch against ONNX Runtime below; a missed one only here).
      static const std::map<std::string, int> kFused = {
          {"FuseResidual16", 5},       {"FuseResidual8", 5},      // 2 x (Sigmoid, Mul) + the Add
          {"FuseResidualLate16", 5},   {"FuseResidualLate8", 5},  // the later plain Conv takes the Add
          {"FuseResidualShared16", 2}, {"FuseResidualShared8", 2}, {"FuseResidualMixed", 5},
          {"FuseConcat", 5},           {"FuseConcatRepeated", 4}, {"FuseConcatOutput", 4},  // 2 SiLU pairs (+ the
          {"FuseConcatBatch2", 4},     {"FuseConcatNested", 6},                             // in-place Concats)
          {"FuseDetectHead", 24},      {"FuseDetectHeadBatch1", 24}};  // 2 levels x 12 tail nodes + the
                                                                         // merging Concat - 1 step
      const auto fused = kFused.find(c.base);
      if (fused != kFused.end()) {
        EXPECT_EQ(engine.stats().fused_nodes, fused->second) << "fused nodes";
      }
      for (int i = 0; i < c.n_out; ++i) {
        const Tensor ref = c.reference(i);
        ASSERT_EQ(outs[static_cast<size_t>(i)].dtype(), ref.dtype()) << "output " << i;
        ASSERT_EQ(outs[static_cast<size_t>(i)].shape(), ref.shape()) << "output " << i;
        if (ref.dtype() == DType::kFloat32 || ref.dtype() == DType::kFloat16) {
          // Convolutions accumulate in a different order: 1e-5 relative; everything else exact.
          EXPECT_TRUE(test::close_to(outs[static_cast<size_t>(i)], ref, 1e-5, 1e-5, 1e-5)) << "output " << i;
        } else {
          EXPECT_EQ(std::memcmp(outs[static_cast<size_t>(i)].data(), ref.data(), ref.nbytes()), 0) << "output " << i;
        }
      }
    } catch (const Error& e) {
      ADD_FAILURE() << "yolocu::Error: " << e.what();
    }
    ++cases;
    per_opset[c.opset]++;
  }
  EXPECT_GE(cases, 385);
  for (int opset = 11; opset <= 18; ++opset) EXPECT_GE(per_opset[opset], 55) << "opset " << opset;
}

// The op cases as the GPU parity test (test_ops_parity_cuda.cpp) runs them, planned for the GPU here
// without a GPU: the GPU engine's planner refuses exactly the cases test::kGpuRefusals lists (each
// with kUnsupported naming the node or value), in FP16 and FP32 activations; every other case plans.
// The CPU engine runs each GPU form (one rank-4 input, the other inputs as constants) like the case.
TEST(Ops, GpuPlanRefusesExactlyTheListedCases) {
  // its own folder: ctest runs it beside EveryOpEveryOpsetAgainstOnnxRuntime, which rewrites "opcases"
  YOLOCU_REQUIRE_OP_CASES(dir, "opcases_gpu_plan", "");
  int planned = 0, refused = 0;
  for (const test::OpCase& c : test::read_op_cases(dir)) {
    SCOPED_TRACE(c.name);
    const test::GpuForm g = test::gpu_form(*c.model(), c.inputs());
    const auto listed = test::gpu_refusal(c.base);
    if (!g.model) {
      EXPECT_EQ(listed, "no float input") << "no float32 input: list the case";
      ++refused;
      continue;
    }
    const auto cpu = CpuEngine(g.model).run({g.input});
    const auto direct = CpuEngine(c.model()).run(c.inputs());
    ASSERT_EQ(cpu.size(), direct.size());
    // (its other inputs are constants now: the parts of the graph they alone feed fold at plan time)
    for (size_t i = 0; i < cpu.size(); ++i)
      EXPECT_TRUE(test::close_to(cpu[i], direct[i], 1e-5, 1e-5, 1e-5)) << "output " << i;
    for (size_t es : {size_t{2}, size_t{4}}) {
      engine::GpuStepOptions o;
      o.act_elem_size = es;
      o.fuse_detect_tail = true;
      std::string message;
      bool ok = true;
      try {
        engine::plan_gpu_steps(engine::build_plan(*g.model, {g.input.shape()}), o);
      } catch (const Error& e) {
        ok = false;
        message = e.what();
        EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << message;
      }
      if (listed.empty()) {
        EXPECT_TRUE(ok) << "the GPU planner refuses the case (" << message << "): list it in test::kGpuRefusals";
      } else if (listed != "setup") {
        EXPECT_FALSE(ok) << "the GPU planner takes the case now: remove it from test::kGpuRefusals";
        EXPECT_NE(message.find(listed), std::string::npos) << message;
      }
      if (es == 2) (ok ? planned : refused) += 1;
    }
  }
  std::printf("GPU forms of the op cases: %d planned, %d refused\n", planned, refused);
  EXPECT_GE(planned, 300);
}

// The edge-shape table of the GPU parity test (test::edge_cases) on the host: the CPU engine runs
// every case to finite values, and the GPU planner plans each one it must run (FP16 and FP32).
TEST(Ops, EdgeShapesRunOnTheCpuAndPlanForTheGpu) {
  for (const test::EdgeCase& e : test::edge_cases()) {
    SCOPED_TRACE(e.name);
    const auto model = test::one_node_model(e);
    const auto outs = CpuEngine(model).run({test::tie_free(e.x, 1)});
    ASSERT_EQ(static_cast<int>(outs.size()), e.outputs);
    for (const Tensor& y : outs) {
      ASSERT_EQ(y.dtype(), DType::kFloat32);
      for (int64_t k = 0; k < y.numel(); ++k) ASSERT_TRUE(std::isfinite(y.data_as<float>()[k])) << k;
    }
    if (!test::gpu_refusal(e.name).empty()) continue;
    for (size_t es : {size_t{2}, size_t{4}}) {
      engine::GpuStepOptions o;
      o.act_elem_size = es;
      EXPECT_NO_THROW(engine::plan_gpu_steps(engine::build_plan(*model, {e.x}), o));
    }
  }
}

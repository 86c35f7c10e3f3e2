// The GPU engine in INT8 (precision kInt8 with a calibration, docs/int8.md) against the CPU
// engine's simulated INT8 with the same calibration, the oracle of what those scales compute.
// The two differ where the GPU rounds more than the simulation: fp16 activations around the INT8
// layers and int8 copies quantised from fp16 values (and, with int8_residuals, the bottlenecks'
// residuals read as their int8 copies, where the simulation adds them in float). So the bound is relative: the GPU's INT8 output
// must be nearer the simulated INT8 output than the simulated INT8 output is to FP32 (the error
// quantisation itself makes), and farther from the FP16 engine's than FP16 is from FP32 (INT8 ran).
// Label "gpu": the GPU tests skip visibly without a CUDA device.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "quant/int8_fixture.hpp"
#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

CudaEngineOptions int8_options(std::shared_ptr<const Int8Calibration> cal) {
  CudaEngineOptions o;
  o.precision = Precision::kInt8;
  o.int8_calibration = std::move(cal);
  o.tactic_cache = "none";
  return o;
}

double rel_l2(const Tensor& a, const Tensor& b) { return test::compare(a, b).rel_l2; }

TEST(CudaEngineInt8, Yolov5nAgainstSimulatedInt8) {
  YOLOCU_REQUIRE_GPU();
  NEED_YOLOV5N(f);
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  YOLOCU_REQUIRE_DATA(zid, "reference/zidane.npz");
  const auto m = std::make_shared<const Model>(f->model);
  const auto cal = std::make_shared<const Int8Calibration>(f->cal);
  CudaEngine g8(m, int8_options(cal));
  CudaEngineOptions ofr = int8_options(cal);
  ofr.int8_residuals = true;
  CudaEngine g8r(m, ofr);  // residuals added from their int8 copies
  CudaEngineOptions o16 = int8_options(nullptr);
  o16.precision = Precision::kFloat16;
  CudaEngine g16(m, o16);
  CpuEngineOptions so;
  so.int8 = cal;
  CpuEngine sim(m, so);
  CpuEngine fp32(m);
  const CudaEngineStats st = g8.stats();
  std::printf("[ yolov5n int8 ] %d INT8 convolutions, %d quantise steps, %zu in float, %d steps, build %.0f ms\n",
              st.int8_convs, st.int8_quantize_steps, st.int8_float_convs.size(), st.steps, st.build_ms);
  for (const std::string& k : st.int8_kernels) std::printf("    %s\n", k.c_str());
  // every convolution but the stem and the Detect head's three (planning: Int8Lowering.*)
  EXPECT_EQ(st.int8_convs, static_cast<int>(cal->convs.size()) - 4);
  EXPECT_EQ(st.int8_quantize_steps, 6);
  EXPECT_EQ(st.int8_concats, 8);
  EXPECT_EQ(st.int8_kernels.size(), static_cast<size_t>(st.int8_convs));
  for (const auto& [what, file] : std::vector<std::pair<std::string, std::string>>{{"bus", bus}, {"zidane", zid}}) {
    const Tensor x = load_npz(file)["input"];
    const Tensor out8 = g8.run_host({x})[0], out16 = g16.run_host({x})[0];
    const Tensor ref8 = sim.run({x})[0], ref32 = fp32.run({x})[0];
    const double gpu_sim = rel_l2(out8, ref8), sim_fp32 = rel_l2(ref8, ref32);
    const double int8_fp16 = rel_l2(out8, out16), fp16_fp32 = rel_l2(out16, ref32);
    std::printf("[ yolov5n int8 %-7s ] rel L2: GPU INT8 vs simulated %.3g, simulated vs FP32 %.3g, GPU INT8 vs FP32 %.3g, "
                "GPU INT8 vs FP16 %.3g, FP16 vs FP32 %.3g\n",
                what.c_str(), gpu_sim, sim_fp32, rel_l2(out8, ref32), int8_fp16, fp16_fp32);
    EXPECT_LT(gpu_sim, sim_fp32) << what;
    // int8 residuals: one rounding more, which the simulation does not make
    const double int8_res_sim = rel_l2(g8r.run_host({x})[0], ref8);
    std::printf("[ yolov5n int8 %-7s ] with int8 residuals: GPU INT8 vs simulated %.3g\n", what.c_str(), int8_res_sim);
    EXPECT_LT(int8_res_sim, sim_fp32) << what;
    EXPECT_GT(int8_res_sim, gpu_sim) << what;
    EXPECT_GT(int8_fp16, 2 * fp16_fp32) << what;
    // the same input again: the same bits (graph replay, the same kernels)
    const Tensor again = g8.run_host({x})[0];
    EXPECT_EQ(std::memcmp(again.data(), out8.data(), out8.nbytes()), 0) << what;
  }
}

// Checked before any device is touched: runs without a GPU too.
TEST(CudaEngineInt8, NeedsACalibration) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  const auto m = std::make_shared<const Model>(load_onnx(path));
  std::string msg;
  EXPECT_EQ(test::code_of([&] { CudaEngine e(m, int8_options(nullptr)); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("needs int8_calibration"), std::string::npos) << msg;
}

}  // namespace
}  // namespace yolocu

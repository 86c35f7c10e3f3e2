// The fused YOLOv8 / YOLO11 Detect tail on the GPU (CudaEngineOptions::fuse_v8_tail, on by default:
// one kernel, steps/v8_tail_kernel.cu) against the CPU engine's node-by-node graph: FP32 relative L2
// <= 1e-5 (the engines' bound for the v8 exports: no TF32, the same fp32 tail math as the host
// instantiation that test_engine's V8Tail cases hold to 1e-6 of the CPU graph), FP16 <= 5e-3 (the
// convolutions' fp16 outputs). On yolov8n / yolo11n (scripts/v8/make_refs.sh; skips without them)
// and on synthetic heads whose class counts and level sizes take the kernel's other tile sizes and
// partial tiles. Counts the launches the fusion saves. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "engine/v8_synth.hpp"
#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

CudaEngineOptions tail_options(Precision p, int max_batch, bool fuse) {
  CudaEngineOptions o;
  o.precision = p;
  o.max_batch = max_batch;
  o.tactic_cache = "none";
  o.fuse_v8_tail = fuse;
  return o;
}

void expect_close(const Tensor& got, const Tensor& ref, double bound, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  const test::Diff d = test::compare(got, ref);
  std::printf("[ v8 tail  ] %-44s rel L2 %.3g  max abs %.3g (bound %.0e)\n", what.c_str(), d.rel_l2, d.max_abs, bound);
  EXPECT_LE(d.rel_l2, bound) << what << ": max abs " << d.max_abs;
}

// The fused engine at both precisions against the CPU engine on `x`; the unfused engine builds
// too, and the fused one must launch fewer kernels per run and replace the 24 tail nodes.
void fused_vs_cpu(const std::shared_ptr<const Model>& model, const std::vector<Tensor>& inputs, int max_batch,
                  const std::string& tag) {
  CpuEngine cpu(model);
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    const bool fp32 = p == Precision::kFloat32;
    CudaEngine fused(model, tail_options(p, max_batch, true));
    CudaEngine plain(model, tail_options(p, max_batch, false));
    const std::string t = tag + (fp32 ? " fp32" : " fp16");
    EXPECT_EQ(fused.stats().fused_tail_nodes, 24) << t;
    EXPECT_EQ(plain.stats().fused_tail_nodes, 0) << t;
    EXPECT_LT(fused.stats().kernels_per_run, plain.stats().kernels_per_run) << t;
    std::printf("[ v8 tail  ] %-44s kernels per run %d fused, %d unfused\n", t.c_str(), fused.stats().kernels_per_run,
                plain.stats().kernels_per_run);
    for (const Tensor& x : inputs) {
      const std::string what = t + " b" + std::to_string(x.dim(0));
      const Tensor ref = cpu.run({x})[0];
      expect_close(fused.run_host({x})[0], ref, fp32 ? 1e-5 : 5e-3, what + " fused vs CPU");
      if (fp32) expect_close(plain.run_host({x})[0], ref, 1e-5, what + " unfused vs CPU");
    }
  }
}

class CudaV8Tail : public ::testing::TestWithParam<std::string> {};

// The static export at batch 1; the dynamic one at batch 4 and 1 on one engine, and at 480x640.
TEST_P(CudaV8Tail, FusedTailMatchesCpuEngine) {
  YOLOCU_REQUIRE_GPU();
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(path, name + ".onnx");
  YOLOCU_REQUIRE_V8(dyn, name + "_dyn.onnx");
  YOLOCU_REQUIRE_V8(bus, name + "_bus.npz");
  YOLOCU_REQUIRE_V8(b4, name + "_batch4.npz");
  YOLOCU_REQUIRE_V8(rect, name + "_rect.npz");
  fused_vs_cpu(std::make_shared<const Model>(load_onnx(path)), {load_npz(bus)["input"]}, 1, name + " static");
  auto model = std::make_shared<const Model>(load_onnx(dyn));
  fused_vs_cpu(model, {load_npz(b4)["input"], load_npz(bus)["input"]}, 4, name + " dynamic max 4");
  fused_vs_cpu(model, {load_npz(rect)["input"]}, 1, name + " dynamic 480x640");
}

INSTANTIATE_TEST_SUITE_P(Exports, CudaV8Tail, ::testing::Values("yolov8n", "yolo11n"));

// Synthetic heads: 80 classes (tile 32), 3 classes at level sizes no multiple of the tile, 500
// classes (tile 16), 7 classes at batch 3.
TEST(CudaV8TailSynthetic, FusedTailMatchesCpuEngine) {
  YOLOCU_REQUIRE_GPU();
  struct Case {
    int64_t nc, h, w, batch;
  };
  for (const Case& c : {Case{80, 64, 64, 1}, Case{3, 72, 40, 2}, Case{500, 48, 80, 1}, Case{7, 100, 36, 3}}) {
    test::SynthV8 o;
    o.nc = c.nc;
    o.h = c.h;
    o.w = c.w;
    const std::string tag = "synthetic nc " + std::to_string(c.nc) + " " + std::to_string(c.h) + "x" + std::to_string(c.w);
    SCOPED_TRACE(tag);
    fused_vs_cpu(test::synth_v8_head(o), {test::synth_detail::weights({c.batch, 3, c.h, c.w}, 5, 1.f)}, static_cast<int>(c.batch), tag);
  }
}

}  // namespace
}  // namespace yolocu

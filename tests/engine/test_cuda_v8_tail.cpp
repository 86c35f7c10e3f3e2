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
#include "engine/fusion_check.hpp"
#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

const test::Fusion& fusion() {
  static const test::Fusion f{"[ v8 tail  ]", [](CudaEngineOptions& o, bool on) { o.fuse_v8_tail = on; },
      [](const CudaEngineStats& s, bool fused, const std::string& tag) {
        EXPECT_EQ(s.fused_tail_nodes, fused ? 24 : 0) << tag;  // the 24 tail nodes
      }};
  return f;
}

CudaEngineOptions tail_options(Precision p, int max_batch, bool fuse) {
  return test::fusion_options(fusion(), p, max_batch, fuse);
}

void expect_close(const Tensor& got, const Tensor& ref, double bound, const std::string& what) {
  test::expect_close(fusion(), got, ref, bound, what);
}

void fused_vs_cpu(const std::shared_ptr<const Model>& model, const std::vector<Tensor>& inputs, int max_batch,
                  const std::string& tag) {
  test::fused_vs_cpu(fusion(), model, inputs, max_batch, tag);
}

class CudaV8Tail : public ::testing::TestWithParam<std::string> {};

// The static export at batch 1 (scripts/gpu/bundle.sh v8's static set).
TEST_P(CudaV8Tail, StaticExportMatchesCpuEngine) {
  YOLOCU_REQUIRE_GPU();
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(path, name + ".onnx");
  YOLOCU_REQUIRE_V8(bus, name + "_bus.npz");
  fused_vs_cpu(std::make_shared<const Model>(load_onnx(path)), {load_npz(bus)["input"]}, 1, name + " static");
}

// The dynamic export at batch 4 and 1 on one engine, and at 480x640 (V8_SET=dynamic).
TEST_P(CudaV8Tail, DynamicExportMatchesCpuEngine) {
  YOLOCU_REQUIRE_GPU();
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(dyn, name + "_dyn.onnx");
  YOLOCU_REQUIRE_V8(bus, name + "_bus.npz");
  YOLOCU_REQUIRE_V8(b4, name + "_batch4.npz");
  auto model = std::make_shared<const Model>(load_onnx(dyn));
  fused_vs_cpu(model, {load_npz(b4)["input"], load_npz(bus)["input"]}, 4, name + " dynamic max 4");
  fused_vs_cpu(model, {test::synth_detail::weights({1, 3, 480, 640}, 7, 1.f)}, 1, name + " dynamic 480x640");
}

INSTANTIATE_TEST_SUITE_P(Exports, CudaV8Tail, ::testing::Values("yolov8n", "yolo11n"));

// Synthetic heads (the fused engine only: no kernel count, fewer builds under compute-sanitizer).
struct SynthCase {
  int64_t nc, h, w, batch;
  bool concatenated;
};

void synthetic_vs_cpu(const SynthCase& c) {
  test::SynthV8 o;
  o.nc = c.nc;
  o.h = c.h;
  o.w = c.w;
  o.concatenated = c.concatenated;
  const std::string tag = "synthetic nc " + std::to_string(c.nc) + " " + std::to_string(c.h) + "x" + std::to_string(c.w) +
                          (c.concatenated ? " concat" : "");
  SCOPED_TRACE(tag);
  const std::shared_ptr<const Model> model = test::synth_v8_head(o);
  const Tensor x = test::synth_detail::weights({c.batch, 3, c.h, c.w}, 5, 1.f);
  const Tensor ref = CpuEngine(model).run({x})[0];
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    const bool fp32 = p == Precision::kFloat32;
    CudaEngine fused(model, tail_options(p, static_cast<int>(c.batch), true));
    EXPECT_EQ(fused.stats().fused_tail_nodes, c.concatenated ? 21 : 24) << tag;
    expect_close(fused.run_host({x})[0], ref, fp32 ? 1e-5 : 5e-3, tag + (fp32 ? " fp32" : " fp16") + " fused vs CPU");
  }
}

// 80 classes (tile 32), 3 classes at level sizes no multiple of the tile, 500 classes (tile 16),
// 7 classes at batch 3.
TEST(CudaV8TailSynthetic, SeparateConvolutions) {
  YOLOCU_REQUIRE_GPU();
  for (const SynthCase& c : {SynthCase{80, 64, 64, 1, false}, SynthCase{3, 72, 40, 2, false},
                             SynthCase{500, 48, 80, 1, false}, SynthCase{7, 100, 36, 3, false}})
    synthetic_vs_cpu(c);
}

// The concatenated form of older exports: one source per level (the Concat of its two
// convolutions), class channels from 64 on.
TEST(CudaV8TailSynthetic, ConcatenatedForm) {
  YOLOCU_REQUIRE_GPU();
  for (const SynthCase& c : {SynthCase{80, 64, 96, 2, true}, SynthCase{5, 72, 40, 1, true}}) synthetic_vs_cpu(c);
}

}  // namespace
}  // namespace yolocu

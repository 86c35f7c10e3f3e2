// The fused C2PSA attention on the GPU (CudaEngineOptions::fuse_attention, on by default: one
// kernel per attention block, steps/attention_kernel.cu) against the CPU engine's node-by-node
// graph: FP32 relative L2 <= 1e-5 (the engines' bound for the v8 exports: no TF32, the same fp32
// attention math as the host instantiation that test_engine's Attention cases hold to 1e-6 of the
// CPU graph), FP16 <= 5e-3 (fp16 activations: q, k, v and x stored in fp16, scores and sums in
// fp32). On yolo11n (scripts/v8/make_refs.sh; skips without it) and on synthetic blocks whose token
// counts and head sizes take partial query blocks, several heads and odd dims. Counts the launches
// the fusion saves. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "engine/attention_synth.hpp"
#include "engine/fusion_check.hpp"
#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

const test::Fusion& fusion() {
  static const test::Fusion f{"[ attention ]", [](CudaEngineOptions& o, bool on) { o.fuse_attention = on; },
      [](const CudaEngineStats& s, bool fused, const std::string& tag) {
        EXPECT_EQ(s.fused_attention, fused ? 1 : 0) << tag;
        if (fused) {
          EXPECT_EQ(s.fused_attention_nodes, 10) << tag;  // yolo11n's one block: 10 nodes
        }
      }};
  return f;
}

CudaEngineOptions attention_options(Precision p, int max_batch, bool fuse) {
  return test::fusion_options(fusion(), p, max_batch, fuse);
}

void expect_close(const Tensor& got, const Tensor& ref, double bound, const std::string& what) {
  test::expect_close(fusion(), got, ref, bound, what);
}

void fused_vs_cpu(const std::shared_ptr<const Model>& model, const std::vector<Tensor>& inputs, int max_batch,
                  const std::string& tag) {
  test::fused_vs_cpu(fusion(), model, inputs, max_batch, tag);
}

// The static export at batch 1 (scripts/gpu/bundle.sh v8's static set).
TEST(CudaAttention, Yolo11nStaticMatchesCpuEngine) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_V8(path, "yolo11n.onnx");
  YOLOCU_REQUIRE_V8(bus, "yolo11n_bus.npz");
  fused_vs_cpu(std::make_shared<const Model>(load_onnx(path)), {load_npz(bus)["input"]}, 1, "yolo11n static");
}

// The dynamic export at batch 4 and 1 on one engine (V8_SET=dynamic).
TEST(CudaAttention, Yolo11nDynamicMatchesCpuEngine) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_V8(dyn, "yolo11n_dyn.onnx");
  YOLOCU_REQUIRE_V8(bus, "yolo11n_bus.npz");
  YOLOCU_REQUIRE_V8(b4, "yolo11n_batch4.npz");
  fused_vs_cpu(std::make_shared<const Model>(load_onnx(dyn)), {load_npz(b4)["input"], load_npz(bus)["input"]}, 4,
               "yolo11n dynamic max 4");
}

// Synthetic blocks (the fused engine only: fewer builds under compute-sanitizer).
struct SynthCase {
  int64_t heads, kd, hd, h, w, batch;
  bool scale_after, pe;
};

void synthetic_vs_cpu(const SynthCase& c) {
  test::SynthAttention o;
  o.heads = c.heads;
  o.key_dim = c.kd;
  o.head_dim = c.hd;
  o.h = c.h;
  o.w = c.w;
  o.scale_after = c.scale_after;
  o.pe = c.pe;
  const std::string tag = "synthetic " + std::to_string(c.heads) + " heads kd " + std::to_string(c.kd) + " hd " +
                          std::to_string(c.hd) + " " + std::to_string(c.h) + "x" + std::to_string(c.w) + " b" +
                          std::to_string(c.batch);
  SCOPED_TRACE(tag);
  const std::shared_ptr<const Model> model = test::synth_attention(o);
  const Tensor x = test::synth_detail::weights({c.batch, o.channels, c.h, c.w}, 5, 1.f);
  const Tensor ref = CpuEngine(model).run({x})[0];
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    const bool fp32 = p == Precision::kFloat32;
    CudaEngine fused(model, attention_options(p, static_cast<int>(c.batch), true));
    EXPECT_EQ(fused.stats().fused_attention, 1) << tag;
    expect_close(fused.run_host({x})[0], ref, fp32 ? 1e-5 : 5e-3, tag + (fp32 ? " fp32" : " fp16") + " fused vs CPU");
  }
}

// Token counts under a warp and no multiple of the query block, 4 heads with odd dims at batch 3,
// the module's scale order, no pe.
TEST(CudaAttentionSynthetic, PartialBlocks) {
  YOLOCU_REQUIRE_GPU();
  for (const SynthCase& c : {SynthCase{2, 8, 16, 5, 7, 2, false, true}, SynthCase{4, 5, 7, 3, 11, 3, false, true},
                             SynthCase{3, 16, 40, 1, 5, 1, true, true}, SynthCase{2, 33, 65, 9, 8, 1, false, false}})
    synthetic_vs_cpu(c);
}

// The tensor-core kernel (fp16, dims multiples of 16): 63 tokens (a partial tile of queries and of
// keys), 169 tokens (a block whose last warp has no query), two heads.
TEST(CudaAttentionSynthetic, TensorCoreTiles) {
  YOLOCU_REQUIRE_GPU();
  for (const SynthCase& c : {SynthCase{2, 16, 32, 7, 9, 3, false, true}, SynthCase{2, 32, 64, 13, 13, 2, true, true},
                             SynthCase{1, 16, 16, 1, 1, 1, false, false}})
    synthetic_vs_cpu(c);
}

// yolo11n's head sizes at 400 tokens (20 x 20), one head, batch 2.
TEST(CudaAttentionSynthetic, Yolo11nSizes) {
  YOLOCU_REQUIRE_GPU();
  synthetic_vs_cpu(SynthCase{1, 32, 64, 20, 20, 2, false, true});
}

}  // namespace
}  // namespace yolocu

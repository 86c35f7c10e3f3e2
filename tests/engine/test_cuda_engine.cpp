// GPU engine vs the CPU executor (the oracle): FP32 within rel L2 1e-5, FP16 within 5e-3 of FP32,
// fp16 model FP16 path within 1e-2 of the CPU; repeated runs bit-identical; argument errors.
// Label "gpu": every test skips visibly without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include "engine/cuda/tactics/tuner.hpp"
#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

std::shared_ptr<const Model> load(const std::string& path) { return std::make_shared<Model>(load_onnx(path)); }

Tensor random_input(int64_t batch, uint32_t seed) {
  Tensor t(DType::kFloat32, {batch, 3, 640, 640});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  return t;
}

// Stacks 1x3xHxW images into one batch.
Tensor stack(const std::vector<Tensor>& imgs) {
  const int64_t per = imgs[0].numel();
  Tensor t(DType::kFloat32, {static_cast<int64_t>(imgs.size()), 3, imgs[0].dim(2), imgs[0].dim(3)});
  for (size_t i = 0; i < imgs.size(); ++i)
    std::memcpy(t.data_as<float>() + static_cast<int64_t>(i) * per, imgs[i].data(), static_cast<size_t>(per) * 4);
  return t;
}

std::vector<Tensor> cpu_run(const std::shared_ptr<const Model>& m, const Tensor& x) {
  CpuEngine cpu(m);
  const DType in = m->graph.inputs[0].dtype;
  std::vector<Tensor> outs = cpu.run({x.dtype() == in ? x : cast_tensor(x, in)});
  for (auto& o : outs)
    if (o.dtype() != DType::kFloat32) o = cast_tensor(o, DType::kFloat32);
  return outs;
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& ref, double max_rel_l2,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), ref[i].shape()) << what << " output " << i;
    const test::Diff d = test::compare(got[i], ref[i]);
    std::printf("[ %-44s ] output %zu %s: rel L2 %.3g, max |diff| %.3g (limit rel L2 %.1g)\n", what.c_str(), i,
                shape_str(got[i].shape()).c_str(), d.rel_l2, d.max_abs, max_rel_l2);
    EXPECT_LE(d.rel_l2, max_rel_l2) << what << " output " << i << ": max |diff| " << d.max_abs;
  }
}

bool bit_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].nbytes() != b[i].nbytes() || std::memcmp(a[i].data(), b[i].data(), a[i].nbytes()) != 0) return false;
  return true;
}

CudaEngineOptions opts(Precision p, int max_batch = 1, bool graphs = true) {
  CudaEngineOptions o;
  o.precision = p;
  o.max_batch = max_batch;
  o.cuda_graphs = graphs;
  o.tactic_cache = "none";  // tuned in this process (the tests of the cache name their own file)
  return o;
}

void print_stats(const std::string& what, const CudaEngine& e) {
  const CudaEngineStats s = e.stats();
  std::printf("[ %-44s ] build %.0f ms, %d steps, %d kernels/run, %d/%d convs fused (+%d residual), arena %.1f MiB "
              "(naive %.1f), weights %.1f MiB, workspace %.1f MiB; tactics: %d layers, %d from cache (%d plans restored), %d from this "
              "process, %d tuned (%d candidates, %d rejected) in %.0f ms%s%s\n",
              what.c_str(), s.build_ms, s.steps, s.kernels_per_run, s.fused_convs, s.convs, s.fused_residuals,
              s.activation_bytes / 1048576.0, s.naive_bytes / 1048576.0, s.weight_bytes / 1048576.0,
              s.workspace_bytes / 1048576.0, s.tactic_layers, s.tactic_cache_hits, s.tactic_plans_restored, s.tactic_memo_hits, s.tactics_tuned,
              s.tactic_candidates, s.tactic_rejected, s.tune_ms, s.space_to_depth_stem ? ", space-to-depth stem" : "",
              s.direct_stem_batches.empty() ? "" : ", direct stem");
}

// FP32 (no TF32) against the CPU executor, batch 1: reference images and a random input.
void fp32_vs_cpu(const std::string& model_file, double tol) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/" + model_file);
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  YOLOCU_REQUIRE_DATA(zid, "reference/zidane.npz");
  const auto m = load(path);
  CudaEngine gpu(m, opts(Precision::kFloat32));
  print_stats(model_file + " fp32", gpu);
  const std::vector<std::pair<std::string, Tensor>> inputs = {
      {"bus", load_npz(bus)["input"]}, {"zidane", load_npz(zid)["input"]}, {"random", random_input(1, 7)}};
  for (const auto& in : inputs) expect_close(gpu.run_host({in.second}), cpu_run(m, in.second), tol, model_file + " fp32 " + in.first);
}

TEST(CudaEngine, Fp32MatchesCpuYolov5n) { fp32_vs_cpu("yolov5n.onnx", 1e-5); }
TEST(CudaEngine, Fp32MatchesCpuYolov5nDynBatch1) { fp32_vs_cpu("yolov5n_dyn.onnx", 1e-5); }
TEST(CudaEngine, Fp32MatchesCpuRawHeads) { fp32_vs_cpu("yolov5n_raw_heads.onnx", 1e-5); }
// The CPU engine returns this model's output as fp16 (its declared type): that rounding (2^-11
// relative) dominates the difference.
TEST(CudaEngine, Fp32MatchesCpuFp16Model) { fp32_vs_cpu("yolov5s_random_fp16.onnx", 1e-3); }

TEST(CudaEngine, Fp16ModelFp16PathMatchesCpu) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5s_random_fp16.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  const auto m = load(path);
  CudaEngine gpu(m, opts(Precision::kFloat16));
  print_stats("yolov5s_random_fp16 fp16", gpu);
  for (const Tensor& x : {load_npz(bus)["input"], random_input(1, 11)}) {
    expect_close(gpu.run_host({x}), cpu_run(m, x), 1e-2, "yolov5s_random_fp16 fp16 vs cpu");
    // fp16 host input accepted too, same result (the engine rounds float32 input to fp16 anyway).
    EXPECT_TRUE(bit_identical(gpu.run_host({x}), gpu.run_host({cast_tensor(x, DType::kFloat16)})));
  }
}

TEST(CudaEngine, Fp16CloseToFp32) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  YOLOCU_REQUIRE_DATA(zid, "reference/zidane.npz");
  const auto m = load(path);
  CudaEngine g32(m, opts(Precision::kFloat32));
  CudaEngine g16(m, opts(Precision::kFloat16));
  print_stats("yolov5n fp16", g16);
  for (const Tensor& x : {load_npz(bus)["input"], load_npz(zid)["input"], random_input(1, 3)})
    expect_close(g16.run_host({x}), g32.run_host({x}), 5e-3, "yolov5n fp16 vs fp32");
}

TEST(CudaEngine, DynamicBatch8AndSmallerBatches) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  YOLOCU_REQUIRE_DATA(zid, "reference/zidane.npz");
  const auto m = load(path);
  const Tensor b = load_npz(bus)["input"], z = load_npz(zid)["input"];
  const Tensor r = random_input(6, 5);
  std::vector<Tensor> imgs = {b, z};
  for (int i = 0; i < 6; ++i)
    imgs.push_back(Tensor::view(DType::kFloat32, {1, 3, 640, 640}, const_cast<float*>(r.data_as<float>()) + i * 3 * 640 * 640).clone());
  const Tensor x8 = stack(imgs);
  const Tensor x3 = stack({z, imgs[2], b});
  CudaEngine g32(m, opts(Precision::kFloat32, 8));
  print_stats("yolov5n_dyn fp32 max_batch 8", g32);
  expect_close(g32.run_host({x8}), cpu_run(m, x8), 1e-5, "yolov5n_dyn fp32 batch 8");
  expect_close(g32.run_host({x3}), cpu_run(m, x3), 1e-5, "yolov5n_dyn fp32 batch 3 (max 8)");
  CudaEngine g16(m, opts(Precision::kFloat16, 8));
  expect_close(g16.run_host({x8}), g32.run_host({x8}), 5e-3, "yolov5n_dyn fp16 vs fp32 batch 8");
  expect_close(g16.run_host({x3}), g32.run_host({x3}), 5e-3, "yolov5n_dyn fp16 vs fp32 batch 3");
  // Batch 3 was not tuned (1 and 8 were): its tactics were derived from batch 8's, built on the pool
  // (Tuner::derive_many), once per engine.
  for (const CudaEngine* e : {&g32, &g16}) {
    EXPECT_EQ(e->stats().derived_batches, 1);
    EXPECT_GT(e->stats().derive_ms, 0.0);
    std::printf("derived batch 3: %.0f ms\n", e->stats().derive_ms);
  }
}

// pad_batches, max_batch 8 (tuned 1 and 8): the engine runs the anchors 1, 2, 4 and 8 only.
// prepare() of every size 1..8 derives 2 and 4 in one call; a run of 3 images executes batch 4 and
// of 5 batch 8; their outputs equal the CPU engine's (FP32) and, bit for bit, the first rows of the
// same engine's run of the anchor size (the padded rows change nothing), FP32 and FP16 (direct stem).
TEST(CudaEngine, PadBatchesRunsOnlyTheAnchorSizes) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  YOLOCU_REQUIRE_DATA(zid, "reference/zidane.npz");
  const auto m = load(path);
  const Tensor r = random_input(6, 9);
  std::vector<Tensor> imgs = {load_npz(bus)["input"], load_npz(zid)["input"]};
  for (int i = 0; i < 6; ++i)
    imgs.push_back(Tensor::view(DType::kFloat32, {1, 3, 640, 640}, const_cast<float*>(r.data_as<float>()) + i * 3 * 640 * 640).clone());
  auto first = [&](size_t n) { return stack(std::vector<Tensor>(imgs.begin(), imgs.begin() + static_cast<long>(n))); };
  // rows [0, n) of `big` (outputs at a larger batch) equal `small` byte for byte
  auto leading_rows_equal = [](const std::vector<Tensor>& small, const std::vector<Tensor>& big) {
    if (small.size() != big.size()) return false;
    for (size_t i = 0; i < small.size(); ++i)
      if (small[i].nbytes() > big[i].nbytes() || std::memcmp(small[i].data(), big[i].data(), small[i].nbytes()) != 0)
        return false;
    return true;
  };
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    CudaEngineOptions o = opts(p, 8);
    o.pad_batches = true;
    CudaEngine e(m, o);
    EXPECT_EQ(e.stats().anchors, (std::vector<int>{1, 2, 4, 8}));
    e.prepare({1, 2, 3, 4, 5, 6, 7, 8});
    EXPECT_EQ(e.stats().derived_batches, 2) << "sizes 2 and 4, derived at once";
    e.prepare({3, 4});  // ready: nothing more
    EXPECT_EQ(e.stats().derived_batches, 2);
    EXPECT_EQ(e.run_batch(3), 4);
    EXPECT_EQ(e.run_batch(5), 8);
    EXPECT_EQ(e.run_batch(8), 8);
    const std::string prec = p == Precision::kFloat32 ? "fp32" : "fp16";
    for (size_t n : {3u, 5u}) {
      const size_t anchor = static_cast<size_t>(e.run_batch(static_cast<int>(n)));
      const std::vector<Tensor> padded = e.run_host({first(n)});
      ASSERT_EQ(padded[0].dim(0), static_cast<int64_t>(n));
      const std::vector<Tensor> full = e.run_host({first(anchor)});
      EXPECT_TRUE(leading_rows_equal(padded, full)) << prec << ": batch " << n << " padded to " << anchor
                                                    << " differs from the first rows of batch " << anchor;
      if (p == Precision::kFloat32)
        expect_close(padded, cpu_run(m, first(n)), 1e-5, "yolov5n_dyn fp32 batch " + std::to_string(n) + " padded");
    }
    EXPECT_EQ(e.stats().padded_images, 1 + 3) << "3 -> 4 and 5 -> 8";
  }
}

TEST(CudaEngine, RepeatedRunsBitIdenticalAndGraphEqualsEager) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  const auto m = load(path);
  const Tensor x = load_npz(bus)["input"];
  for (Precision p : {Precision::kFloat16, Precision::kFloat32}) {
    CudaEngine graph(m, opts(p, 1, true));
    CudaEngine eager(m, opts(p, 1, false));
    const auto a = graph.run_host({x});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(bit_identical(a, graph.run_host({x}))) << "graph replay " << i;
    const auto e = eager.run_host({x});
    EXPECT_TRUE(bit_identical(e, eager.run_host({x})));
    expect_close(a, e, p == Precision::kFloat32 ? 1e-6 : 1e-3, "graph vs eager engine");
    // The forward as 4 graphs (graph_segments): the same kernels in the same order, with the
    // tactics this process chose for the first engine: bit-identical to the one graph.
    CudaEngineOptions o4 = opts(p, 1, true);
    o4.graph_segments = 4;
    CudaEngine segmented(m, o4);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(bit_identical(a, segmented.run_host({x}))) << "4 segments, run " << i;
  }
}

// graph_branches (the default) against one chain, yolov5n at batch 4 and 1 with its tuned sizes:
// the same kernels, the same bits, replay after replay (test_cuda_engine_v8.cpp does the same for
// the v8 / 11 graphs, whose heads branch more).
TEST(CudaEngine, GraphBranchesEqualOneChain) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  const auto m = load(path);
  for (Precision p : {Precision::kFloat16, Precision::kFloat32}) {
    CudaEngineOptions o = opts(p, 4);
    CudaEngine branches(m, o);
    o.graph_branches = false;
    CudaEngine chain(m, o);
    const CudaEngineStats st = branches.stats();
    std::printf("[ graph branches ] yolov5n %s: %d launching steps, longest dependency chain %d (%d were the "
                "workspaces no dependency), %d workspaces\n", p == Precision::kFloat16 ? "fp16" : "fp32",
                st.launching_steps, st.step_depth, st.value_depth, st.workspaces);
    // The head's levels side by side, in FP32 too, where cuDNN's tactics need workspaces (one shared
    // workspace ordered every FP32 step): a workspace of their own for steps side by side, unless
    // one orders nothing the data does not.
    EXPECT_LT(st.step_depth, st.launching_steps);
    EXPECT_LE(st.value_depth, st.step_depth);
    EXPECT_TRUE(st.workspaces > 1 || st.step_depth == st.value_depth) << st.workspaces << " workspace(s)";
    for (int batch : {4, 1}) {
      const Tensor x = random_input(batch, 7 + static_cast<uint32_t>(batch));
      for (int run = 0; run < 4; ++run)
        EXPECT_TRUE(bit_identical(branches.run_host({x}), chain.run_host({x}))) << "batch " << batch << " run " << run;
    }
    EXPECT_EQ(branches.stats().graphs_captured, 2);
    for (const auto& w : branches.stats().warnings) ADD_FAILURE() << w;  // e.g. captured as one chain instead
  }
}

TEST(CudaEngine, DeviceApiOnUserStream) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  const auto m = load(path);
  const Tensor x = load_npz(bus)["input"];
  CudaEngine e(m, opts(Precision::kFloat32));
  ASSERT_EQ(e.num_outputs(), 1);
  EXPECT_EQ(e.output_name(0), "output0");
  EXPECT_EQ(e.output_shape(0, 1), (Shape{1, 25200, 85}));
  EXPECT_EQ(e.output_dtype(0), DType::kFloat32);
  void* d_in = nullptr;
  ASSERT_EQ(cudaMalloc(&d_in, x.nbytes()), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_in, x.data(), x.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  e.run(d_in, 1, s);
  e.run(d_in, 1, s);
  Tensor out(DType::kFloat32, e.output_shape(0, 1));
  ASSERT_EQ(cudaMemcpyAsync(out.data(), e.output(0), out.nbytes(), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  e.run(d_in, 1, nullptr);  // legacy default stream
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(bit_identical({out}, e.run_host({x})));
  cudaStreamDestroy(s);
  cudaFree(d_in);
}

TEST(CudaEngine, StaticBatch1ExportRunsBatched) {
  // export.py's default file has batch 1 baked into its Reshapes; the engine runs it at any batch.
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(dyn, "models/yolov5n_dyn.onnx");
  const auto m = load(path);
  CudaEngine g32(m, opts(Precision::kFloat32, 8));
  const Tensor x3 = random_input(3, 21);
  expect_close(g32.run_host({x3}), cpu_run(load(dyn), x3), 1e-5, "static yolov5n at batch 3 vs CPU (dyn export)");
}

// An engine option against the same engine without it: yolov5n's static export re-batched to max
// batch 8, run at batch 1 (bus.jpg's input) and 3 (random, `seed`), FP32 and FP16. `check` asserts
// on both engines' stats; the outputs agree within `tol32` / `tol16`, FP32 is within 1e-5 of the CPU
// executor, and graph replays are bit-identical.
void option_on_vs_off(const std::string& what, const std::function<void(CudaEngineOptions&)>& turn_off, double tol32,
                       double tol16, uint32_t seed, const std::function<void(const CudaEngine&, const CudaEngine&)>& check) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(dyn, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  const auto m = load(path);
  const Tensor x1 = load_npz(bus)["input"], x3 = random_input(3, seed);
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    const std::string tag = what + (p == Precision::kFloat32 ? " fp32" : " fp16");
    CudaEngineOptions on = opts(p, 8), off = opts(p, 8);
    turn_off(off);
    CudaEngine with(m, on), without(m, off);
    print_stats(tag, with);
    check(with, without);
    EXPECT_LT(with.stats().kernels_per_run, without.stats().kernels_per_run) << tag;
    for (const Tensor* x : {&x1, &x3}) {
      const auto a = with.run_host({*x});
      expect_close(a, without.run_host({*x}), p == Precision::kFloat32 ? tol32 : tol16, tag + ": on vs off");
      if (p == Precision::kFloat32) expect_close(a, cpu_run(load(dyn), *x), 1e-5, tag + " vs CPU");
      for (int i = 0; i < 2; ++i) EXPECT_TRUE(bit_identical(a, with.run_host({*x}))) << tag << ": graph replay " << i;
    }
  }
}

// The fused Detect-tail kernels (CudaEngineOptions::fuse_detect_tail, on by default; the head
// convolutions then store 256 channels) against the node-by-node GPU tail: FP32 rel L2 <= 1e-6 (the
// kernels differ only in (2s)^2 computed as a product instead of powf); FP16 rel L2 <= 1e-3, since
// the padded head convolutions may run another tactic whose fp16 outputs round differently.
TEST(CudaEngine, FusedDetectTail) {
  option_on_vs_off("fused tail", [](CudaEngineOptions& o) { o.fuse_detect_tail = false; }, 1e-6, 1e-3, 5,
                   [](const CudaEngine& fused, const CudaEngine&) { EXPECT_EQ(fused.stats().fused_tail_nodes, 37); });
}

// SPPF as one kernel (CudaEngineOptions::fuse_sppf, on by default) against its three MaxPools and
// Concat: the kernel is bit-identical to them (SppfKernel.*); the layers around it have the same
// signatures in both engines, but each engine chooses its tactics by timing, so the bounds are the
// fused tail's: FP32 rel L2 <= 1e-6, FP16 <= 1e-3. One launch instead of seven (three pools, four
// Concat copies).
TEST(CudaEngine, FusedSppf) {
  option_on_vs_off("fused sppf", [](CudaEngineOptions& o) { o.fuse_sppf = false; }, 1e-6, 1e-3, 9,
                   [](const CudaEngine& fused, const CudaEngine& pools) {
                     EXPECT_EQ(fused.stats().fused_sppf, 1);
                     EXPECT_EQ(pools.stats().fused_sppf, 0);
                     EXPECT_EQ(fused.stats().kernels_per_run + 6, pools.stats().kernels_per_run);
                   });
}

// The direct stem kernel in the engine (CudaEngineOptions::direct_stem; the kernel alone:
// StemConv.*), forced for every batch (YOLOCU_DIRECT_STEM=always: untimed) against the input
// conversion and the stem's tuned tactic: FP16 rel L2 <= 5e-3 at batch 1, 3 (derived) and 8 (the
// stem's outputs round differently, as another tactic's would: the bound of CopyFreeConcat); fewer
// launches per run; graph replays bit-identical; its profile row reads the NCHW input.
TEST(CudaEngine, DirectStem) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  const auto m = load(path);
  CudaEngineOptions on = opts(Precision::kFloat16, 8), off = opts(Precision::kFloat16, 8);
  off.direct_stem = false;
  std::unique_ptr<CudaEngine> direct;
  {
    test::ScopedEnv always("YOLOCU_DIRECT_STEM", "always");
    direct = std::make_unique<CudaEngine>(m, on);
  }
  CudaEngine conversion(m, off);
  print_stats("direct stem fp16", *direct);
  for (const std::string& w : direct->stats().warnings) ADD_FAILURE() << "warning: " << w;
  EXPECT_EQ(direct->stats().direct_stem_batches, (std::vector<int>{1, 8}));
  EXPECT_TRUE(conversion.stats().direct_stem_batches.empty());
  // fewer launches: the conversion and the stem's tactic (one or two kernels) become one
  EXPECT_LT(direct->stats().kernels_per_run, conversion.stats().kernels_per_run);
  const Tensor x1 = load_npz(bus)["input"];
  for (const Tensor& x : {x1, random_input(3, 41), random_input(8, 42)}) {
    const auto a = direct->run_host({x});
    expect_close(a, conversion.run_host({x}), 5e-3, "direct stem vs conversion, batch " + std::to_string(x.dim(0)));
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(bit_identical(a, direct->run_host({x}))) << "graph replay " << i;
  }
  const auto layers = direct->profile(8, 2);
  bool found = false;
  for (const LayerTime& l : layers) found = found || l.tactic.find("own direct stem") != std::string::npos;
  EXPECT_TRUE(found) << "no profile row of the direct stem";
}

// The SPPF matcher's small graphs (tests/python/make_op_cases.py, sppf_cases; GpuSteps.SppfPatterns
// checks the plans on the CPU): on the GPU, FP32, each against the CPU engine within 1e-5 (their
// 1x1 convolutions; the pools are exact), fused where the pattern is exact, at opset 13.
TEST(CudaEngine, SppfPatternsMatchCpu) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_OP_CASES(dir, "sppfcases_gpu", "Sppf");
  const std::map<std::string, int> fused = {{"SppfExact", 1},       {"SppfKernel3", 1}, {"SppfMixedKernels", 0},
                                            {"SppfExtraReader", 0}, {"SppfOrder", 0},   {"SppfPoolIsOutput", 0}};
  for (const auto& [name, want] : fused) {
    SCOPED_TRACE(name);
    const std::string d = dir + "/" + name + "_op13";
    const auto m = load(d + "/model.onnx");
    const Tensor x = load_npy(d + "/in0.npy");
    CudaEngine gpu(m, opts(Precision::kFloat32));
    EXPECT_EQ(gpu.stats().fused_sppf, want);
    expect_close(gpu.run_host({x}), cpu_run(m, x), 1e-5, name + " fp32 vs CPU");
  }
}

// Copy-free Concat (CudaEngineOptions::copy_free_concat, on by default): 20 of yolov5n's 24 Concat
// inputs (SPPF's four go to its kernel) are written in place by their producers, whose tactics are tuned for the pitched output
// (every family: cudnn-graph strides, the legacy epilogue writing the slice, the own kernel's pitch).
// Against the engine that copies: FP32 rel L2 <= 1e-5 (the FP32 parity bound), FP16 <= 5e-3 (the
// pitched layers may run other tactics, which round differently: the FP16-vs-FP32 bound of this
// suite); the arena is no larger.
TEST(CudaEngine, CopyFreeConcat) {
  option_on_vs_off("copy-free concat", [](CudaEngineOptions& o) { o.copy_free_concat = false; }, 1e-5, 5e-3, 7,
                   [](const CudaEngine& in_place, const CudaEngine& copies) {
                     EXPECT_EQ(in_place.stats().concat_inputs_in_place, 20);
                     EXPECT_EQ(in_place.stats().concat_inputs_copied, 4);
                     EXPECT_EQ(copies.stats().concat_inputs_in_place, 0);
                     EXPECT_LE(in_place.stats().activation_bytes, copies.stats().activation_bytes);
                   });
}

// The cutlass family (CudaEngineOptions::cutlass_tactics, off by default): an FP16 engine that may
// choose CUTLASS kernels against the default one, yolov5n re-batched to max batch 8 (tuned 1 and 8):
// within 5e-3 (other tactics round differently: the FP16-vs-FP32 bound of this suite), more
// candidates tried, graph replays bit-identical; the layers CUTLASS won are printed.
TEST(CudaEngine, CutlassTactics) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  if (!engine::cutlass_conv_available()) GTEST_SKIP() << "built without CUTLASS";
  const auto m = load(path);
  CudaEngineOptions on = opts(Precision::kFloat16, 8), off = opts(Precision::kFloat16, 8);
  on.cutlass_tactics = true;
  CudaEngine with(m, on), without(m, off);
  print_stats("cutlass tactics fp16", with);
  EXPECT_GT(with.stats().tactic_candidates, without.stats().tactic_candidates);
  for (int batch : {1, 8}) {
    int won = 0;
    for (const auto& l : with.profile(batch, 1))
      if (l.kind == "Conv" && l.tactic.rfind("cutlass", 0) == 0) {
        ++won;
        std::printf("  batch %d: %s -> %s (%.1f us)\n", batch, l.name.c_str(), l.tactic.c_str(), l.ms * 1e3);
      }
    std::printf("[ cutlass tactics ] batch %d: %d layers chose a CUTLASS kernel\n", batch, won);
  }
  const Tensor x = random_input(3, 11);
  const auto a = with.run_host({x});
  expect_close(a, without.run_host({x}), 5e-3, "cutlass tactics vs default fp16");
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(bit_identical(a, with.run_host({x}))) << "graph replay " << i;
}

TEST(CudaEngine, BadArguments) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(dyn, "models/yolov5n_dyn.onnx");
  const auto m = load(path);
  auto expect_code = [](ErrorCode code, const std::function<void()>& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      std::printf("[ %-44s ] %s\n", what, e.what());
      EXPECT_EQ(e.code(), code) << what << ": " << e.what();
    }
  };
  expect_code(ErrorCode::kInvalidArgument, [&] { CudaEngine(nullptr, {}); }, "null model");
  expect_code(ErrorCode::kInvalidArgument, [&] { CudaEngine(m, opts(Precision::kFloat16, 0)); }, "max_batch 0");
  expect_code(ErrorCode::kInvalidArgument, [&] {
    CudaEngineOptions o;
    o.device = 999;
    CudaEngine(m, o);
  }, "device 999");
  expect_code(ErrorCode::kInvalidArgument, [&] {
    CudaEngineOptions o;
    o.graph_segments = 0;
    CudaEngine(m, o);
  }, "graph_segments 0");
  CudaEngine e(load(dyn), opts(Precision::kFloat16, 2));
  void* d_in = nullptr;
  ASSERT_EQ(cudaMalloc(&d_in, 3 * 3 * 640 * 640 * 2), cudaSuccess);
  std::vector<uint16_t> host(16);
  expect_code(ErrorCode::kInvalidArgument, [&] { e.run(nullptr, 1, nullptr); }, "run: null input");
  expect_code(ErrorCode::kInvalidArgument, [&] { e.run(d_in, 3, nullptr); }, "run: batch > max_batch");
  expect_code(ErrorCode::kInvalidArgument, [&] { e.run(d_in, 0, nullptr); }, "run: batch 0");
  expect_code(ErrorCode::kInvalidArgument, [&] { e.run(host.data(), 1, nullptr); }, "run: host pointer");
  expect_code(ErrorCode::kInvalidArgument, [&] { e.run_host({random_input(3, 1)}); }, "run_host: batch 3 > 2");
  expect_code(ErrorCode::kInvalidArgument, [&] { e.run_host({Tensor(DType::kFloat32, {1, 3, 320, 640})}); },
              "run_host: wrong size");
  expect_code(ErrorCode::kInvalidArgument, [&] { e.run_host({Tensor(DType::kUInt8, {1, 3, 640, 640})}); },
              "run_host: uint8");
  expect_code(ErrorCode::kInvalidArgument, [&] { e.output(1); }, "output(1)");
  expect_code(ErrorCode::kInvalidArgument, [&] { e.profile(5, 1); }, "profile batch 5");
  cudaFree(d_in);
  // The engine still works after the rejected calls.
  EXPECT_EQ(e.run_host({random_input(2, 2)})[0].shape(), (Shape{2, 25200, 85}));
}

TEST(CudaEngine, ProfileAndStats) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  CudaEngine e(load(path), opts(Precision::kFloat16));
  const CudaEngineStats s = e.stats();
  EXPECT_EQ(s.convs, 60);
  EXPECT_EQ(s.fused_convs, 57);
  EXPECT_EQ(s.fused_residuals, 7);
  EXPECT_LT(s.activation_bytes, s.naive_bytes);
  EXPECT_NEAR(s.conv_flops_per_image / 1e9, 4.5, 0.6);  // yolov5n: ~4.5 GFLOPs at 640
  EXPECT_TRUE(s.space_to_depth_stem);
  EXPECT_EQ(s.tuned_batches, (std::vector<int>{1}));
  EXPECT_EQ(s.tactic_layers, 60);
  const auto layers = e.profile(1, 3);
  ASSERT_FALSE(layers.empty());
  EXPECT_EQ(layers.front().kind, "Input");
  double total = 0;
  int convs = 0, empty_concats = 0;
  for (const auto& l : layers) {
    EXPECT_GE(l.ms, 0.0) << l.name;
    // A Concat whose inputs were all written in place by their producers moves nothing (the C3
    // blocks' eight); every other step moves bytes.
    // With the direct stem the input row is a placeholder: the stem kernel reads the input, its
    // time and bytes are the stem's row.
    const bool stem_reads_input = l.kind == "Input" && s.direct_stem_batches == std::vector<int>{1};
    if (l.kind == "ConcatNhwc" && l.bytes == 0.0) {
      ++empty_concats;
    } else if (stem_reads_input) {
      EXPECT_EQ(l.bytes, 0.0) << l.name;
      EXPECT_EQ(l.ms, 0.0) << l.name;
    } else {
      EXPECT_GT(l.bytes, 0.0) << l.name;
    }
    if (l.kind == "Conv") {
      ++convs;
      EXPECT_FALSE(l.tactic.empty()) << l.name;
      EXPECT_GT(l.flops, 0.0) << l.name;
    }
    total += l.ms;
  }
  EXPECT_EQ(convs, 60);
  EXPECT_EQ(empty_concats, 8);
  std::printf("profile: %zu layers, %.3f ms total (eager, batch 1)\n", layers.size(), total);
}

// The space-to-depth stem computes the 6x6 stride-2 convolution's sums regrouped: FP32 against the
// CPU engine as every FP32 path (1e-5), FP16 against the plain stem within the FP16 tolerance.
TEST(CudaEngine, SpaceToDepthStem) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  const auto m = load(path);
  const Tensor x = load_npz(bus)["input"], x2 = random_input(2, 9);
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    CudaEngineOptions on = opts(p, 2), off = opts(p, 2);
    off.space_to_depth_stem = false;
    CudaEngine s2d(m, on), plain(m, off);
    EXPECT_TRUE(s2d.stats().space_to_depth_stem);
    EXPECT_FALSE(plain.stats().space_to_depth_stem);
    const std::string tag = p == Precision::kFloat32 ? "fp32" : "fp16";
    for (const Tensor* in : {&x, &x2}) {
      const auto a = s2d.run_host({*in});
      if (p == Precision::kFloat32) expect_close(a, cpu_run(m, *in), 1e-5, "space-to-depth stem fp32 vs CPU");
      expect_close(a, plain.run_host({*in}), p == Precision::kFloat32 ? 1e-5 : 5e-3, "space-to-depth vs plain " + tag);
    }
  }
}

// Every tactic family at a small size (320x320, batch 1 and 2 tuned): the tuner checks and times
// every candidate of cudnn-graph and legacy cuDNN (the run that compute-sanitizer covers), the
// result matches the CPU engine in FP32 and FP32 within the FP16 tolerance in FP16.
TEST(CudaEngine, TacticFamiliesSmall) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(dyn, "models/yolov5n_dyn.onnx");
  const auto m = load(dyn);
  const Tensor x = [] {
    Tensor t(DType::kFloat32, {2, 3, 320, 320});
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    return t;
  }();
  std::vector<Tensor> ref32;
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    CudaEngineOptions o = opts(p, 2);
    o.height = o.width = 320;
    o.max_graph_plans = 24;
    CudaEngine e(m, o);
    print_stats(std::string("yolov5n_dyn 320 ") + (p == Precision::kFloat32 ? "fp32" : "fp16"), e);
    EXPECT_GT(e.stats().tactic_candidates, 0);
    std::map<std::string, int> families;
    for (const auto& l : e.profile(2, 1))
      if (l.kind == "Conv") ++families[l.tactic.substr(0, l.tactic.find(' '))];
    for (const auto& [f, n] : families) std::printf("  %s: %d layers at batch 2\n", f.c_str(), n);
    const auto out = e.run_host({x});
    if (p == Precision::kFloat32) {
      expect_close(out, cpu_run(m, x), 1e-5, "320x320 fp32 vs CPU");
      ref32 = out;
    } else {
      expect_close(out, ref32, 5e-3, "320x320 fp16 vs fp32");
    }
  }
}

// The tactic cache on disk: the first engine tunes and writes it; a second engine loads every
// tactic from it (checked, not timed) and computes bit-identical outputs; a corrupt file, a stale
// entry and another GPU's entries are ignored with a warning (or silently for another GPU) and
// the engine tunes instead.
TEST(CudaEngine, TacticCacheOnDisk) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  const auto m = load(path);
  const Tensor x = load_npz(bus)["input"];
  const std::string file = test::scratch_dir("tactics") + "/tactics_" + std::to_string(::getpid()) + ".json";
  std::remove(file.c_str());
  CudaEngineOptions o = opts(Precision::kFloat16, 4);
  o.tactic_cache = file;
  o.print_warnings = false;
  CudaEngine first(m, o);
  print_stats("cache: first build", first);
  const CudaEngineStats s1 = first.stats();
  EXPECT_EQ(s1.tactic_layers, 120);  // 60 convs x tuned batches {1, 4}
  EXPECT_TRUE(s1.warnings.empty());
  std::FILE* f = std::fopen(file.c_str(), "rb");
  ASSERT_TRUE(f) << "cache file not written: " << file;
  std::fclose(f);
  std::string text;
  {
    std::ifstream in(file, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  size_t plans = 0;
  for (size_t at = text.find("\"plan\""); at != std::string::npos; at = text.find("\"plan\"", at + 1)) ++plans;
  std::printf("cache: %zu of 120 entries carry a serialised plan (%zu bytes of file)\n", plans, text.size());
  EXPECT_GT(plans, 0u) << "no chosen tactic serialised its plan";

  // As a new process would: this process's choices forgotten, every tactic from the file (those
  // with a plan restored from it, not compiled).
  engine::forget_process_tactics();
  CudaEngine second(m, o);
  print_stats("cache: second build", second);
  const CudaEngineStats s2 = second.stats();
  EXPECT_EQ(s2.tactic_cache_hits, 120);
  EXPECT_EQ(s2.tactic_plans_restored, static_cast<int>(plans));
  EXPECT_EQ(s2.tactics_tuned, 0);
  EXPECT_LT(s2.tune_ms, s1.tune_ms);
  std::printf("cache: cold tune %.0f ms (build %.0f ms), warm load %.0f ms (build %.0f ms)\n", s1.tune_ms,
              s1.build_ms, s2.tune_ms, s2.build_ms);
  for (int b : {1, 3, 4}) {
    Tensor xb = random_input(b, 30 + b);
    EXPECT_TRUE(bit_identical(first.run_host({xb}), second.run_host({xb}))) << "batch " << b;
  }
  EXPECT_TRUE(bit_identical(first.run_host({x}), second.run_host({x})));

  // Batch 3 was derived (tuned: 1 and 4) and its plans went into the file: a later start restores
  // them (derived_plans_restored) and computes the same bits.
  EXPECT_EQ(first.stats().derived_batches, 1);
  {
    std::ifstream in(file, std::ios::binary);
    const std::string after((std::istreambuf_iterator<char>(in)), {});
    size_t derived = 0;
    for (size_t at = after.find("|derived|b3\""); at != std::string::npos; at = after.find("|derived|b3\"", at + 1))
      ++derived;
    std::printf("cache: %zu derived entries of batch 3 in the file\n", derived);
    EXPECT_GT(derived, 0u) << "no derived plan of batch 3 in the file";
  }
  engine::forget_process_tactics();
  CudaEngine third(m, o);
  const Tensor x3 = random_input(3, 33);
  EXPECT_TRUE(bit_identical(first.run_host({x3}), third.run_host({x3}))) << "derived batch 3 from the file's plans";
  EXPECT_EQ(third.stats().derived_batches, 1);
  EXPECT_GT(third.stats().derived_plans_restored, 0);
  std::printf("cache: derived batch 3 %.0f ms (first), %.0f ms with %d plans restored (later start)\n",
              first.stats().derive_ms, third.stats().derive_ms, third.stats().derived_plans_restored);

  // Corrupt: ignored with a warning naming the file.
  {
    std::FILE* w = std::fopen(file.c_str(), "wb");
    std::fputs("{\"format\": \"yolocu-tactic-cache\", \"version\": 1, \"devices\": {", w);
    std::fclose(w);
    CudaEngine e(m, o);
    ASSERT_FALSE(e.stats().warnings.empty());
    std::printf("corrupt cache: %s\n", e.stats().warnings.front().c_str());
    EXPECT_NE(e.stats().warnings.front().find(file), std::string::npos);
    EXPECT_EQ(e.stats().tactic_cache_hits, 0);
    EXPECT_TRUE(bit_identical(first.run_host({x}), e.run_host({x})));
  }
}

}  // namespace
}  // namespace yolocu

// Channel views on the GPU (CudaEngineOptions::channel_views):
// - the tactics of a layer whose input and residual are channel views (ConvProblem::xp / rp: a
//   C2f's Split output, a bottleneck's output inside the Concat's buffer) against a direct
//   convolution on the host: every legacy cuDNN algorithm and cuDNN graph engine that accepts the
//   strides, and the "packin" wrapper (packed copies, then a tactic of the packed layer); the
//   channels around the output's slice stay untouched; the other families offer nothing;
// - a synthetic C2f (1 and 2 bottlenecks, shortcut on and off) and YOLOv8n / YOLO11n with channel
//   views against the same engines without them, the CPU engine and ultralytics' outputs; the
//   tactic cache restores the packed-input wrappers it chose.
// Tolerances: FP16 tactics as test_conv_kernels.cpp (rel L2 <= 2e-3, |d| <= 1e-2 * max(1, |ref|));
// FP32 rel L2 <= 1e-5 (reordered fp32 sums). Engines: FP32 within 1e-5 of the CPU engine and of
// ultralytics, FP16 within 5e-3 (the bound of CopyFreeConcat: other tactics round differently).
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/c2f_synth.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/tuner.hpp"
#include "test_util.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

using engine::ConvBuffers;
using engine::ConvProblem;
using engine::TacticPtr;

// Host values (rounded to fp16 when half) and their device copy in the activation dtype.
struct DevBuf {
  std::vector<float> host;
  void* dev = nullptr;
  DevBuf(size_t n, uint32_t seed, float lo, float hi, bool half) : host(n) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<__half> h(half ? n : 0);
    for (size_t i = 0; i < n; ++i) {
      host[i] = lo == hi ? lo : u(rng);
      if (half) {
        h[i] = __float2half_rn(host[i]);
        host[i] = __half2float(h[i]);
      }
    }
    EXPECT_EQ(cudaMalloc(&dev, std::max<size_t>(n, 1) * (half ? 2 : 4)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(dev, half ? static_cast<const void*>(h.data()) : host.data(), n * (half ? 2 : 4),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DevBuf() { cudaFree(dev); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  std::vector<float> read(bool half) const {
    std::vector<float> out(host.size());
    if (half) {
      std::vector<__half> h(host.size());
      EXPECT_EQ(cudaMemcpy(h.data(), dev, h.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < h.size(); ++i) out[i] = __half2float(h[i]);
    } else {
      EXPECT_EQ(cudaMemcpy(out.data(), dev, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return out;
  }
};

// A C2f-like layer: x is channels [x_off, x_off + c) of an xp-channel buffer, the residual channels
// [r_off, r_off + k) of an rp-channel one, y channels [y_off, y_off + k) of a yp-channel one (0:
// packed).
struct Case {
  int n, c, hw, k, r;
  int xp, x_off, rp, r_off, yp, y_off;
  bool residual;
};

ConvProblem problem_of(const Case& cs, bool half) {
  ConvProblem pb;
  pb.n = cs.n, pb.c = cs.c, pb.h = pb.w = cs.hw, pb.k = cs.k, pb.r = pb.s = cs.r;
  pb.p = pb.q = cs.hw, pb.pad_h = pb.pad_w = cs.r / 2, pb.half = half;
  pb.bias = pb.silu = true, pb.residual = cs.residual;
  pb.xp = cs.xp, pb.rp = cs.residual ? cs.rp : 0, pb.yp = cs.yp;
  return pb;
}

// Runs `t` on the case's buffers and compares with a direct convolution on the host.
void check_tactic(const Case& cs, bool half, const engine::ConvTactic& t, cudnnHandle_t cudnn, void* ws,
                  size_t ws_bytes) {
  const ConvProblem pb = problem_of(cs, half);
  const std::string what = t.id() + " on " + pb.signature();
  const size_t px = size_t(cs.n) * cs.hw * cs.hw;
  const int xp = pb.x_pitch(), rp = pb.r_pitch(), yp = pb.y_pitch();
  DevBuf x(px * xp, 11, -1.f, 1.f, half), w(size_t(cs.k) * cs.r * cs.r * cs.c, 12, -0.2f, 0.2f, half);
  DevBuf bias(size_t(cs.k), 13, -0.3f, 0.3f, false), res(px * rp, 14, -1.f, 1.f, half);
  DevBuf y(px * yp, 15, -7.f, -7.f, half);
  const size_t es = half ? 2 : 4;
  ConvBuffers b;
  b.x = static_cast<uint8_t*>(x.dev) + size_t(cs.x_off) * es;
  b.w = w.dev;
  b.bias = static_cast<const float*>(bias.dev);
  b.residual = cs.residual ? static_cast<uint8_t*>(res.dev) + size_t(cs.r_off) * es : nullptr;
  b.y = static_cast<uint8_t*>(y.dev) + size_t(cs.y_off) * es;
  b.ws = ws;
  b.ws_bytes = ws_bytes;
  ASSERT_LE(t.workspace(), ws_bytes) << what;
  t.run(cudnn, b, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  const std::vector<float> got = y.read(half);
  double sq = 0, sq_ref = 0, max_d = 0, max_ref = 0;
  size_t touched = 0;
  for (size_t pix = 0; pix < px; ++pix) {
    const int n = int(pix / (size_t(cs.hw) * cs.hw)), oy = int(pix / cs.hw % cs.hw), ox = int(pix % cs.hw);
    for (int ch = 0; ch < yp; ++ch)
      if ((ch < cs.y_off || ch >= cs.y_off + cs.k) && got[pix * yp + ch] != -7.f) ++touched;
    for (int k = 0; k < cs.k; ++k) {
      double acc = 0;
      for (int ry = 0; ry < cs.r; ++ry)
        for (int rx = 0; rx < cs.r; ++rx) {
          const int iy = oy - cs.r / 2 + ry, ix = ox - cs.r / 2 + rx;
          if (iy < 0 || iy >= cs.hw || ix < 0 || ix >= cs.hw) continue;
          const size_t xpix = (size_t(n) * cs.hw + iy) * cs.hw + ix;
          for (int c = 0; c < cs.c; ++c)
            acc += double(x.host[xpix * xp + cs.x_off + c]) * double(w.host[((size_t(k) * cs.r + ry) * cs.r + rx) * cs.c + c]);
        }
      acc += bias.host[size_t(k)];
      acc = acc / (1.0 + std::exp(-acc));
      if (cs.residual) acc += res.host[pix * rp + cs.r_off + k];
      const double d = std::fabs(double(got[pix * yp + cs.y_off + k]) - acc);
      sq += d * d;
      sq_ref += acc * acc;
      max_d = std::max(max_d, d);
      max_ref = std::max(max_ref, std::fabs(acc));
    }
  }
  EXPECT_EQ(touched, 0u) << what << ": wrote outside its channel slice";
  const double rel = std::sqrt(sq / std::max(sq_ref, 1e-30));
  EXPECT_LE(rel, half ? 2e-3 : 1e-5) << what;
  EXPECT_LE(max_d, (half ? 1e-2 : 1e-4) * std::max(1.0, max_ref)) << what;
}

struct Cudnn {
  cudnnHandle_t h = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = size_t{64} << 20;
  Cudnn() {
    EXPECT_EQ(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  }
  ~Cudnn() {
    cudaFree(ws);
    cudnnDestroy(h);
  }
};

// C2f-like shapes: a bottleneck's first 3x3 conv reading y1 (channels 16..31 of the 48-channel
// Concat), its second one with y1 as residual writing its slice (32..47), a 1x1 at batch 1 with an
// odd-sized map, FP16 and FP32.
TEST(CudaChannelViews, PitchedTacticsMatchDirectConvolution) {
  YOLOCU_REQUIRE_GPU();
  Cudnn cd;
  engine::TacticLimits lim;
  lim.workspace = cd.ws_bytes;
  lim.cutlass = true;
  const Case cases[] = {
      {2, 16, 40, 16, 3, 48, 16, 0, 0, 0, 0, false},     // m0.cv1: x a view, output packed
      {2, 16, 40, 16, 3, 0, 0, 48, 16, 48, 32, true},    // m0.cv2: residual a view, output a slice
      {1, 32, 23, 32, 1, 128, 64, 128, 32, 128, 96, true},  // all three pitched, another map
  };
  for (bool half : {true, false})
    for (const Case& cs : cases) {
      const ConvProblem pb = problem_of(cs, half);
      SCOPED_TRACE(pb.signature());
      ASSERT_FALSE(pb.inputs_packed());
      EXPECT_TRUE(engine::own_conv_candidates(pb).empty()) << "own kernels read packed inputs only";
      EXPECT_TRUE(engine::cutlass_conv_candidates(pb, lim).empty()) << "cutlass reads packed inputs only";
      int native = 0;
      for (const TacticPtr& t : engine::cudnn_legacy_candidates(cd.h, pb, lim)) {
        check_tactic(cs, half, *t, cd.h, cd.ws, cd.ws_bytes);
        ++native;
      }
      for (const TacticPtr& t : engine::cudnn_graph_candidates(cd.h, pb, lim)) {
        check_tactic(cs, half, *t, cd.h, cd.ws, cd.ws_bytes);
        ++native;
      }
      std::printf("[ channel views ] %s %s: %d native candidates\n", pb.signature().c_str(), half ? "fp16" : "fp32",
                  native);
      // The wrapper around the packed layer's tactics, made directly and from its id.
      const ConvProblem packed = pb.packed_inputs();
      int wrapped = 0;
      for (TacticPtr& inner : engine::cudnn_graph_candidates(cd.h, packed, lim)) {
        const std::string inner_id = inner->id();
        const TacticPtr t = engine::wrap_packin(pb, std::shared_ptr<const engine::ConvTactic>(std::move(inner)), lim);
        ASSERT_TRUE(t) << inner_id;
        EXPECT_EQ(t->id(), "packin:" + inner_id);
        check_tactic(cs, half, *t, cd.h, cd.ws, cd.ws_bytes);
        ++wrapped;
      }
      // FP32 bars tensor-core and reduced-precision engines (parity with the CPU engine); cuDNN's
      // graph API then has no engine for these fused layers, and FP32 runs the legacy family (the
      // IMPLICIT_GEMM wrapper below).
      if (half) {
        EXPECT_GT(wrapped, 0);
      }
      const TacticPtr gemm = engine::make_tactic(cd.h, pb, "packin:cudnn:IMPLICIT_GEMM", lim);
      ASSERT_TRUE(gemm);
      const TacticPtr inner_gemm = engine::make_tactic(cd.h, packed, "cudnn:IMPLICIT_GEMM", lim);
      ASSERT_TRUE(inner_gemm);
      EXPECT_EQ(gemm->workspace(), engine::packin_copy_bytes(pb) + inner_gemm->workspace());
      check_tactic(cs, half, *gemm, cd.h, cd.ws, cd.ws_bytes);
      // Refused: a wrapper for packed inputs, a wrapper of a wrapper, copies beyond the workspace.
      EXPECT_FALSE(engine::make_tactic(cd.h, packed, "packin:cudnn:IMPLICIT_GEMM", lim));
      EXPECT_FALSE(engine::make_tactic(cd.h, pb, "packin:packin:cudnn:IMPLICIT_GEMM", lim));
      engine::TacticLimits tiny = lim;
      tiny.workspace = engine::packin_copy_bytes(pb) / 2;
      EXPECT_FALSE(engine::make_tactic(cd.h, pb, "packin:cudnn:IMPLICIT_GEMM", tiny));
    }
}

std::vector<Tensor> cpu_run(const std::shared_ptr<const Model>& m, const Tensor& x) {
  CpuEngine cpu(m);
  return cpu.run({x});
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& ref, double bound, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), ref[i].shape()) << what;
    const test::Diff d = test::compare(got[i], ref[i]);
    std::printf("[ channel views ] %-52s rel L2 %.3g  max abs %.3g (bound %.0e)\n", what.c_str(), d.rel_l2, d.max_abs,
                bound);
    EXPECT_LE(d.rel_l2, bound) << what << ": max abs " << d.max_abs;
  }
}

bool bit_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].nbytes() != b[i].nbytes() || std::memcmp(a[i].data(), b[i].data(), a[i].nbytes()) != 0) return false;
  return true;
}

CudaEngineOptions view_opts(Precision p, int max_batch, bool views, const std::string& cache = "none") {
  CudaEngineOptions o;
  o.precision = p;
  o.max_batch = max_batch;
  o.tactic_cache = cache;
  o.channel_views = views;
  return o;
}

Tensor synth_input(int64_t batch, int64_t h, int64_t w, uint32_t seed) {
  Tensor t(DType::kFloat32, {batch, 3, h, w});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
  return t;
}

// The synthetic C2f at max batch 4 (tuned 1 and 4; batch 3 derives its tactics): no Split or Concat
// step (the launches per run are printed: the packin wrapper's copies may take some back), the same
// outputs as without views and as the CPU engine, graph replays
// bit-identical; a second engine restores every choice from the tactic cache file, checked.
TEST(CudaChannelViews, SyntheticC2f) {
  YOLOCU_REQUIRE_GPU();
  for (int64_t n : {1, 2})
    for (bool shortcut : {true, false}) {
      test::SynthC2f o;
      o.n = n;
      o.shortcut = shortcut;
      const std::shared_ptr<const Model> m = test::synth_c2f(o);
      const Tensor x1 = synth_input(1, o.h, o.w, 3), x3 = synth_input(3, o.h, o.w, 4);
      for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
        const bool fp32 = p == Precision::kFloat32;
        const std::string tag = "c2f n" + std::to_string(n) + (shortcut ? " shortcut" : "") + (fp32 ? " fp32" : " fp16");
        const std::string cache = test::scratch_dir("channel_views") + "/c2f_tactics.json";
        std::remove(cache.c_str());
        CudaEngine on(m, view_opts(p, 4, true, cache)), off(m, view_opts(p, 4, false));
        EXPECT_EQ(on.stats().channel_views, 2) << tag;
        EXPECT_EQ(on.stats().copy_steps_removed, 3) << tag;
        EXPECT_EQ(off.stats().channel_views, 0) << tag;
        EXPECT_EQ(on.stats().steps + 3, off.stats().steps) << tag;
        std::printf("[ channel views ] %s: %d -> %d kernels per run\n", tag.c_str(), off.stats().kernels_per_run,
                    on.stats().kernels_per_run);
        for (const std::string& w : on.stats().warnings) ADD_FAILURE() << tag << " warning: " << w;
        for (const Tensor* x : {&x1, &x3}) {
          const std::string bt = tag + " batch " + std::to_string(x->dim(0));
          const auto a = on.run_host({*x});
          expect_close(a, off.run_host({*x}), fp32 ? 1e-5 : 5e-3, bt + " views vs copies");
          expect_close(a, cpu_run(m, *x), fp32 ? 1e-5 : 5e-3, bt + " views vs CPU");
          EXPECT_TRUE(bit_identical(a, on.run_host({*x}))) << bt << ": graph replay";
        }
        // Warm: every choice from the file (the packed-input wrappers re-created from their ids; the
        // cold engine wrote its choices there, its process memo's ones included).
        engine::forget_process_tactics();
        CudaEngine warm(m, view_opts(p, 4, true, cache));
        EXPECT_EQ(warm.stats().tactics_tuned, 0) << tag;
        EXPECT_EQ(warm.stats().tactic_cache_hits, warm.stats().tactic_layers) << tag;
        for (const std::string& w : warm.stats().warnings) ADD_FAILURE() << tag << " warm warning: " << w;
        expect_close(warm.run_host({x3}), on.run_host({x3}), fp32 ? 1e-5 : 5e-3, tag + " warm vs cold");
      }
    }
}

// Copies of one image's tensor [1, ...] as a batch [n, ...].
Tensor tiled(const Tensor& one, int64_t n) {
  Shape s = one.shape();
  s[0] = n;
  Tensor t(one.dtype(), s);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(static_cast<uint8_t*>(t.data()) + static_cast<size_t>(i) * one.nbytes(), one.data(), one.nbytes());
  return t;
}

// YOLOv8n / YOLO11n (static exports, re-batched to max batch 4) with channel views against
// ultralytics' outputs on bus.jpg (the CudaV8 bounds), at batch 1 and as 3 copies (a derived batch
// size), and against the same engine without views.
TEST(CudaChannelViews, V8ExportsMatchUltralytics) {
  YOLOCU_REQUIRE_GPU();
  for (const std::string name : {"yolov8n", "yolo11n"}) {
    YOLOCU_REQUIRE_V8(model_path, name + ".onnx");
    YOLOCU_REQUIRE_V8(bus_path, name + "_bus.npz");
    auto model = std::make_shared<const Model>(load_onnx(model_path));
    auto bus = load_npz(bus_path);
    const Tensor x3 = tiled(bus["input"], 3), y3 = tiled(bus["output"], 3);
    for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
      const bool fp32 = p == Precision::kFloat32;
      const std::string tag = name + (fp32 ? " fp32" : " fp16");
      CudaEngine on(model, view_opts(p, 4, true)), off(model, view_opts(p, 4, false));
      std::printf("[ channel views ] %s: %d views, %d steps removed, %d -> %d kernels per run\n", tag.c_str(),
                  on.stats().channel_views, on.stats().copy_steps_removed, off.stats().kernels_per_run,
                  on.stats().kernels_per_run);
      EXPECT_EQ(on.stats().channel_views, name == "yolov8n" ? 16 : 18) << tag;  // + YOLO11's C2PSA Split
      for (const std::string& w : on.stats().warnings) ADD_FAILURE() << tag << " warning: " << w;
      const double bound = fp32 ? 1e-5 : 5e-3;
      expect_close(on.run_host({bus["input"]}), {bus["output"]}, bound, tag + " b1 bus vs ultralytics");
      const auto a = on.run_host({x3});
      expect_close(a, {y3}, bound, tag + " b3 bus vs ultralytics");
      expect_close(a, off.run_host({x3}), bound, tag + " b3 views vs copies");
    }
  }
}

}  // namespace
}  // namespace yolocu

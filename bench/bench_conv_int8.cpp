// The INT8 convolution (src/engine/cuda/int8) against the FP16 engine's own choice for the same
// layers: YOLOv5s's convolution shapes at a 640x640 input (bias + SiLU, the C3 bottlenecks' 3x3
// with their residual), batch 1 and 32.
//   bench_conv_int8 [--batches 1,32] [--samples N] [--reps R] [--cutlass] [--layers i,j,...] [--fp16-out] [--cudnn]
//                   [--no-silu] [--int8-residual]
// FP16: the tuner (engine/cuda/tactics/tuner.hpp) picks the tactic exactly as the engine does
// (every family's candidates checked and timed, TacticLimits as CudaEngineOptions' defaults;
// --cutlass adds that family), then it is timed here like the INT8 kernel. INT8: every tile of
// int8_conv_tiles(), int8 in, int8 out (--fp16-out: fp16, as for a layer feeding float consumers),
// an fp16 residual, as the engine adds it by default (--int8-residual: its int8 copy, as with
// CudaEngineOptions::int8_residuals); split-K 2, 4, 8 tried where the grid is small (splits_for);
// then Hopper's kernels of conv_int8_sm90.hpp (1x1 layers: CUTLASS's persistent GEMM; any layer:
// its im2col mainloop in yolocu's persistent kernel; the same epilogue); the best is reported.
// Timing: R launches captured in one CUDA graph, 3 warm-up replays, then N replays each between two
// CUDA events; time per launch = median (p10, p90) of the replays / R. TOP/s counts 2 * MACs; GB/s
// counts x + w + y (+ residual) once. "q" is the fp16 -> int8 quantisation of the layer's input,
// "dq" the int8 -> fp16 dequantisation of its output (the costs of entering and leaving an INT8
// region there). Last, per batch: the layers' fp16 and best int8 times
// summed (each layer once, as listed: not a whole network).
// --cudnn: also cuDNN's own INT8 convolution on the same int8 tensors (bench/cudnn_int8_conv.hpp:
// every algorithm it accepts, the fastest; int8 out, or float with --fp16-out), without bias or
// activation: whether cuDNN's INT8 beats the FP16 tactics on this GPU.
// --no-silu: every layer without its SiLU, FP16 and INT8 alike (with --fp16-out, the INT8 epilogue
// is then one fma and a conversion: what the epilogue's exp and divisions cost).
// The stem (3 channels) runs with its channels padded to 16 on both sides.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "cudnn_int8_conv.hpp"
#include "yolov5s_conv_layers.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/int8/conv_int8_kernel.hpp"
#include "engine/cuda/int8/conv_int8_sm90.hpp"
#include "engine/cuda/int8/int8_convert.hpp"
#include "engine/cuda/tactics/tuner.hpp"
#include "yolocu/error.hpp"

using namespace yolocu;
using namespace yolocu::engine;

namespace {

using Layer = bench::Yolov5sConvLayer;
constexpr const auto& kLayers = bench::kYolov5sConvLayers;

struct Options {
  std::vector<int> batches = {1, 32};
  std::vector<int> layers;
  int samples = 30, reps = 20;
  bool cutlass = false;
  bool fp16_out = false;
  bool int8_residual = false;  // the residual as an int8 copy (CudaEngineOptions::int8_residuals) or fp16
  bool cudnn = false;
  bool silu = true;  // --no-silu: every layer without its activation (FP16 and INT8 alike)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--batches" && has_value) o.batches = bench::parse_int_list(argv[++i]);
    else if (a == "--layers" && has_value) o.layers = bench::parse_int_list(argv[++i]);
    else if (a == "--samples" && has_value) o.samples = std::max(1, std::atoi(argv[++i]));
    else if (a == "--reps" && has_value) o.reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--cutlass") o.cutlass = true;
    else if (a == "--fp16-out") o.fp16_out = true;
    else if (a == "--int8-residual") o.int8_residual = true;
    else if (a == "--cudnn") o.cudnn = true;
    else if (a == "--no-silu") o.silu = false;
    else {
      std::fprintf(stderr,
                   "usage: bench_conv_int8 [--batches 1,32] [--samples N] [--reps R] [--cutlass] [--layers i,j] [--fp16-out] "
                   "[--cudnn] [--no-silu] [--int8-residual]\n");
      std::exit(2);
    }
  }
  const int n_layers = static_cast<int>(sizeof(kLayers) / sizeof(kLayers[0]));
  if (o.layers.empty())
    for (int i = 0; i < n_layers; ++i) o.layers.push_back(i);
  for (int i : o.layers)
    if (i < 0 || i >= n_layers) {
      std::fprintf(stderr, "bench_conv_int8: no layer %d (0..%d)\n", i, n_layers - 1);
      std::exit(2);
    }
  for (int b : o.batches)
    if (b < 1) {
      std::fprintf(stderr, "bench_conv_int8: batch %d\n", b);
      std::exit(2);
    }
  return o;
}

ConvProblem problem_of(const Layer& l, int batch, bool silu) {
  ConvProblem pb;
  pb.n = batch, pb.c = l.c, pb.h = pb.w = l.hw, pb.k = l.k, pb.r = pb.s = l.r;
  pb.pad_h = pb.pad_w = l.pad();
  pb.str_h = pb.str_w = l.stride;
  pb.p = (l.hw + 2 * pb.pad_h - l.r) / l.stride + 1;
  pb.q = pb.p;
  pb.half = true, pb.bias = true, pb.silu = silu, pb.residual = l.residual;
  return pb;
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { BENCH_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 256))); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// Time per launch of `fn` (ms): `reps` launches in one graph, replayed.
bench::EventTiming time_launch(const Options& o, cudaStream_t s, const std::function<void()>& fn) {
  return bench::time_graph(o.samples, o.reps, s, fn);
}

struct Fp16Result {
  std::string tactic;
  bench::EventTiming t;
};

Fp16Result run_fp16(const Options& o, Tuner& tuner, const ConvProblem& pb, cudnnHandle_t cudnn, cudaStream_t s,
                    void* ws, size_t ws_bytes) {
  const size_t nx = size_t(pb.n) * pb.h * pb.w * pb.c, nw = size_t(pb.k) * pb.r * pb.s * pb.c;
  const size_t ny = size_t(pb.n) * pb.p * pb.q * pb.k;
  DevBuf x(nx * 2), w(nw * 2), bias(pb.k * 4), bias_act(pb.k * 2), res(ny * 2), y(ny * 2), y_ref(ny * 2);
  cuda_kernels::fill_uniform(w.p, true, int64_t(nw), 2, -0.1f, 0.1f, s);
  cuda_kernels::fill_uniform(bias.p, false, pb.k, 3, -0.5f, 0.5f, s);
  cuda_kernels::fill_uniform(bias_act.p, true, pb.k, 3, -0.5f, 0.5f, s);
  ConvBuffers b;
  b.x = x.p, b.w = w.p, b.bias = static_cast<const float*>(bias.p), b.bias_act = bias_act.p;
  b.residual = pb.residual ? res.p : nullptr, b.y = y.p, b.ws = ws, b.ws_bytes = ws_bytes;
  const TunedLayer tl = tuner.choose(pb, b, y_ref.p);
  BENCH_CUDA(cudaStreamSynchronize(s));
  Fp16Result r;
  r.tactic = tl.tactic->id();
  r.t = time_launch(o, s, [&] { tl.tactic->run(cudnn, b, s); });
  return r;
}

struct Int8Result {
  std::vector<std::string> names;         // the mma.sync tiles, then the sm90 kernels (conv_int8_sm90.hpp)
  std::vector<bench::EventTiming> tiles;  // per tile, its best split
  std::vector<int> splits;                // that split (0: the kernel does not run this layer)
  int best = -1;
  bench::EventTiming quantise{}, dequantise{};
  bench::CudnnInt8Result cudnn;  // --cudnn
};

// Split-K factors worth trying for tile t: 1, and 2, 4, 8 while the grid is under 2 waves and every
// slice keeps at least 4 reduction steps.
std::vector<int> splits_for(const ConvProblem& pb, const Int8Tile& t, int sms) {
  const int64_t blocks = (int64_t(pb.n) * pb.p * pb.q + t.bm - 1) / t.bm * ((pb.k + t.bn - 1) / t.bn);
  const int steps = (pb.r * pb.s * pb.c + 63) / 64;
  std::vector<int> v = {1};
  for (int sk = 2; sk <= 8; sk *= 2)
    if (blocks * sk / 2 < 2 * sms && steps >= 4 * sk) v.push_back(sk);
  return v;
}

Int8Result run_int8(const Options& o, const ConvProblem& pb, int sms, cudaStream_t s, cudnnHandle_t cudnn,
                    void* cudnn_ws, size_t cudnn_ws_bytes) {
  const size_t nx = size_t(pb.n) * pb.h * pb.w * pb.c, nw = size_t(pb.k) * pb.r * pb.s * pb.c;
  const size_t ny = size_t(pb.n) * pb.p * pb.q * pb.k;
  DevBuf xh(nx * 2), x(nx), wh(nw * 2), w(nw), scale(pb.k * 4), bias(pb.k * 4), resh(ny * 2), res(ny), y(ny * 2);
  cuda_kernels::fill_uniform(xh.p, true, int64_t(nx), 4, -3.f, 3.f, s);
  cuda_kernels::fill_uniform(wh.p, true, int64_t(nw), 5, -3.f, 3.f, s);
  cuda_kernels::fill_uniform(resh.p, true, int64_t(ny), 6, -3.f, 3.f, s);
  cuda_kernels::fill_uniform(scale.p, false, pb.k, 7, 1e-4f, 2e-4f, s);
  cuda_kernels::fill_uniform(bias.p, false, pb.k, 8, -0.5f, 0.5f, s);
  const float q_scale = 3.f / 127;
  int8_quantize_run(wh.p, pb.c, pb.c, static_cast<int8_t*>(w.p), pb.c, int64_t(nw / pb.c), q_scale, s);
  int8_quantize_run(resh.p, pb.k, pb.k, static_cast<int8_t*>(res.p), pb.k, int64_t(ny / pb.k), q_scale, s);
  Int8Result r;
  const int64_t pixels = int64_t(nx / pb.c);
  r.quantise = time_launch(o, s, [&] {
    int8_quantize_run(xh.p, pb.c, pb.c, static_cast<int8_t*>(x.p), pb.c, pixels, q_scale, s);
  });
  Int8ConvArgs a;
  a.x = static_cast<const int8_t*>(x.p), a.w = static_cast<const int8_t*>(w.p);
  a.scale = static_cast<const float*>(scale.p), a.bias = static_cast<const float*>(bias.p);
  a.residual = pb.residual ? (o.int8_residual ? res.p : resh.p) : nullptr;
  a.residual_type = !pb.residual ? Int8Residual::kNone : o.int8_residual ? Int8Residual::kInt8 : Int8Residual::kHalf;
  a.residual_scale = q_scale, a.y = y.p, a.y_scale = q_scale;
  a.out = o.fp16_out ? Int8Out::kHalf : Int8Out::kInt8;
  a.n = pb.n, a.c = pb.c, a.h = pb.h, a.w_ = pb.w, a.k = pb.k, a.r = pb.r, a.s = pb.s, a.p = pb.p, a.q = pb.q;
  a.pad_h = pb.pad_h, a.pad_w = pb.pad_w, a.str_h = pb.str_h, a.str_w = pb.str_w, a.silu = pb.silu;
  const std::string why = int8_conv_unsupported(a);
  if (!why.empty()) {
    std::fprintf(stderr, "int8: %s\n", why.c_str());
    std::exit(1);
  }
  for (int t = 0; t < static_cast<int>(int8_conv_tiles().size()); ++t) {
    int8_conv_prepare(t);
    bench::EventTiming best{};
    int best_split = 0;
    for (int sk : splits_for(pb, int8_conv_tiles()[size_t(t)], sms)) {
      a.split_k = sk;
      a.workspace_bytes = int8_conv_workspace(a);
      DevBuf ws(a.workspace_bytes);
      a.workspace = ws.p;
      const bench::EventTiming et = time_launch(o, s, [&] { int8_conv_run(a, t, s); });
      if (best_split == 0 || et.median_ms < best.median_ms) best = et, best_split = sk;
    }
    r.names.push_back(int8_tile_id(int8_conv_tiles()[size_t(t)]));
    r.tiles.push_back(best);
    r.splits.push_back(best_split);
    if (r.best < 0 || best.median_ms < r.tiles[size_t(r.best)].median_ms) r.best = t;
  }
  // Hopper's 1x1 path (CUTLASS's persistent GEMM, the same epilogue), where it runs the layer
  a.split_k = 1, a.workspace = nullptr, a.workspace_bytes = 0;
  for (int k = 0; k < static_cast<int>(int8_sm90_kernels().size()); ++k) {
    r.names.push_back(int8_sm90_kernels()[size_t(k)]);
    if (!int8_sm90_unsupported(a, k).empty()) {
      r.tiles.push_back({});
      r.splits.push_back(0);
      continue;
    }
    const bench::EventTiming et = time_launch(o, s, [&] { int8_sm90_run(a, k, s); });
    r.tiles.push_back(et);
    r.splits.push_back(1);
    if (et.median_ms < r.tiles[size_t(r.best)].median_ms) r.best = static_cast<int>(r.tiles.size()) - 1;
  }
  r.dequantise = time_launch(o, s, [&] {
    int8_dequantize_run(static_cast<const int8_t*>(y.p), pb.k, resh.p, pb.k, int64_t(ny / pb.k), q_scale, s);
  });
  if (o.cudnn) {
    DevBuf yc(ny * (o.fp16_out ? 4 : 1));
    r.cudnn = bench::cudnn_int8_conv(cudnn, pb.n, pb.c, pb.h, pb.w, pb.k, pb.r, pb.s, pb.pad_h, pb.str_h, x.p, w.p, yc.p,
                                     o.fp16_out, cudnn_ws, cudnn_ws_bytes,
                                     [&](const std::function<void()>& fn) { return time_launch(o, s, fn); });
  }
  return r;
}

void report(const Options& o, const Layer& l, const ConvProblem& pb, const Fp16Result& f, const Int8Result& q) {
  const double macs = double(pb.n) * pb.p * pb.q * pb.k * pb.r * pb.s * pb.c;
  const double px = double(pb.n) * pb.h * pb.w * pb.c, py = double(pb.n) * pb.p * pb.q * pb.k;
  const double wts = double(pb.k) * pb.r * pb.s * pb.c;
  const double bytes16 = 2 * (px + wts + py * (pb.residual ? 2 : 1));
  const double bytes8 = px + wts + py * (pb.residual ? (o.int8_residual ? 1 : 2) : 0) + py * (o.fp16_out ? 2 : 1);
  const bench::EventTiming& b = q.tiles[size_t(q.best)];
  auto us = [](double ms) { return ms * 1e3; };
  const std::string tile = q.names[size_t(q.best)] + " k" + std::to_string(q.splits[size_t(q.best)]);
  std::printf("| %-28s | %2d | %-34s | %8.2f | %7.1f | %6.0f | %-29s | %8.2f (%6.2f-%6.2f) | %7.1f | %6.0f | %5.2fx | %7.2f | %7.2f |",
              l.name, pb.n, f.tactic.substr(0, 34).c_str(), us(f.t.median_ms), 2 * macs / f.t.median_ms / 1e9,
              bytes16 / f.t.median_ms / 1e6, tile.c_str(), us(b.median_ms),
              us(b.p10_ms), us(b.p90_ms), 2 * macs / b.median_ms / 1e9, bytes8 / b.median_ms / 1e6,
              f.t.median_ms / b.median_ms, us(q.quantise.median_ms), us(q.dequantise.median_ms));
  for (size_t t = 0; t < q.tiles.size(); ++t) {
    if (q.splits[t] == 0) std::printf("       -   ");
    else std::printf(" %7.2f/k%d", us(q.tiles[t].median_ms), q.splits[t]);
  }
  if (o.cudnn && q.cudnn.algo.empty()) std::printf(" | cudnn int8: none (%s)", q.cudnn.why.c_str());
  else if (o.cudnn)
    std::printf(" | cudnn int8 %s: %8.2f us, %7.1f TOP/s, %5.2fx fp16", q.cudnn.algo.c_str(), us(q.cudnn.t.median_ms),
                2 * macs / q.cudnn.t.median_ms / 1e9, f.t.median_ms / q.cudnn.t.median_ms);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    int device = 0;
    BENCH_CUDA(cudaSetDevice(device));
    cudaDeviceProp prop{};
    BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
    cudaStream_t s;
    BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudnnHandle_t cudnn;
    if (cudnnCreate(&cudnn) != CUDNN_STATUS_SUCCESS || cudnnSetStream(cudnn, s) != CUDNN_STATUS_SUCCESS) {
      std::fprintf(stderr, "cudnn handle failed\n");
      return 1;
    }
    TacticLimits lim;  // CudaEngineOptions' defaults
    lim.cutlass = o.cutlass;
    DevBuf ws(lim.workspace);
    Tuner tuner(cudnn, lim, nullptr, device, s);
    std::vector<ConvProblem> all;
    for (int b : o.batches)
      for (int i : o.layers) all.push_back(problem_of(kLayers[i], b, o.silu));
    tuner.prebuild(all, device, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    std::printf("device %s (%d SMs); %d samples x %d launches per graph; times in us per launch (median, p10-p90); int8 out %s\n",
                prop.name, prop.multiProcessorCount, o.samples, o.reps, o.fp16_out ? "fp16" : "int8");
    std::printf("| layer | n | fp16 tactic (tuner's choice) | fp16 us | TOP/s | GB/s | int8 best tile, split-K | int8 us | TOP/s | GB/s | speedup | q us | dq us | per tile:");
    for (const Int8Tile& t : int8_conv_tiles()) std::printf(" %s", int8_tile_id(t).c_str());
    for (const std::string& k : int8_sm90_kernels()) std::printf(" %s", k.c_str());
    std::printf("\n");
    std::vector<std::string> totals;
    for (int b : o.batches) {
      double fp16_us = 0, int8_us = 0, cudnn_us = 0;
      int cudnn_layers = 0;
      for (int i : o.layers) {
        const ConvProblem pb = problem_of(kLayers[i], b, o.silu);
        const Fp16Result f = run_fp16(o, tuner, pb, cudnn, s, ws.p, lim.workspace);
        const Int8Result q = run_int8(o, pb, prop.multiProcessorCount, s, cudnn, ws.p, lim.workspace);
        report(o, kLayers[i], pb, f, q);
        fp16_us += f.t.median_ms * 1e3, int8_us += q.tiles[size_t(q.best)].median_ms * 1e3;
        if (!q.cudnn.algo.empty()) cudnn_us += q.cudnn.t.median_ms * 1e3, ++cudnn_layers;
        else if (o.cudnn) cudnn_us += f.t.median_ms * 1e3;  // a layer cuDNN has no INT8 for stays FP16
      }
      char line[240];
      std::snprintf(line, sizeof line, "total batch %d (%zu layers): fp16 %.1f us, int8 %.1f us, speedup %.2fx", b,
                    o.layers.size(), fp16_us, int8_us, fp16_us / int8_us);
      if (o.cudnn)
        std::snprintf(line + std::strlen(line), sizeof line - std::strlen(line),
                      "; cudnn int8 (%d layers, the rest fp16) %.1f us, %.2fx", cudnn_layers, cudnn_us, fp16_us / cudnn_us);
      totals.push_back(line);
    }
    for (const std::string& t : totals) std::printf("%s\n", t.c_str());
    cudnnDestroy(cudnn);
    cudaStreamDestroy(s);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_conv_int8: %s\n", e.what());
    return 1;
  }
  return 0;
}

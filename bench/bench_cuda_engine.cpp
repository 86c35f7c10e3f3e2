// GPU forward benchmark of the yolocu CUDA engine (cuDNN + yolocu kernels, CUDA graph replay).
//   bench_cuda_engine [--models a.onnx,b.onnx] [--batches 1,8,32] [--precision fp16|fp32|int8]
//                     [--calibration FILE[,FILE...]] (int8: yolocu calibrate's file per model, in order)
//                     [--iters N] [--warmup W] [--no-graphs] [--profile] [--no-fuse-detect-tail] [--no-fuse-v8-tail]
//                     [--no-fuse-attention] [--no-s2d] [--no-copy-free-concat] [--no-channel-views] [--no-fuse-sppf] [--cutlass]
//                     [--own-dwconv] [--tactic-cache FILE|none] [--max-plans N]
// Default models: $YOLOCU_DATA_DIR/models/{yolov5n.onnx, yolov5s_random_fp16.onnx}. Models exported
// with a static batch of 1 run at any batch: the engine re-batches them (engine::make_batch_dynamic)
// and verifies that every value then scales with the batch.
// Per (model, batch): build time, median / p90 ms per forward (CUDA events around graph replays),
// images/s, conv TFLOP/s and its ratio to the H100 dense FP16 peak (989 TFLOP/s), kernels per run,
// tactic tuning time and where the tactics came from (cache / tuned). Each engine is built with
// max_batch = batch and tactics tuned for that batch. --profile adds the per-layer table: every
// step (eager, events around each step) sorted by time, with its tactic, TFLOP/s, GB/s and % of
// the roofline (the larger of compute time at 989 TFLOP/s and memory time at the device's DRAM
// bandwidth, over the measured time).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "yolocu/cuda_engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"

using namespace yolocu;

namespace {

constexpr double kH100DenseFp16Tflops = 989.0;

#define BENCH_CUDA(stmt)                                                                      \
  do {                                                                                        \
    const cudaError_t e_ = (stmt);                                                            \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #stmt, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}


double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  const char* dd = std::getenv("YOLOCU_DATA_DIR");
  const std::string data = dd ? dd : "../shared/data";
  std::vector<std::string> models = {data + "/models/yolov5n.onnx", data + "/models/yolov5s_random_fp16.onnx"};
  std::vector<int> batches = {1, 8, 32};
  Precision precision = Precision::kFloat16;
  int iters = 50, warmup = 10;
  bool profile = false, graphs = true, fuse_tail = true, fuse_v8 = true, fuse_attn = true, s2d = true, copy_free = true, fuse_sppf = true, cutlass = false,
       channel_views = CudaEngineOptions{}.channel_views;
  bool direct_stem = true, own_dw = false, thin = true, branches = true;
  std::string cache = "";
  std::vector<std::string> calibrations;
  int max_plans = CudaEngineOptions{}.max_graph_plans;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--models") models = split(next());
    else if (k == "--batches") {
      batches.clear();
      for (const auto& b : split(next())) batches.push_back(std::atoi(b.c_str()));
    } else if (k == "--precision") {
      const std::string p = next();
      precision = p == "fp32" ? Precision::kFloat32 : p == "int8" ? Precision::kInt8 : Precision::kFloat16;
    } else if (k == "--calibration") calibrations = split(next());
    else if (k == "--iters") iters = std::max(1, std::atoi(next().c_str()));
    else if (k == "--warmup") warmup = std::max(0, std::atoi(next().c_str()));
    else if (k == "--profile") profile = true;
    else if (k == "--no-graphs") graphs = false;
    else if (k == "--no-fuse-detect-tail") fuse_tail = false;
    else if (k == "--no-fuse-v8-tail") fuse_v8 = false;  // CudaEngineOptions::fuse_v8_tail
    else if (k == "--no-fuse-attention") fuse_attn = false;  // CudaEngineOptions::fuse_attention
    else if (k == "--no-s2d") s2d = false;
    else if (k == "--no-copy-free-concat") copy_free = false;
    else if (k == "--channel-views") channel_views = true;  // CudaEngineOptions::channel_views (the default)
    else if (k == "--no-channel-views") channel_views = false;
    else if (k == "--no-fuse-sppf") fuse_sppf = false;
    else if (k == "--no-direct-stem") direct_stem = false;  // CudaEngineOptions::direct_stem
    else if (k == "--cutlass") cutlass = true;  // CudaEngineOptions::cutlass_tactics
    else if (k == "--own-dwconv") own_dw = true;  // CudaEngineOptions::own_depthwise_tactics
    else if (k == "--no-thin-conv") thin = false;  // CudaEngineOptions::own_thin_tactics
    else if (k == "--no-graph-branches") branches = false;  // CudaEngineOptions::graph_branches
    else if (k == "--tactic-cache") cache = next();
    else if (k == "--max-plans") max_plans = std::max(1, std::atoi(next().c_str()));
    else {
      std::fprintf(stderr,
                   "usage: bench_cuda_engine [--models a.onnx,b.onnx] [--batches 1,8,32] [--precision fp16|fp32|int8] [--calibration FILE,...] "
                   "[--iters N] [--warmup W] [--no-graphs] [--profile] [--no-fuse-detect-tail] [--no-fuse-v8-tail] [--no-fuse-attention] [--no-s2d] "
                   "[--no-copy-free-concat] [--no-channel-views] [--no-fuse-sppf] [--no-direct-stem] [--cutlass] [--own-dwconv] [--no-thin-conv] "
                   "[--no-graph-branches] [--tactic-cache FILE|none] [--max-plans N]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  int mem_khz = 0, bus_bits = 0;
  BENCH_CUDA(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0));
  BENCH_CUDA(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
  const double dram_gbs = 2.0 * mem_khz * 1e3 * bus_bits / 8 / 1e9;
  std::printf("device: %s (DRAM %.0f GB/s), precision %s, %s%s%s%s%s%s%s%s%s%s%s%s, %d iterations after %d warm-up, tactic cache %s\n",
              prop.name, dram_gbs, precision == Precision::kFloat16 ? "fp16" : precision == Precision::kInt8 ? "int8" : "fp32",
              graphs ? "CUDA graphs" : "eager", fuse_tail ? ", fused Detect tail" : "", fuse_v8 ? ", fused v8 tail" : "",
              s2d ? ", space-to-depth stem" : "", copy_free ? ", copy-free Concat" : ", Concat copies",
              channel_views && copy_free ? ", channel views" : "",
              fuse_sppf ? ", SPPF kernel" : "", direct_stem ? ", direct stem where faster" : "",
              cutlass ? ", cutlass tactics" : "", own_dw ? ", own depthwise tactics" : "", thin ? "" : ", no thin 3x3 tactics",
              graphs && !branches ? ", graphs as one chain" : "", iters, warmup, cache.empty() ? "(default)" : cache.c_str());
  std::printf("%-26s %5s %9s %9s %9s %9s %11s %9s %8s %10s %8s %s\n", "model", "batch", "build_ms", "tune_ms",
              "median_ms", "p90_ms", "images/s", "TFLOP/s", "%peak", "arena_MiB", "kernels", "tactics");
  if (precision == Precision::kInt8 && calibrations.size() != models.size()) {
    std::fprintf(stderr, "--precision int8 needs --calibration with one file per model (%zu models)\n", models.size());
    return 2;
  }
  try {
    for (size_t mi = 0; mi < models.size(); ++mi) {
      const std::string& path = models[mi];
      const std::string name = path.substr(path.find_last_of('/') + 1);
      const auto t0 = std::chrono::steady_clock::now();
      Model base = load_onnx(path);
      std::shared_ptr<const Int8Calibration> cal;
      if (precision == Precision::kInt8)
        cal = std::make_shared<const Int8Calibration>(load_int8_calibration(calibrations[mi], file_sha256(path)));
      const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      for (int batch : batches) {
        Model m = base;
        CudaEngineOptions o;
        o.precision = precision;
        o.int8_calibration = cal;
        o.max_batch = batch;
        o.cuda_graphs = graphs;
        o.fuse_detect_tail = fuse_tail;
        o.fuse_v8_tail = fuse_v8;
        o.fuse_attention = fuse_attn;
        o.space_to_depth_stem = s2d;
        o.copy_free_concat = copy_free;
        o.channel_views = channel_views;
        o.fuse_sppf = fuse_sppf;
        o.direct_stem = direct_stem;
        o.cutlass_tactics = cutlass;
        o.own_depthwise_tactics = own_dw;
        o.own_thin_tactics = thin;
        o.graph_branches = branches;
        o.tactic_cache = cache;
        o.max_graph_plans = max_plans;
        CudaEngine e(std::make_shared<const Model>(std::move(m)), o);
        const Shape is = e.input_shape(batch);
        const size_t n = static_cast<size_t>(is[0] * is[1] * is[2] * is[3]);
        const size_t es = e.input_dtype() == DType::kFloat16 ? 2 : 4;
        void* d_in = nullptr;
        BENCH_CUDA(cudaMalloc(&d_in, n * es));
        BENCH_CUDA(cudaMemset(d_in, 0, n * es));
        {
          // Images-like input: uniform [0, 1), converted to the input dtype by the engine's own path.
          Tensor x(DType::kFloat32, is);
          std::mt19937 rng(0);
          std::uniform_real_distribution<float> u(0.f, 1.f);
          for (size_t j = 0; j < n; ++j) x.data_as<float>()[j] = u(rng);
          e.run_host({x});
          const Tensor xi = es == 2 ? cast_tensor(x, DType::kFloat16) : x;
          BENCH_CUDA(cudaMemcpy(d_in, xi.data(), n * es, cudaMemcpyHostToDevice));
        }
        cudaStream_t s = nullptr;
        BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        cudaEvent_t a = nullptr, b = nullptr;
        BENCH_CUDA(cudaEventCreate(&a));
        BENCH_CUDA(cudaEventCreate(&b));
        for (int w = 0; w < warmup; ++w) e.run(d_in, batch, s);
        BENCH_CUDA(cudaStreamSynchronize(s));
        std::vector<double> ms;
        for (int it = 0; it < iters; ++it) {
          BENCH_CUDA(cudaEventRecord(a, s));
          e.run(d_in, batch, s);
          BENCH_CUDA(cudaEventRecord(b, s));
          BENCH_CUDA(cudaEventSynchronize(b));
          float t = 0;
          BENCH_CUDA(cudaEventElapsedTime(&t, a, b));
          ms.push_back(t);
        }
        const CudaEngineStats st = e.stats();
        const double med = percentile(ms, 0.5), p90 = percentile(ms, 0.9);
        const double tflops = st.conv_flops_per_image * batch / (med * 1e-3) / 1e12;
        std::printf("%-26s %5d %9.0f %9.0f %9.3f %9.3f %11.0f %9.1f %7.2f%% %10.1f %8d %d cached (%d plans "
                    "restored), %d tuned (%d candidates, %d rejected)\n",
                    name.c_str(), batch, st.build_ms + (batch == batches.front() ? load_ms : 0.0), st.tune_ms, med, p90,
                    batch * 1e3 / med, tflops, 100.0 * tflops / kH100DenseFp16Tflops, st.activation_bytes / 1048576.0,
                    st.kernels_per_run, st.tactic_cache_hits, st.tactic_plans_restored, st.tactics_tuned, st.tactic_candidates,
                    st.tactic_rejected);
        const char* kind = st.tactics_tuned == 0 ? "warm"
                           : st.tactic_cache_hits + st.tactic_memo_hits > 0 ? "partly-cold" : "cold";
        std::printf("  %s batch %d %s: %s\n", name.c_str(), batch, kind, st.tune_breakdown.c_str());
        if (channel_views)
          std::printf("  %s batch %d channel views: %d Split outputs, %d Split / Concat steps removed, %d steps\n",
                      name.c_str(), batch, st.channel_views, st.copy_steps_removed, st.steps);
        if (graphs)
          std::printf("  %s batch %d graph: %s, %d launching steps, %d in the longest dependency chain (%d were "
                      "the workspaces no dependency; %d workspace%s)\n", name.c_str(), batch,
                      branches ? "branches" : "one chain", st.launching_steps, st.step_depth, st.value_depth,
                      st.workspaces, st.workspaces == 1 ? "" : "s");
        std::printf("  %s batch %d stem: %s\n", name.c_str(), batch,
                    std::find(st.direct_stem_batches.begin(), st.direct_stem_batches.end(), batch) != st.direct_stem_batches.end()
                        ? "direct stem kernel (from the NCHW input)"
                        : "input conversion + the layer's tactic");
        for (const auto& w : st.warnings) std::printf("  warning: %s\n", w.c_str());
        if (profile) {
          auto layers = e.profile(batch, 10);
          double total = 0, conv = 0, chain = 0;
          int chain_steps = 0;
          for (const auto& l : layers) {
            total += l.ms;
            if (l.kind == "Conv") conv += l.ms;
            if (l.on_chain && l.ms > 0) chain += l.ms, ++chain_steps;
          }
          std::stable_sort(layers.begin(), layers.end(), [](const LayerTime& x, const LayerTime& y) { return x.ms > y.ms; });
          std::printf("  per-layer profile, %s batch %d (eager, events around each step; sum %.3f ms, convolutions "
                      "%.3f ms; the graph's longest chain, column 'chain': %d rows, %.3f ms of the sum):\n",
                      name.c_str(), batch, total, conv, chain_steps, chain);
          std::printf("  | # | layer | kind | tactic | conv | us | %% | TFLOP/s | GB/s | %% roofline | chain |\n");
          std::printf("  |---|---|---|---|---|---|---|---|---|---|---|\n");
          for (size_t j = 0; j < layers.size(); ++j) {
            const LayerTime& l = layers[j];
            const double sec = l.ms * 1e-3;
            const double floor_s = std::max(l.flops / (kH100DenseFp16Tflops * 1e12), l.bytes / (dram_gbs * 1e9));
            std::printf("  | %zu | %s | %s | %s | %s | %.1f | %.1f | %.1f | %.0f | %.0f | %s |\n", j + 1, l.name.c_str(),
                        l.kind.c_str(), l.tactic.empty() ? "-" : l.tactic.c_str(), l.shape.empty() ? "-" : l.shape.c_str(),
                        l.ms * 1e3, 100.0 * l.ms / total,
                        sec > 0 ? l.flops / sec / 1e12 : 0.0, sec > 0 ? l.bytes / sec / 1e9 : 0.0,
                        sec > 0 ? 100.0 * floor_s / sec : 0.0, l.on_chain ? "yes" : "");
          }
        }
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        cudaStreamDestroy(s);
        cudaFree(d_in);
      }
    }
  } catch (const Error& err) {
    std::fprintf(stderr, "error: %s\n", err.what());
    return 1;
  }
  return 0;
}

// CUTLASS 3.x's Hopper INT8 implicit-GEMM convolution (wgmma + TMA im2col, warp-specialised: the
// sm90 conv collective) on YOLOv5s's convolution shapes at a 640x640 input, batch 1 and 32: whether
// Hopper's INT8 tensor cores beat the FP16 tactics on these layers, before the engine plans INT8
// layers on them (docs/int8.md). Run it beside bench_conv_int8 (its FP16 column is the engine's
// own choice for the same layers): scripts/gpu/parts/int8.sh does.
//   bench_conv_int8_sm90 [--batches 1,32] [--samples N] [--reps R]
// NHWC int8 activations, KRSC int8 weights, int32 accumulation, int8 out scaled by alpha (no bias,
// no activation, no residual, also where the layer's name says +res: the convolution's own cost);
// the tiles of kTiles (M = N*P*Q, N = output channels, K = C*R*S) and, on the 1x1 layers, CUTLASS's
// persistent GEMM kernels (bench_int8_gemm_sm90.cu), the fastest reported. At batch 1 each
// tile's output is checked against exact int32 sums on the host at 4,096 sampled outputs
// (alpha 1/256: D = sat(rint(acc / 256))).
// Timing as bench_conv_int8: R launches in one CUDA graph, 3 warm-up replays, N timed replays;
// time per launch = median (p10-p90) / R. The stem runs with its 3 channels padded to 16.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "int8_gemm_sm90.hpp"
#include "yolov5s_conv_layers.hpp"
#include "cute/tensor.hpp"
#include "cutlass/kernel_hardware_info.h"  // (before the conv collectives, which use it undeclared)
#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/convolution.h"
#include "cutlass/conv/device/conv_universal_adapter.hpp"
#include "cutlass/conv/kernel/conv_universal.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"

using namespace cute;

namespace {

using Layer = yolocu::bench::Yolov5sConvLayer;
constexpr const auto& kLayers = yolocu::bench::kYolov5sConvLayers;

template <class TileShape, class ClusterShape = Shape<_1, _1, _1>>
struct Sm90Int8Conv {
  using Layout = cutlass::layout::TensorNHWC;
  static constexpr int kAlign = 16;  // 16 int8 elements: channels multiples of 16
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, int32_t, float, void, Layout, kAlign, int8_t, Layout, kAlign,
      cutlass::epilogue::collective::EpilogueScheduleAuto>::CollectiveOp;
  using Mainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop, int8_t, Layout, kAlign,
      int8_t, Layout, kAlign, int32_t, TileShape, ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::conv::collective::KernelScheduleAuto>::CollectiveOp;
  using Problem =
      cutlass::conv::ConvProblemShape<cutlass::conv::Operator::kFprop, Mainloop::DispatchPolicy::NumSpatialDimensions>;
  using Kernel = cutlass::conv::kernel::ConvUniversal<Problem, Mainloop, Epilogue>;
  using Conv = cutlass::conv::device::ConvUniversalAdapter<Kernel>;
};

struct Tensors {
  int n, c, h, w, k, r, pad, stride, p, q;
  int8_t *x = nullptr, *wt = nullptr, *y = nullptr;
};

using Timing = yolocu::bench::EventTiming;

// Runs and times one tile's kernel on `t` (its output left in t.y): an empty string and the timing,
// or why it could not run.
template <class Cfg>
std::string run_config(const Tensors& t, float alpha, int samples, int reps, cudaStream_t s, Timing* out) {
  using Conv = typename Cfg::Conv;
  using Problem = typename Cfg::Problem;
  Problem problem(cutlass::conv::Mode::kCrossCorrelation, {t.n, t.h, t.w, t.c}, {t.k, t.r, t.r, t.c}, {t.pad, t.pad},
                  {t.pad, t.pad}, {t.stride, t.stride}, {1, 1}, 1);
  typename Conv::ConvKernel::StrideC stride_c;
  typename Conv::ConvKernel::StrideD stride_d;
  cute::for_each(cute::make_seq<cute::rank<0>(typename Conv::ConvKernel::StrideC{})>{},
                 [&](auto i) { cute::get<0, i>(stride_c) = problem.stride_C[Problem::RankT - 2 - i]; });
  cute::for_each(cute::make_seq<cute::rank<0>(typename Conv::ConvKernel::StrideD{})>{},
                 [&](auto i) { cute::get<0, i>(stride_d) = problem.stride_C[Problem::RankT - 2 - i]; });
  typename Conv::Arguments args{problem, {t.x, t.wt}, {{alpha, 0.f}, nullptr, stride_c, t.y, stride_d}};
  return yolocu::bench::run_timed<Conv>(args, samples, reps, s, out);
}

// A 1x1 stride-1 layer through the GEMM kernel `I` of bench_int8_gemm_sm90.cu (others: "not 1x1").
template <int I>
std::string run_gemm(const Tensors& t, float alpha, int samples, int reps, cudaStream_t s, Timing* out) {
  if (t.r != 1 || t.stride != 1 || t.pad != 0) return "not 1x1";
  return yolocu::bench::int8_gemm_sm90_run(I, t.n * t.h * t.w, t.k, t.c, t.x, t.wt, t.y, alpha, samples, reps, s, out);
}

// Exact int32 sums at `samples` random outputs against y = sat(rint(acc * alpha)): mismatches.
int check(const Tensors& t, const std::vector<int8_t>& x, const std::vector<int8_t>& w, float alpha) {
  std::vector<int8_t> y(static_cast<size_t>(t.n) * t.p * t.q * t.k);
  BENCH_CUDA(cudaMemcpy(y.data(), t.y, y.size(), cudaMemcpyDeviceToHost));
  std::mt19937 rng(7);
  int bad = 0;
  for (int i = 0; i < 4096; ++i) {
    const int n = static_cast<int>(rng() % t.n), p = static_cast<int>(rng() % t.p), q = static_cast<int>(rng() % t.q),
              k = static_cast<int>(rng() % t.k);
    int32_t acc = 0;
    for (int r = 0; r < t.r; ++r)
      for (int s = 0; s < t.r; ++s) {
        const int h = p * t.stride - t.pad + r, wx = q * t.stride - t.pad + s;
        if (h < 0 || h >= t.h || wx < 0 || wx >= t.w) continue;
        for (int c = 0; c < t.c; ++c)
          acc += int32_t{x[((static_cast<size_t>(n) * t.h + h) * t.w + wx) * t.c + c]} *
                 int32_t{w[((static_cast<size_t>(k) * t.r + r) * t.r + s) * t.c + c]};
      }
    const float want = std::min(127.f, std::max(-128.f, std::nearbyint(static_cast<float>(acc) * alpha)));
    const int8_t got = y[((static_cast<size_t>(n) * t.p + p) * t.q + q) * t.k + k];
    if (static_cast<float>(got) != want) ++bad;
  }
  return bad;
}

// The tiles timed on every layer (M x N x K; c2x1: thread-block clusters of two along M); the
// g- rows: the persistent GEMM kernels (pingpong: two consumer warp groups on alternate tiles;
// coop: both on one tile), on the 1x1 layers only.
using RunFn = std::string (*)(const Tensors&, float, int, int, cudaStream_t, Timing*);
struct TileRun {
  const char* name;
  RunFn run;
};
const TileRun kTiles[] = {
    {"128x128x128", run_config<Sm90Int8Conv<Shape<_128, _128, Shape<_128>>>>},
    {"128x64x128", run_config<Sm90Int8Conv<Shape<_128, _64, Shape<_128>>>>},
    {"128x128x64", run_config<Sm90Int8Conv<Shape<_128, _128, Shape<_64>>>>},
    {"128x64x64", run_config<Sm90Int8Conv<Shape<_128, _64, Shape<_64>>>>},
    {"64x64x64", run_config<Sm90Int8Conv<Shape<_64, _64, Shape<_64>>>>},
    {"128x128x128c2x1", run_config<Sm90Int8Conv<Shape<_128, _128, Shape<_128>>, Shape<_2, _1, _1>>>},
    {"g-pingpong-64x128x64", run_gemm<0>},
    {"g-pingpong-64x64x64", run_gemm<1>},
    {"g-coop-128x128x64", run_gemm<2>},
    {"g-coop-128x64x64", run_gemm<3>},
};
constexpr int kTileCount = static_cast<int>(sizeof(kTiles) / sizeof(kTiles[0]));

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> batches = {1, 32};
  int samples = 30, reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--batches" && i + 1 < argc) batches = yolocu::bench::parse_int_list(argv[++i]);
    else if (a == "--samples" && i + 1 < argc) samples = std::max(3, std::atoi(argv[++i]));
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: bench_conv_int8_sm90 [--batches 1,32] [--samples N] [--reps R]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::printf("bench_conv_int8_sm90: %s is sm_%d%d; these kernels need sm_90 (Hopper)\n", prop.name, prop.major, prop.minor);
    return 0;
  }
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreate(&s));
  std::printf("device %s; CUTLASS sm90 INT8 fprop (int8 out, no bias / activation / residual); %d samples x %d launches per graph; us per launch\n",
              prop.name, samples, reps);
  std::printf("| layer | n | best tile | int8 us (p10-p90) | TOP/s | per tile:");
  for (const TileRun& tile : kTiles) std::printf(" %s", tile.name);
  std::printf(" | batch-1 check |\n");
  int failures = 0;
  for (int n : batches) {
    double total = 0;
    for (const Layer& l : kLayers) {
      Tensors t{};
      t.n = n, t.c = l.c, t.h = t.w = l.hw, t.k = l.k, t.r = l.r, t.pad = l.pad(), t.stride = l.stride;
      t.p = (t.h + 2 * t.pad - t.r) / t.stride + 1, t.q = (t.w + 2 * t.pad - t.r) / t.stride + 1;
      std::vector<int8_t> x(static_cast<size_t>(n) * t.h * t.w * t.c), w(static_cast<size_t>(t.k) * t.r * t.r * t.c);
      std::mt19937 rng(1234);
      for (int8_t& v : x) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
      for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
      BENCH_CUDA(cudaMalloc(&t.x, x.size()));
      BENCH_CUDA(cudaMalloc(&t.wt, w.size()));
      BENCH_CUDA(cudaMalloc(&t.y, static_cast<size_t>(n) * t.p * t.q * t.k));
      BENCH_CUDA(cudaMemcpy(t.x, x.data(), x.size(), cudaMemcpyHostToDevice));
      BENCH_CUDA(cudaMemcpy(t.wt, w.data(), w.size(), cudaMemcpyHostToDevice));
      const float alpha = 1.f / 256.f;
      Timing tm[kTileCount]{};
      std::string why[kTileCount];
      int bad[kTileCount] = {};  // batch 1: each tile's output against exact sums, right after its run
      int best = -1;
      for (int i = 0; i < kTileCount; ++i) {
        why[i] = kTiles[i].run(t, alpha, samples, reps, s, &tm[i]);
        if (!why[i].empty()) continue;
        if (n == 1) bad[i] = check(t, x, w, alpha);
        failures += bad[i] > 0;
        if (best < 0 || tm[i].median_ms < tm[best].median_ms) best = i;
      }
      std::string checked = "-";
      if (n == 1 && best >= 0)
        checked = bad[best] == 0 ? "exact (4096 outputs)" : std::to_string(bad[best]) + " of 4096 WRONG";
      const double macs = static_cast<double>(n) * t.p * t.q * t.k * t.r * t.r * t.c;
      std::string cells;
      for (int i = 0; i < kTileCount; ++i) {
        char cell[48];
        if (why[i].empty()) std::snprintf(cell, sizeof(cell), " %.2f", tm[i].median_ms * 1e3);
        else std::snprintf(cell, sizeof(cell), " (%s)", why[i].c_str());
        cells += cell;
      }
      if (best < 0) {
        std::printf("| %-28s | %2d | none | - | - |%s | - |\n", l.name, n, cells.c_str());
        ++failures;
      } else {
        total += tm[best].median_ms;
        std::printf("| %-28s | %2d | %s | %8.2f (%.2f-%.2f) | %7.1f |%s | %s |\n", l.name, n, kTiles[best].name,
                    tm[best].median_ms * 1e3, tm[best].p10_ms * 1e3, tm[best].p90_ms * 1e3,
                    2 * macs / (tm[best].median_ms * 1e-3) / 1e12, cells.c_str(), checked.c_str());
      }
      cudaFree(t.x);
      cudaFree(t.wt);
      cudaFree(t.y);
    }
    std::printf("total batch %d (14 layers): sm90 int8 %.1f us\n", n, total * 1e3);
  }
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}

// CUTLASS 3.x's persistent Hopper INT8 GEMM (TMA, warp-specialised wgmma, a tile scheduler handing
// each CTA tile after tile so that one tile's epilogue overlaps the next one's loads), which the
// sm90 convolution kernel is not: bench_conv_int8_sm90 times it on the 1x1 stride-1 layers, where a
// convolution in NHWC is this GEMM (X: activations [N*H*W, C], W: weights [K, C], both K-major as
// int8 wgmma takes them), to tell whether persistence is what those layers' short K loops need.
#include "int8_gemm_sm90.hpp"

#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace yolocu::bench {
namespace {

using namespace cute;

template <class TileShape, class KernelSchedule, class EpilogueSchedule>
struct Int8Gemm {
  static constexpr int kAlign = 16;  // 16 int8 elements
  using ClusterShape = Shape<_1, _1, _1>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, int32_t, float, void,
      cutlass::layout::RowMajor, kAlign, int8_t, cutlass::layout::RowMajor, kAlign,
      EpilogueSchedule>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, cutlass::layout::RowMajor,
      kAlign, int8_t, cutlass::layout::ColumnMajor, kAlign, int32_t, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <class Cfg>
std::string run(int m, int n, int k, const int8_t* x, const int8_t* w, int8_t* y, float alpha,
                int samples, int reps, cudaStream_t s, EventTiming* out) {
  using Gemm = typename Cfg::Gemm;
  using Kernel = typename Cfg::Kernel;
  const auto stride_a =
      cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, make_shape(m, k, 1));
  const auto stride_b =
      cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, make_shape(n, k, 1));
  const auto stride_c =
      cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, make_shape(m, n, 1));
  const auto stride_d =
      cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, make_shape(m, n, 1));
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {m, n, k, 1},
                                {x, stride_a, w, stride_b},
                                {{alpha, 0.f}, nullptr, stride_c, y, stride_d}};
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return "cannot implement";
  const size_t ws_bytes = Gemm::get_workspace_size(args);
  void* ws = nullptr;
  if (ws_bytes) BENCH_CUDA(cudaMalloc(&ws, ws_bytes));
  std::string why;
  if (gemm.initialize(args, ws, s) != cutlass::Status::kSuccess) why = "initialize failed";
  if (why.empty() && gemm.run(s) != cutlass::Status::kSuccess) why = "run failed";
  if (why.empty()) {
    const cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) why = std::string("launch failed: ") + cudaGetErrorString(e);
  }
  if (why.empty()) *out = time_graph(samples, reps, s, [&] { gemm.run(s); });
  if (ws) cudaFree(ws);
  return why;
}

using Pingpong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using PingpongEpilogue = cutlass::epilogue::TmaWarpSpecialized;
using CooperativeEpilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;

}  // namespace

std::string int8_gemm_sm90_run(int config, int m, int n, int k, const int8_t* x, const int8_t* w,
                               int8_t* y, float alpha, int samples, int reps, cudaStream_t s,
                               EventTiming* out) {
  switch (config) {
    case 0:
      return run<Int8Gemm<Shape<_64, _128, _64>, Pingpong, PingpongEpilogue>>(
          m, n, k, x, w, y, alpha, samples, reps, s, out);
    case 1:
      return run<Int8Gemm<Shape<_64, _64, _64>, Pingpong, PingpongEpilogue>>(
          m, n, k, x, w, y, alpha, samples, reps, s, out);
    case 2:
      return run<Int8Gemm<Shape<_128, _128, _64>, Cooperative, CooperativeEpilogue>>(
          m, n, k, x, w, y, alpha, samples, reps, s, out);
    case 3:
      return run<Int8Gemm<Shape<_128, _64, _64>, Cooperative, CooperativeEpilogue>>(
          m, n, k, x, w, y, alpha, samples, reps, s, out);
    default:
      return "no such configuration";
  }
}

}  // namespace yolocu::bench

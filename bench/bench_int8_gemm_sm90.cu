// CUTLASS 3.x's persistent Hopper INT8 GEMM (TMA, warp-specialised wgmma, a tile scheduler handing
// each CTA tile after tile so that one tile's epilogue overlaps the next one's loads), which the
// sm90 convolution kernel is not: bench_conv_int8_sm90 times it on the 1x1 stride-1 layers, where a
// convolution in NHWC is this GEMM (X: activations [N*H*W, C], W: weights [K, C], both K-major as
// int8 wgmma takes them), to tell whether persistence is what those layers' short K loops need.
#include "int8_gemm_sm90.hpp"

#include "engine/cuda/int8/int8_gemm_sm90_types.cuh"

namespace yolocu::bench {
namespace {

using namespace cute;
using namespace engine::sm90;

// The GEMM with CUTLASS's plain epilogue: D = saturate(round(alpha * acc)) in int8.
template <class TileShape, class KernelSchedule, class EpilogueSchedule>
using PlainGemm = engine::sm90::Int8Gemm<
    TileShape, KernelSchedule, EpilogueSchedule, int8_t,
    cutlass::epilogue::fusion::LinearCombination<int8_t, float, void, float>>;

template <class Cfg>
std::string run(int m, int n, int k, const int8_t* x, const int8_t* w, int8_t* y, float alpha,
                int samples, int reps, cudaStream_t s, EventTiming* out) {
  using Gemm = typename Cfg::Gemm;
  using Kernel = typename Cfg::Kernel;
  const Int8GemmStrides<Kernel> st(m, n, k, n);
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {m, n, k, 1},
                                {x, st.a, w, st.b},
                                {{alpha, 0.f}, nullptr, st.c, y, st.d}};
  return run_timed<Gemm>(args, samples, reps, s, out);
}

}  // namespace

std::string int8_gemm_sm90_run(int config, int m, int n, int k, const int8_t* x, const int8_t* w,
                               int8_t* y, float alpha, int samples, int reps, cudaStream_t s,
                               EventTiming* out) {
  using RunFn = std::string (*)(int, int, int, const int8_t*, const int8_t*, int8_t*, float, int,
                                int, cudaStream_t, EventTiming*);
  static constexpr RunFn kConfigs[] = {
      run<PlainGemm<Shape<_64, _128, _64>, Pingpong, PingpongEpilogue>>,
      run<PlainGemm<Shape<_64, _64, _64>, Pingpong, PingpongEpilogue>>,
      run<PlainGemm<Shape<_128, _128, _64>, Cooperative, CooperativeEpilogue>>,
      run<PlainGemm<Shape<_128, _64, _64>, Cooperative, CooperativeEpilogue>>,
  };
  if (config < 0 || config >= static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0])))
    return "no such configuration";
  return kConfigs[config](m, n, k, x, w, y, alpha, samples, reps, s, out);
}

}  // namespace yolocu::bench

// Hopper's INT8 convolution for any filter (conv_int8_sm90_im2col.hpp): CUTLASS's sm90 conv
// mainloop (TMA im2col, cooperative: two consumer warp groups on one 128- or 256-pixel tile) and the
// epilogue of sm90_conv_epilogue.cuh, in the persistent kernel of sm90_persistent_conv.cuh.
// Compiled for sm_90a alone, with conv_int8_sm90.cu (src/engine/CMakeLists.txt).
#include "engine/cuda/int8/conv_int8_sm90_im2col.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "cutlass/device_kernel.h"
#include "engine/cuda/int8/int8_gemm_sm90_types.cuh"
#include "engine/cuda/int8/sm90_conv_epilogue.cuh"
#include "engine/cuda/int8/sm90_persistent_conv.cuh"
#include "engine/cuda/tactics/smem_limit.hpp"

namespace yolocu::engine::sm90 {
namespace {

using namespace cute;
using cutlass::conv::Operator;
using ConvShape = cutlass::conv::ConvProblemShape<Operator::kFprop, 2>;

// CUTLASS's builder makes the cooperative mainloop (two consumer warp groups, TiledMma atoms 2x1)
// only under a schedule tag its dispatch policy refuses ("persistent schedules not supported for
// conv yet"): the same collective with the tag its non-persistent kernel takes. The tag selects no
// code in the collective itself; the persistent loop is sm90_persistent_conv.cuh's.
template <class C>
struct PlainSchedule;
template <Operator Op, int Stages, int Dims, class Cluster, class Schedule, int MmaStages, class Tile, class EA, class EB,
          class Mma, class TA, class TB>
struct PlainSchedule<cutlass::conv::collective::CollectiveConv<
    cutlass::conv::MainloopSm90TmaGmmaWarpSpecializedImplicitGemm<Op, Stages, Dims, Cluster, Schedule, MmaStages>, Tile,
    EA, EB, Mma, TA, TB>> {
  using type = cutlass::conv::collective::CollectiveConv<
      cutlass::conv::MainloopSm90TmaGmmaWarpSpecializedImplicitGemm<
          Op, Stages, Dims, Cluster, cutlass::conv::KernelImplicitTmaWarpSpecializedSm90, MmaStages>,
      Tile, EA, EB, Mma, TA, TB>;
};

// The kernel for one tile, epilogue tile, output type and fusion; ElementC the residual's type (void:
// none).
template <class TileShape, class EpiTile, class ElementD, class Fusion, class ElementC>
struct Im2col {
  using Epilogue = typename Int8Epilogue<TileShape, CooperativeEpilogue, ElementD, Fusion, EpiTile, ElementC>::Op;
  using Mainloop = typename PlainSchedule<typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Operator::kFprop, int8_t, cutlass::layout::TensorNHWC, 16,
      int8_t, cutlass::layout::TensorNHWC, 16, int32_t, TileShape, Shape<_1, _1, _1>,
      cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::conv::KernelImplicitTmaWarpSpecializedSm90Cooperative>::CollectiveOp>::type;
  using Op = PersistentConv<Mainloop, Epilogue>;
};

ConvShape conv_shape(const Int8ConvArgs& a) {
  return ConvShape(cutlass::conv::Mode::kCrossCorrelation, {a.n, a.h, a.w_, a.c}, {a.k, a.r, a.s, a.c},
                   {a.pad_h, a.pad_w}, {a.pad_h, a.pad_w},  // CUTLASS's output size is then a.p x a.q
                   {a.str_h, a.str_w}, {a.dil_h, a.dil_w}, 1);
}

template <class K>
typename K::Op::Arguments arguments(const Int8ConvArgs& a) {
  using Op = typename K::Op;
  using Epi = typename K::Epilogue;
  const int64_t m = int64_t{a.n} * a.p * a.q;
  typename Op::Arguments args{conv_shape(a), {a.x, a.w}, {}};
  typename Epi::StrideC dc{};
  typename Epi::StrideD dd{};
  get<0>(dc) = a.k, get<2>(dc) = m * a.k;  // the residual: packed [m, k]
  get<0>(dd) = a.y_pitch ? a.y_pitch : a.k, get<2>(dd) = m * get<0>(dd);
  args.epilogue.dC = dc;
  args.epilogue.dD = dd;
  args.epilogue.ptr_C = static_cast<typename Epi::ElementC const*>(a.residual);
  args.epilogue.ptr_D = static_cast<typename Epi::ElementD*>(a.y);
  const int8::Scale ys = int8::make_scale(a.y_scale);
  if constexpr (K::kTwo) {  // int8 D over the fp16 auxiliary store (y2) over the value
    const auto aux = K::Two::aux_args(a.y2, a.y2_pitch ? a.y2_pitch : a.k, m);
    if constexpr (K::kResidual)
      args.epilogue.thread = {{{{}, {a.scale}, {a.bias, 0.f}, {}, {ys}}, aux}, {ys}};
    else
      args.epilogue.thread = {{{{}, {a.scale}, {a.bias, 0.f}, {ys}}, aux}, {ys}};
  } else if constexpr (K::kResidual) {
    args.epilogue.thread = {{}, {a.scale}, {a.bias, 0.f}, {}, {ys}};
  } else {
    args.epilogue.thread = {{}, {a.scale}, {a.bias, 0.f}, {ys}};
  }
  return args;
}

int sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return 0;
  return sms;
}

template <class K>
std::string check(const Int8ConvArgs& a) {
  if (K::Op::can_implement(arguments<K>(a))) return {};
  return "CUTLASS's im2col mainloop cannot run this problem (TMA im2col's padding, corner and filter limits)";
}

template <class K>
void launch(const Int8ConvArgs& a, cudaStream_t stream) {
  using Op = typename K::Op;
  const typename Op::Params params = Op::to_underlying_arguments(arguments<K>(a));
  auto* fn = &cutlass::device_kernel<Op>;
  constexpr int kSmem = Op::SharedStorageSize;
  raise_smem_limit(reinterpret_cast<const void*>(fn), kSmem);  // per device, once
  const int tiles = params.tiles_m * params.tiles_n;
  const int grid = std::max(1, std::min(tiles, sm_count()));
  fn<<<grid, Op::MaxThreadsPerBlock, kSmem, stream>>>(params);
  const cudaError_t e = cudaGetLastError();
  YOLOCU_CHECK(e == cudaSuccess, kCuda, "int8 im2col: launch failed: ", cudaGetErrorString(e));
}

// One kernel of the list: its tile and epilogue tile, in four forms (int8 / fp16 out, SiLU or not),
// two with an fp16 residual (SiLU, int8 / fp16 out: YOLO's bottlenecks) and two writing both forms
// (SiLU, with and without the residual).
template <class TileShape, class EpiTile>
struct Family {
  template <class ElementD, bool kInt8, bool kSilu, bool kRes, bool kBoth = false>
  struct K {
    static constexpr bool kResidual = kRes, kTwo = kBoth;
    using Two = TwoOutputs<TileShape, EpiTile, kRes>;
    using One = std::conditional_t<kRes, ConvResidualTree<TileShape, ElementD, ConvEpilogue<kInt8, kSilu>::template Fn>,
                                   ConvTree<TileShape, ElementD, ConvEpilogue<kInt8, kSilu>::template Fn, false>>;
    using Tree = std::conditional_t<kBoth, typename Two::Tree, One>;
    using Cfg = Im2col<TileShape, EpiTile, ElementD, Tree, std::conditional_t<kRes, cutlass::half_t, void>>;
    using Op = typename Cfg::Op;
    using Epilogue = typename Cfg::Epilogue;
  };
  template <class F>
  static auto dispatch(const Int8ConvArgs& a, F&& f) {
    using H = cutlass::half_t;
    const bool i8 = a.out == Int8Out::kInt8, res = a.residual_type == Int8Residual::kHalf;
    if (a.y2 && res) return f(K<int8_t, true, true, true, true>{});  // (int8 first: int8_sm90_run's order)
    if (a.y2) return f(K<int8_t, true, true, false, true>{});
    if (res && i8) return f(K<int8_t, true, true, true>{});
    if (res) return f(K<H, false, true, true>{});
    if (i8 && a.silu) return f(K<int8_t, true, true, false>{});
    if (i8) return f(K<int8_t, true, false, false>{});
    if (a.silu) return f(K<H, false, true, false>{});
    return f(K<H, false, false, false>{});
  }
  static std::string unsupported(const Int8ConvArgs& a) {
    return dispatch(a, [&](auto k) { return check<decltype(k)>(a); });
  }
  static void run(const Int8ConvArgs& a, cudaStream_t s) {
    dispatch(a, [&](auto k) {
      launch<decltype(k)>(a, s);
      return 0;
    });
  }
};

// The kernels, in im2col_kernels()'s order: id, what it refuses, its launch.
struct Entry {
  const char* id;
  std::string (*unsupported)(const Int8ConvArgs&);
  void (*run)(const Int8ConvArgs&, cudaStream_t);
};
template <class F>
constexpr Entry entry(const char* id) {
  return {id, &F::unsupported, &F::run};
}
using EpiAuto = cutlass::epilogue::collective::EpilogueTileAuto;
const Entry kKernels[] = {
    entry<Family<Shape<_128, _64, Shape<_64>>, EpiAuto>>("int8-sm90:im2col-128x64x64"),
    entry<Family<Shape<_128, _128, Shape<_64>>, EpiAuto>>("int8-sm90:im2col-128x128x64"),
    entry<Family<Shape<_256, _64, Shape<_64>>, Shape<_128, _64>>>("int8-sm90:im2col-256x64x64-e128x64"),
    entry<Family<Shape<_128, _32, Shape<_64>>, Shape<_128, _32>>>("int8-sm90:im2col-128x32x64-e128x32"),
    // a reduction step of 32 channels: one tap at a time where the layer has 32 (or 16) channels
    entry<Family<Shape<_128, _64, Shape<_32>>, EpiAuto>>("int8-sm90:im2col-128x64x32"),
    entry<Family<Shape<_128, _32, Shape<_32>>, Shape<_128, _32>>>("int8-sm90:im2col-128x32x32-e128x32"),
};
constexpr int kKernelCount = static_cast<int>(sizeof(kKernels) / sizeof(kKernels[0]));

}  // namespace

const std::vector<std::string>& im2col_kernels() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> v;
    for (const Entry& e : kKernels) v.push_back(e.id);
    return v;
  }();
  return ids;
}

std::string im2col_unsupported(const Int8ConvArgs& a, int kernel) {
  if (kernel < 0 || kernel >= kKernelCount) return "no im2col kernel " + std::to_string(kernel);
  if (a.residual_type == Int8Residual::kInt8) return "an int8 residual is not taken on this path (fp16 is)";
  if (a.residual_type == Int8Residual::kHalf && !a.silu) return "a residual only after SiLU on this path";
  if (a.residual && reinterpret_cast<uintptr_t>(a.residual) % 16 != 0) return "the residual must be 16-byte aligned";
  if (a.residual_type == Int8Residual::kHalf && a.k % 8 != 0) return "residual channels must be a multiple of 8";
  return kKernels[kernel].unsupported(a);
}

void im2col_run(const Int8ConvArgs& a, int kernel, cudaStream_t stream) { kKernels[kernel].run(a, stream); }

}  // namespace yolocu::engine::sm90

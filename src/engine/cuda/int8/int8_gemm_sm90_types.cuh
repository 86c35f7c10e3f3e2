// CUTLASS's persistent sm90 INT8 GEMM as yolocu builds it, for conv_int8_sm90.cu and for
// bench_conv_int8_sm90's plain-epilogue comparison (bench/bench_int8_gemm_sm90.cu):
//   D[M, N] = epilogue(acc),  acc = X[M, K] W[N, K]^T in int32
// X row-major and W K-major (CUTLASS's column-major B: int8 wgmma takes both operands K-major), D
// row-major of ElementD; `Fusion` is the epilogue's fusion operation or visitor tree, run over
// EpilogueTile-sized parts of the CTA's tile (CUTLASS's choice by default). sm_90a only.
#pragma once

#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace yolocu::engine::sm90 {

// The epilogue alone: D[M, N] row-major of ElementD (rows may be pitched), from int32
// accumulators through `Fusion`; ElementC the type of a source tensor C[M, N] the fusion reads
// (void: none). Also the im2col convolution's epilogue (conv_int8_sm90_im2col.cu).
template <class TileShape, class EpilogueSchedule, class ElementD, class Fusion,
          class EpilogueTile = cutlass::epilogue::collective::EpilogueTileAuto, class ElementC = void>
struct Int8Epilogue {
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;  // 16 int8, 8 fp16
  static constexpr int kAlignC =
      std::is_void_v<ElementC> ? kAlignD : 128 / cutlass::sizeof_bits<std::conditional_t<std::is_void_v<ElementC>, int8_t, ElementC>>::value;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using Op = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      EpilogueTile, int32_t, float, ElementC,
      cutlass::layout::RowMajor, kAlignC, ElementD, cutlass::layout::RowMajor, kAlignD,
      EpilogueSchedule, Fusion>::CollectiveOp;
};

template <class TileShape, class KernelSchedule, class EpilogueSchedule, class ElementD,
          class Fusion, class EpilogueTile = cutlass::epilogue::collective::EpilogueTileAuto>
struct Int8Gemm {
  static constexpr int kAlignAB = 16;  // int8 elements of 16 bytes
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using Epilogue = typename Int8Epilogue<TileShape, EpilogueSchedule, ElementD, Fusion, EpilogueTile>::Op;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, cutlass::layout::RowMajor,
      kAlignAB, int8_t, cutlass::layout::ColumnMajor, kAlignAB, int32_t, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// The operands' strides for a problem m x n x k whose D rows are ldd elements apart (n: packed).
template <class Kernel>
struct Int8GemmStrides {
  typename Kernel::StrideA a;
  typename Kernel::StrideB b;
  typename Kernel::StrideC c;
  typename Kernel::StrideD d;
  Int8GemmStrides(int m, int n, int k, int ldd)
      : a(cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(m, k, 1))),
        b(cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(n, k, 1))),
        c(cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, cute::make_shape(m, n, 1))),
        d(cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(m, n, 1))) {
    cute::get<0>(d) = ldd;
  }
};

using Pingpong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using PingpongEpilogue = cutlass::epilogue::TmaWarpSpecialized;
using CooperativeEpilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;

}  // namespace yolocu::engine::sm90

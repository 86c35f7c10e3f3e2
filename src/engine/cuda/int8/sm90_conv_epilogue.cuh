// The fused epilogue of yolocu's Hopper INT8 convolutions (conv_int8_sm90.cu: 1x1 layers as a
// persistent GEMM; conv_int8_sm90_im2col.cu: any filter through the im2col mainloop), as a node of
// CUTLASS's epilogue visitor tree over the int32 accumulator and the scale and bias rows:
// int8_math.hpp's conv_value, then its requantisation (int8 out) or the value (fp16 out): the same
// results bit for bit as the mma.sync kernel (conv_int8_kernel.hpp). sm_90a translation units only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "engine/cuda/int8/int8_math.hpp"
#include "engine/cuda/int8/sm90_resident_row.cuh"

namespace yolocu::engine::sm90 {

struct EpilogueArgs {
  int8::Scale y_scale;  // int8 output
};

// The epilogue node (Sm90Compute's ComputeFn): A is cutlass::Array<float, N> (acc converted by
// round-to-nearest, exact below 2^24 as int8_math.hpp's i2f), scale[k] and bias[k] (0 without a
// bias), and with a residual its fp16 value (the epilogue's source tensor, converted exactly), added
// as int8_math.hpp's add_residual_f32. Int8 outputs leave the node as int8_math.hpp's v * (1 /
// y_scale), and the node's conversion to int8 (CUTLASS's round-to-nearest: cvt.rni to int32, then
// a saturating pack) completes requantize_value (round half to even, saturate, NaN -> 0) in its own
// instructions; fp16 outputs leave as the value, converted by round-to-nearest. SiLU is a template
// argument: as a run-time switch it was a branch per element, with the SiLU code inline beside the
// plain one, on which the kernel without SiLU stalled (branches, instruction fetch).
template <bool kInt8Out, bool kSilu>
struct ConvEpilogue {
  template <class T>
  struct Fn {
    using Arguments = EpilogueArgs;
    static CUTLASS_DEVICE float value(float acc, float scale, float bias) {
      const float v = int8::fma_rn(acc, scale, bias);
      if constexpr (kSilu) return int8::silu_f32(v);
      return v;
    }
    static CUTLASS_DEVICE float leave(float v, Arguments const& args) {
      return kInt8Out ? int8::mul_rn(v, args.y_scale.inv) : v;
    }
    template <class A>
    CUTLASS_DEVICE A operator()(A const& acc, A const& scale, A const& bias, Arguments const& args) const {
      A out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < A::kElements; ++i) out[i] = leave(value(acc[i], scale[i], bias[i]), args);
      return out;
    }
    template <class A>
    CUTLASS_DEVICE A operator()(A const& acc, A const& scale, A const& bias, A const& res,
                                Arguments const& args) const {
      A out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < A::kElements; ++i)
        out[i] = leave(int8::add_residual_f32(value(acc[i], scale[i], bias[i]), res[i]), args);
      return out;
    }
  };
};

// The scale and bias rows: CUTLASS's row broadcast (staged in shared memory every tile), or
// sm90_resident_row.cuh's (staged once per CTA, for rows of up to kResidentMaxN channels).
constexpr int kResidentMaxN = 1024;
template <class TileShape, bool kResident>
using RowLeaf = std::conditional_t<kResident, ResidentRowBroadcast<TileShape, float, kResidentMaxN>,
                                   cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float>>;

// The layer's epilogue as a visitor tree over the accumulator and the scale and bias rows, its node
// ConvEpilogue<...>::Fn; the GEMM of int8_gemm_sm90_types.cuh around it.
template <class TileShape, class ElementD, template <class> class Fn, bool kResident>
using ConvTree = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<Fn, ElementD, float,
                                           cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch, RowLeaf<TileShape, kResident>, RowLeaf<TileShape, kResident>>;

// With an fp16 residual: the epilogue's source tensor C (the residual, [M, N] packed, loaded by the
// kernel's epilogue load warp), the node's fourth input.
template <class TileShape, class ElementD, template <class> class Fn>
using ConvResidualTree = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<Fn, ElementD, float,
                                           cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch, RowLeaf<TileShape, false>, RowLeaf<TileShape, false>,
    cutlass::epilogue::fusion::Sm90SrcFetch<cutlass::half_t>>;

// Two outputs from one epilogue, as the mma.sync kernel writes y and y2 from one value: the value
// v (ConvEpilogue's, SiLU, + the fp16 residual where there is one, left in float) stored in fp16 by
// CUTLASS's auxiliary store (a TMA store of its own, [M, N] row-major, rows pitched), and its
// requantisation as D (int8, ConvEpilogue's). The auxiliary store converts by round-to-nearest and
// passes v on unchanged.
struct QuantiseValue {
  template <class T>
  struct Fn {
    using Arguments = EpilogueArgs;
    template <class A>
    CUTLASS_DEVICE A operator()(A const& v, Arguments const& args) const {
      A out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < A::kElements; ++i) out[i] = ConvEpilogue<true, false>::Fn<T>::leave(v[i], args);
      return out;
    }
  };
};
// The tree for a layer with SiLU and two outputs (int8 D, fp16 auxiliary); ElementC half with a
// residual (the epilogue's source), void without. EpiTile as given to the epilogue's builder.
template <class TileShape, class EpiTile, bool kResidual>
struct TwoOutputs {
  using ElementC = std::conditional_t<kResidual, cutlass::half_t, void>;
  using Desc = cutlass::epilogue::collective::detail::EpilogueDescriptor<
      TileShape, EpiTile, ElementC, int8_t, cutlass::epilogue::TmaWarpSpecializedCooperative>;
  using AuxDesc = cutlass::epilogue::collective::detail::AuxStoreDescriptor<Desc, cutlass::layout::RowMajor, cutlass::half_t>;
  using Aux = cutlass::epilogue::fusion::Sm90AuxStore<
      AuxDesc::Stages, typename Desc::EpilogueTile, cutlass::half_t, cutlass::FloatRoundStyle::round_to_nearest,
      typename AuxDesc::Stride, typename AuxDesc::SmemLayoutAtom, typename AuxDesc::CopyOpR2S>;
  using ValueNode = cutlass::epilogue::fusion::Sm90Compute<ConvEpilogue<false, true>::template Fn, float, float,
                                                           cutlass::FloatRoundStyle::round_to_nearest>;
  using Value = std::conditional_t<
      kResidual,
      cutlass::epilogue::fusion::Sm90EVT<ValueNode, cutlass::epilogue::fusion::Sm90AccFetch, RowLeaf<TileShape, false>,
                                         RowLeaf<TileShape, false>, cutlass::epilogue::fusion::Sm90SrcFetch<cutlass::half_t>>,
      cutlass::epilogue::fusion::Sm90EVT<ValueNode, cutlass::epilogue::fusion::Sm90AccFetch, RowLeaf<TileShape, false>,
                                         RowLeaf<TileShape, false>>>;
  using Tree = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<QuantiseValue::Fn, int8_t, float, cutlass::FloatRoundStyle::round_to_nearest>,
      cutlass::epilogue::fusion::Sm90EVT<Aux, Value>>;
  // The auxiliary store's arguments: the fp16 output y2, m rows `pitch` elements apart.
  static typename Aux::Arguments aux_args(void* y2, int64_t pitch, int64_t m) {
    typename AuxDesc::Stride d{};
    cute::get<0>(d) = pitch, cute::get<2>(d) = m * pitch;
    return {static_cast<cutlass::half_t*>(y2), d};
  }
};

inline bool device_is_sm90() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return false;
  return major == 9 && minor == 0;
}

}  // namespace yolocu::engine::sm90

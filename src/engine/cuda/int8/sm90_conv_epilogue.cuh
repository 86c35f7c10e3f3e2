// The fused epilogue of yolocu's Hopper INT8 convolutions (conv_int8_sm90.cu: 1x1 layers as a
// persistent GEMM; conv_int8_sm90_im2col.cu: any filter through the im2col mainloop), as a node of
// CUTLASS's epilogue visitor tree over the int32 accumulator and the scale and bias rows:
// int8_math.hpp's conv_value, then its quantisation (int8 out) or the value (fp16 out): the same
// results bit for bit as the mma.sync kernel (conv_int8_kernel.hpp). sm_90a translation units only.
#pragma once

#include <cuda_runtime_api.h>

#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "engine/cuda/int8/int8_math.hpp"
#include "engine/cuda/int8/sm90_resident_row.cuh"

namespace yolocu::engine::sm90 {

struct EpilogueArgs {
  int8::Scale y_scale;  // int8 output
};

// The epilogue node (Sm90Compute's ComputeFn): A is cutlass::Array<float, N> (acc converted by
// round-to-nearest, exact below 2^24 as int8_math.hpp's i2f), scale[k] and bias[k] (0 without a
// bias). Int8 outputs leave the node as int8_math.hpp's v / y_scale, and the node's conversion to
// int8 (CUTLASS's round-to-nearest: cvt.rni to int32, then a saturating pack) completes
// quantize_value (round half to even, saturate, NaN -> 0) in its own instructions; fp16 outputs
// leave as the value, converted by round-to-nearest. SiLU is a template argument: as a run-time
// switch it was a branch per element, with the SiLU code inline beside the plain one, on which the
// kernel without SiLU stalled (branches, instruction fetch).
template <bool kInt8Out, bool kSilu>
struct ConvEpilogue {
  template <class T>
  struct Fn {
    using Arguments = EpilogueArgs;
    template <class A>
    CUTLASS_DEVICE A operator()(A const& acc, A const& scale, A const& bias,
                                Arguments const& args) const {
      A out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < A::kElements; ++i) {
        float v = int8::fma_rn(acc[i], scale[i], bias[i]);
        if constexpr (kSilu) v = int8::silu_f32(v);
        out[i] = kInt8Out ? int8::div_by(v, args.y_scale) : v;
      }
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
// kernel's epilogue load warp), added to the activated value as int8_math.hpp's add_residual_f32
// (the node receives it converted to float, exactly).
template <bool kInt8Out, bool kSilu>
struct ConvResidualEpilogue {
  template <class T>
  struct Fn {
    using Arguments = EpilogueArgs;
    template <class A>
    CUTLASS_DEVICE A operator()(A const& acc, A const& scale, A const& bias, A const& res,
                                Arguments const& args) const {
      A out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < A::kElements; ++i) {
        float v = int8::fma_rn(acc[i], scale[i], bias[i]);
        if constexpr (kSilu) v = int8::silu_f32(v);
        v = int8::add_residual_f32(v, res[i]);
        out[i] = kInt8Out ? int8::div_by(v, args.y_scale) : v;
      }
      return out;
    }
  };
};
template <class TileShape, class ElementD, template <class> class Fn>
using ConvResidualTree = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<Fn, ElementD, float,
                                           cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch, RowLeaf<TileShape, false>, RowLeaf<TileShape, false>,
    cutlass::epilogue::fusion::Sm90SrcFetch<cutlass::half_t>>;

inline bool device_is_sm90() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return false;
  return major == 9 && minor == 0;
}

}  // namespace yolocu::engine::sm90

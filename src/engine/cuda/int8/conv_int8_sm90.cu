// Hopper's INT8 1x1 convolution as CUTLASS's persistent sm90 GEMM with conv_int8_kernel.hpp's
// epilogue fused (conv_int8_sm90.hpp). In NHWC a 1x1 stride-1 convolution is the GEMM
//   acc[m, k] = sum_c x[m, c] * w[k, c]     m: the n*h*w pixels, both operands K-major (int8
//   wgmma's layout)
// and the epilogue is one node of CUTLASS's epilogue visitor tree over the accumulator and two row
// broadcasts (scale[k], bias[k]): int8_math.hpp's conv_value, then int8_math.hpp's quantisation
// (int8 out) or the accumulator's value converted to fp16 by round-to-nearest, as the mma.sync
// kernel does. This translation unit is compiled for sm_90a alone (wgmma), apart from the library's
// other CUDA code, and only where CUTLASS 3.5+ is found (src/engine/CMakeLists.txt).
#include "engine/cuda/int8/conv_int8_sm90.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/check.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "engine/cuda/int8/conv_int8_sm90_im2col.hpp"
#include "engine/cuda/int8/int8_gemm_sm90_types.cuh"
#include "engine/cuda/int8/int8_math.hpp"
#include "engine/cuda/int8/sm90_conv_epilogue.cuh"
#include "engine/cuda/int8/sm90_resident_row.cuh"

namespace yolocu::engine {
namespace {

using namespace cute;
using namespace sm90;

template <class TileShape, class EpilogueTile, class ElementD, template <class> class Fn, bool kResident,
          bool kPingpong>
using Int8Conv1x1 = sm90::Int8Gemm<TileShape, std::conditional_t<kPingpong, Pingpong, Cooperative>,
                                   std::conditional_t<kPingpong, PingpongEpilogue, CooperativeEpilogue>, ElementD,
                                   ConvTree<TileShape, ElementD, Fn, kResident>, EpilogueTile>;

// The tree's arguments: its children's (accumulator, scale, bias), then the node's; with two
// outputs the quantisation node over the auxiliary store (its pointer and stride) over the value.
template <class Gemm>
using ThreadArgs = decltype(std::declval<typename Gemm::Arguments>().epilogue.thread);
template <class Thread>
Thread one_output_args(const Int8ConvArgs& a) {
  return {{}, {a.scale}, {a.bias, 0.f}, {int8::make_scale(a.y_scale)}};
}
template <class Thread, class Two>
Thread two_output_args(const Int8ConvArgs& a, int64_t m) {
  const int8::Scale ys = int8::make_scale(a.y_scale);  // (the value node leaves fp16: unused there)
  return {{{{}, {a.scale}, {a.bias, 0.f}, {ys}}, Two::aux_args(a.y2, a.y2_pitch ? a.y2_pitch : a.k, m)}, {ys}};
}

template <class Cfg, class Thread>
void run_gemm(const Int8ConvArgs& a, const Thread& thread, cudaStream_t stream) {
  using Gemm = typename Cfg::Gemm;
  using Kernel = typename Cfg::Kernel;
  const int m = a.n * a.h * a.w_, n = a.k, k = a.c;
  const Int8GemmStrides<Kernel> st(m, n, k, a.y_pitch ? a.y_pitch : a.k);  // pixels y_pitch apart
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {m, n, k, 1};
  args.mainloop = {a.x, st.a, a.w, st.b};
  args.epilogue.thread = thread;
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = st.c;
  args.epilogue.ptr_D = static_cast<typename Gemm::ElementD*>(a.y);
  args.epilogue.dD = st.d;
  Gemm gemm;
  YOLOCU_CHECK(gemm.can_implement(args) == cutlass::Status::kSuccess, kInvalidArgument,
               "int8_sm90_run: CUTLASS cannot run this problem (m ", m, ", n ", n, ", k ", k, ")");
  YOLOCU_CHECK(Gemm::get_workspace_size(args) == 0, kInternal,
               "int8_sm90_run: the kernel asks for a workspace");
  YOLOCU_CHECK(gemm.initialize(args, nullptr, stream) == cutlass::Status::kSuccess, kCuda,
               "int8_sm90_run: CUTLASS initialisation failed");
  YOLOCU_CHECK(gemm.run(stream) == cutlass::Status::kSuccess, kCuda,
               "int8_sm90_run: launch failed: ", cudaGetErrorString(cudaGetLastError()));
}

// Mostly cooperative kernels: their two consumer warp groups run the epilogue side by side, where
// pingpong's take turns (with the epilogue's former 30 instructions an output, up to 4x slower).
// Two pingpong kernels (one warp group's epilogue beside the other's math, tiles of 64 pixels, one
// output) for the layers with longer reductions, where the plain GEMM's best was pingpong. A
// kernel: the CTA's tile, and the part of it the epilogue runs at a time (CUTLASS's choice: 128 x
// 32). Tiles of 256 pixels halve the tiles, and with them the per-tile work of the epilogue (the
// scale and bias rows staged into shared memory, its barriers); the tile's width follows the
// layer's outputs.
template <class TileShape, class EpilogueTile, bool kResidentRows = false, bool kPingpongSchedule = false>
struct Kernel {
  // A TMA box spans at most 256 elements a dimension: with a larger tile CUTLASS prints that the
  // descriptor failed, reports success, and the kernel waits forever for its loads.
  static_assert(size<0>(TileShape{}) <= 256 && size<1>(TileShape{}) <= 256, "a TMA box is <= 256 a side");
  using Tile = TileShape;
  using Epi = EpilogueTile;
  static constexpr bool kResident = kResidentRows;
  static constexpr bool kPingpong = kPingpongSchedule;
};
using EpiAuto = cutlass::epilogue::collective::EpilogueTileAuto;

}  // namespace

namespace {
constexpr int kGemmKernels = 9;  // the 1x1 kernels, then the im2col ones

// A second output (y2): after SiLU, one output int8 and the other fp16 (either order: the int8 one
// is D, the fp16 one the auxiliary store), its pitch and address aligned like the first's.
std::string second_output_problem(const Int8ConvArgs& a) {
  if (!a.y2) return {};
  if (!a.silu) return "a second output only after SiLU on this path";
  if ((a.out == Int8Out::kInt8) == (a.out2 == Int8Out::kInt8))
    return "a second output must be of the other form (one int8, one fp16) on this path";
  const int align2 = a.out2 == Int8Out::kInt8 ? 16 : 8, pitch2 = a.y2_pitch ? a.y2_pitch : a.k;
  if (pitch2 % align2 != 0)
    return "the second output's pitch " + std::to_string(pitch2) + " must be a multiple of " + std::to_string(align2);
  if (reinterpret_cast<uintptr_t>(a.y2) % 16 != 0) return "y2 must be 16-byte aligned";
  return {};
}

// The int8 output first (D), the fp16 one second (the auxiliary store).
Int8ConvArgs int8_first(const Int8ConvArgs& a) {
  if (!a.y2 || a.out == Int8Out::kInt8) return a;
  Int8ConvArgs b = a;
  b.y = a.y2, b.out = a.out2, b.y_scale = a.y2_scale, b.y_pitch = a.y2_pitch;
  b.y2 = a.y, b.out2 = a.out, b.y2_scale = a.y_scale, b.y2_pitch = a.y_pitch;
  return b;
}
}  // namespace

const std::vector<std::string>& int8_sm90_kernels() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> v = {
        "int8-sm90:coop-128x64x64",           "int8-sm90:coop-256x32x64-e128x32",
        "int8-sm90:coop-256x64x64-e128x64",   "int8-sm90:coop-256x128x64-e128x64",
        "int8-sm90:coop-256x32x64-e128x32-r", "int8-sm90:coop-256x64x64-e128x64-r",
        "int8-sm90:coop-256x128x64-e128x64-r", "int8-sm90:pp-64x128x64",
        "int8-sm90:pp-64x64x64"};
    for (const std::string& k : im2col_kernels()) v.push_back(k);
    return v;
  }();
  return ids;
}

std::string int8_sm90_unsupported(const Int8ConvArgs& a, int kernel) {
  if (kernel < 0 || kernel >= static_cast<int>(int8_sm90_kernels().size()))
    return "no kernel " + std::to_string(kernel);
  std::string why = int8_conv_unsupported(a);
  if (!why.empty()) return why;
  if (kernel < kGemmKernels) {
    if (a.r != 1 || a.s != 1 || a.str_h != 1 || a.str_w != 1 || a.pad_h != 0 || a.pad_w != 0 ||
        a.dil_h != 1 || a.dil_w != 1)
      return "not a 1x1 stride-1 convolution without padding";
    if (a.residual_type != Int8Residual::kNone) return "no residual on this path";
  }
  if (a.split_k != 1) return "no split-K on this path";
  why = second_output_problem(a);
  if (!why.empty()) return why;
  const std::string& id = int8_sm90_kernels()[static_cast<size_t>(kernel)];
  if (a.y2 && id.back() == 'r') return "a second output is not taken with the resident rows";
  if (a.y2 && id.rfind("int8-sm90:pp-", 0) == 0) return "a second output is not taken by the pingpong kernels";
  if (a.out == Int8Out::kInt32) return "int8 or fp16 outputs only";
  const int align = a.out == Int8Out::kInt8 ? 16 : 8;  // 16 bytes: TMA's unit
  const int pitch = a.y_pitch ? a.y_pitch : a.k;
  if (a.k % align != 0 || pitch % align != 0)
    return "output channels " + std::to_string(a.k) + " and pitch " + std::to_string(pitch) +
           " must be multiples of " + std::to_string(align);
  if (id.back() == 'r' && a.k > kResidentMaxN)
    return "more than " + std::to_string(kResidentMaxN) + " output channels for the resident rows";
  if (reinterpret_cast<uintptr_t>(a.y) % 16 != 0) return "y must be 16-byte aligned";
  if (reinterpret_cast<uintptr_t>(a.scale) % 16 != 0 ||
      (a.bias && reinterpret_cast<uintptr_t>(a.bias) % 16 != 0))
    return "scale and bias must be 16-byte aligned";
  if (kernel >= kGemmKernels) {
    why = im2col_unsupported(int8_first(a), kernel - kGemmKernels);
    if (!why.empty()) return why;
  }
  if (!device_is_sm90()) return "needs an sm_90 GPU (Hopper)";
  return {};
}

template <class Cfg>
void run_one(const Int8ConvArgs& a, cudaStream_t stream) {
  run_gemm<Cfg>(a, one_output_args<ThreadArgs<typename Cfg::Gemm>>(a), stream);
}

template <class K>
void run_kernel(const Int8ConvArgs& a, cudaStream_t stream) {
  using T = typename K::Tile;
  using E = typename K::Epi;
  using H = cutlass::half_t;
  constexpr bool R = K::kResident, P = K::kPingpong;
  const bool i8 = a.out == Int8Out::kInt8;
  if (a.y2) {  // (int8 first: int8_sm90_run's order; int8_sm90_unsupported refuses it for R and P)
    if constexpr (!R && !P) {
      using Two = TwoOutputs<T, E, false>;
      using Cfg = sm90::Int8Gemm<T, Cooperative, CooperativeEpilogue, int8_t, typename Two::Tree, E>;
      const int64_t m = int64_t{a.n} * a.h * a.w_;
      return run_gemm<Cfg>(a, two_output_args<ThreadArgs<typename Cfg::Gemm>, Two>(a, m), stream);
    }
  }
  if (i8 && a.silu) return run_one<Int8Conv1x1<T, E, int8_t, ConvEpilogue<true, true>::Fn, R, P>>(a, stream);
  if (i8) return run_one<Int8Conv1x1<T, E, int8_t, ConvEpilogue<true, false>::Fn, R, P>>(a, stream);
  if (a.silu) return run_one<Int8Conv1x1<T, E, H, ConvEpilogue<false, true>::Fn, R, P>>(a, stream);
  return run_one<Int8Conv1x1<T, E, H, ConvEpilogue<false, false>::Fn, R, P>>(a, stream);
}

void int8_sm90_run(const Int8ConvArgs& a_in, int kernel, cudaStream_t stream) {
  const std::string why = int8_sm90_unsupported(a_in, kernel);
  YOLOCU_CHECK(why.empty(), kInvalidArgument, "int8_sm90_run: ", why);
  const Int8ConvArgs b = int8_first(a_in);
  if (kernel >= kGemmKernels) return im2col_run(b, kernel - kGemmKernels, stream);
  switch (kernel) {  // in int8_sm90_kernels()'s order
    case 0: return run_kernel<Kernel<Shape<_128, _64, _64>, EpiAuto>>(b, stream);
    case 1: return run_kernel<Kernel<Shape<_256, _32, _64>, Shape<_128, _32>>>(b, stream);
    case 2: return run_kernel<Kernel<Shape<_256, _64, _64>, Shape<_128, _64>>>(b, stream);
    case 3: return run_kernel<Kernel<Shape<_256, _128, _64>, Shape<_128, _64>>>(b, stream);
    case 4: return run_kernel<Kernel<Shape<_256, _32, _64>, Shape<_128, _32>, true>>(b, stream);
    case 5: return run_kernel<Kernel<Shape<_256, _64, _64>, Shape<_128, _64>, true>>(b, stream);
    case 6: return run_kernel<Kernel<Shape<_256, _128, _64>, Shape<_128, _64>, true>>(b, stream);
    case 7: return run_kernel<Kernel<Shape<_64, _128, _64>, EpiAuto, false, true>>(b, stream);
    default: return run_kernel<Kernel<Shape<_64, _64, _64>, EpiAuto, false, true>>(b, stream);
  }
}

}  // namespace yolocu::engine

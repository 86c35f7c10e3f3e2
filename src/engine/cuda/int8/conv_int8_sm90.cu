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

template <class TileShape, class EpilogueTile, class ElementD, template <class> class Fn, bool kResident>
using Int8Conv1x1 = sm90::Int8Gemm<TileShape, Cooperative, CooperativeEpilogue, ElementD,
                                   ConvTree<TileShape, ElementD, Fn, kResident>, EpilogueTile>;

template <class Cfg>
void run_gemm(const Int8ConvArgs& a, cudaStream_t stream) {
  using Gemm = typename Cfg::Gemm;
  using Kernel = typename Cfg::Kernel;
  const int m = a.n * a.h * a.w_, n = a.k, k = a.c;
  const Int8GemmStrides<Kernel> st(m, n, k, a.y_pitch ? a.y_pitch : a.k);  // pixels y_pitch apart
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {m, n, k, 1};
  args.mainloop = {a.x, st.a, a.w, st.b};
  // the tree's arguments: its children's (accumulator, scale, bias), then the node's
  args.epilogue.thread = {{}, {a.scale}, {a.bias, 0.f}, {int8::make_scale(a.y_scale)}};
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

// Cooperative kernels only: their two consumer warp groups run the epilogue side by side, where
// pingpong's take turns, and on these layers the epilogue is most of the time. A kernel: the CTA's
// tile, and the part of it the epilogue runs at a time (CUTLASS's choice: 128 x 32). Tiles of 256
// pixels halve the tiles, and with them the per-tile work of the epilogue (the scale and bias
// rows staged into shared memory, its barriers); the tile's width follows the layer's outputs.
template <class TileShape, class EpilogueTile, bool kResidentRows = false>
struct Kernel {
  // A TMA box spans at most 256 elements a dimension: with a larger tile CUTLASS prints that the
  // descriptor failed, reports success, and the kernel waits forever for its loads.
  static_assert(size<0>(TileShape{}) <= 256 && size<1>(TileShape{}) <= 256, "a TMA box is <= 256 a side");
  using Tile = TileShape;
  using Epi = EpilogueTile;
  static constexpr bool kResident = kResidentRows;
};
using EpiAuto = cutlass::epilogue::collective::EpilogueTileAuto;

}  // namespace

namespace {
constexpr int kGemmKernels = 7;  // the 1x1 kernels, then the im2col ones
}  // namespace

const std::vector<std::string>& int8_sm90_kernels() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> v = {
        "int8-sm90:coop-128x64x64",           "int8-sm90:coop-256x32x64-e128x32",
        "int8-sm90:coop-256x64x64-e128x64",   "int8-sm90:coop-256x128x64-e128x64",
        "int8-sm90:coop-256x32x64-e128x32-r", "int8-sm90:coop-256x64x64-e128x64-r",
        "int8-sm90:coop-256x128x64-e128x64-r"};
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
  if (a.y2) return "no second output on this path";
  if (a.out == Int8Out::kInt32) return "int8 or fp16 outputs only";
  const int align = a.out == Int8Out::kInt8 ? 16 : 8;  // 16 bytes: TMA's unit
  const int pitch = a.y_pitch ? a.y_pitch : a.k;
  if (a.k % align != 0 || pitch % align != 0)
    return "output channels " + std::to_string(a.k) + " and pitch " + std::to_string(pitch) +
           " must be multiples of " + std::to_string(align);
  if (int8_sm90_kernels()[static_cast<size_t>(kernel)].back() == 'r' && a.k > kResidentMaxN)
    return "more than " + std::to_string(kResidentMaxN) + " output channels for the resident rows";
  if (reinterpret_cast<uintptr_t>(a.y) % 16 != 0) return "y must be 16-byte aligned";
  if (reinterpret_cast<uintptr_t>(a.scale) % 16 != 0 ||
      (a.bias && reinterpret_cast<uintptr_t>(a.bias) % 16 != 0))
    return "scale and bias must be 16-byte aligned";
  if (kernel >= kGemmKernels) {
    why = im2col_unsupported(a, kernel - kGemmKernels);
    if (!why.empty()) return why;
  }
  if (!device_is_sm90()) return "needs an sm_90 GPU (Hopper)";
  return {};
}

template <class K>
void run_kernel(const Int8ConvArgs& a, cudaStream_t stream) {
  using T = typename K::Tile;
  using E = typename K::Epi;
  using H = cutlass::half_t;
  constexpr bool R = K::kResident;
  const bool i8 = a.out == Int8Out::kInt8;
  if (i8 && a.silu) return run_gemm<Int8Conv1x1<T, E, int8_t, ConvEpilogue<true, true>::Fn, R>>(a, stream);
  if (i8) return run_gemm<Int8Conv1x1<T, E, int8_t, ConvEpilogue<true, false>::Fn, R>>(a, stream);
  if (a.silu) return run_gemm<Int8Conv1x1<T, E, H, ConvEpilogue<false, true>::Fn, R>>(a, stream);
  return run_gemm<Int8Conv1x1<T, E, H, ConvEpilogue<false, false>::Fn, R>>(a, stream);
}

void int8_sm90_run(const Int8ConvArgs& a, int kernel, cudaStream_t stream) {
  const std::string why = int8_sm90_unsupported(a, kernel);
  YOLOCU_CHECK(why.empty(), kInvalidArgument, "int8_sm90_run: ", why);
  if (kernel >= kGemmKernels) return im2col_run(a, kernel - kGemmKernels, stream);
  switch (kernel) {  // in int8_sm90_kernels()'s order
    case 0: return run_kernel<Kernel<Shape<_128, _64, _64>, EpiAuto>>(a, stream);
    case 1: return run_kernel<Kernel<Shape<_256, _32, _64>, Shape<_128, _32>>>(a, stream);
    case 2: return run_kernel<Kernel<Shape<_256, _64, _64>, Shape<_128, _64>>>(a, stream);
    case 3: return run_kernel<Kernel<Shape<_256, _128, _64>, Shape<_128, _64>>>(a, stream);
    case 4: return run_kernel<Kernel<Shape<_256, _32, _64>, Shape<_128, _32>, true>>(a, stream);
    case 5: return run_kernel<Kernel<Shape<_256, _64, _64>, Shape<_128, _64>, true>>(a, stream);
    default: return run_kernel<Kernel<Shape<_256, _128, _64>, Shape<_128, _64>, true>>(a, stream);
  }
}

}  // namespace yolocu::engine

// The "cutlass" tactic family: CUTLASS's implicit-GEMM forward convolution (the 2.x device API,
// tensor cores through mma.sync; sm_80 kernels, which run on sm_90) with the layer's epilogue fused:
// y = SiLU(conv + bias) or conv + bias, fp16 in and out, fp32 accumulation. A small set of tile
// shapes is instantiated at build time; each is one candidate. Ids: "cutlass:tb<M>x<N>x<K>-s<stages>".
//
// The bias enters as CUTLASS's source tensor C, broadcast with zero strides, so it is read in the
// activation dtype (ConvBuffers::bias_act, fp16; the other families add the float32 bias): the
// tuner's check bounds what that rounding changes like any other candidate's. The output may be
// pitched (a copy-free Concat's slice): CUTLASS addresses output pixels by the W stride. Not
// covered: fp32, groups, a residual, a pitched input (a channel view: the "packin" wrapper runs such
// layers on a packed copy), input channels or outputs not a multiple of 8.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"

#if YOLOCU_WITH_CUTLASS
// (in this order: the device header needs the kernel's)
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/epilogue/thread/linear_combination_silu.h"
#include "cutlass/conv/kernel/default_conv2d_fprop.h"
// clang-format off
#include "cutlass/conv/device/implicit_gemm_convolution.h"
// clang-format on
#endif

namespace yolocu::engine {

#if YOLOCU_WITH_CUTLASS
namespace {

using Half = cutlass::half_t;
using Nhwc = cutlass::layout::TensorNHWC;
constexpr int kVector = 8;  // halves per 128-bit access: channels, outputs and the pitch are multiples

template <int M, int N, int K, int WM, int WN, int Stages, bool Silu>
struct Config {
  using Epilogue = std::conditional_t<Silu, cutlass::epilogue::thread::LinearCombinationSilu<Half, kVector, float, float>,
                                      cutlass::epilogue::thread::LinearCombination<Half, kVector, float, float>>;
  using Kernel = typename cutlass::conv::kernel::DefaultConv2dFprop<
      Half, Nhwc, Half, Nhwc, Half, Nhwc, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
      cutlass::gemm::GemmShape<M, N, K>, cutlass::gemm::GemmShape<WM, WN, K>, cutlass::gemm::GemmShape<16, 8, 16>,
      Epilogue, cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, Stages, cutlass::arch::OpMultiplyAdd,
      cutlass::conv::IteratorAlgorithm::kOptimized>::Kernel;
  using Conv = cutlass::conv::device::ImplicitGemmConvolution<Kernel>;
};

cutlass::conv::Conv2dProblemSize problem_size(const ConvProblem& pb) {
  return cutlass::conv::Conv2dProblemSize(pb.n, pb.h, pb.w, pb.c, pb.k, pb.r, pb.s, pb.p, pb.q, pb.pad_h, pb.pad_w,
                                          pb.str_h, pb.str_w, pb.dil_h, pb.dil_w,
                                          cutlass::conv::Mode::kCrossCorrelation);
}

// The arguments of one launch: x, w packed; the bias broadcast over every pixel (zero strides);
// y with the problem's pixel pitch.
template <typename Conv>
typename Conv::Arguments arguments(const ConvProblem& pb, const ConvBuffers& b) {
  const int64_t yp = pb.y_pitch();
  const Nhwc lx = Nhwc::packed({pb.n, pb.h, pb.w, pb.c});
  const Nhwc lw = Nhwc::packed({pb.k, pb.r, pb.s, pb.c});
  const Nhwc lb(0, 0, 0);
  const Nhwc ly(static_cast<int>(yp), static_cast<int>(yp * pb.q), static_cast<int>(yp * pb.q * pb.p));
  auto half = [](const void* p) { return static_cast<Half*>(const_cast<void*>(p)); };
  return typename Conv::Arguments(problem_size(pb), {half(b.x), lx}, {half(b.w), lw}, {half(b.bias_act), lb},
                                  {half(b.y), ly}, {1.f, 1.f});
}

// Host-side checks of a shape (no device pointers needed): what CUTLASS's can_implement checks,
// with placeholder pointers aligned like the engine's buffers.
template <typename Conv>
bool implementable(const ConvProblem& pb) {
  ConvBuffers probe;
  alignas(16) static const Half dummy[kVector] = {};
  probe.x = probe.w = probe.bias_act = dummy;
  probe.y = const_cast<Half*>(dummy);
  const typename Conv::Arguments args = arguments<Conv>(pb, probe);
  return Conv::can_implement(args) == cutlass::Status::kSuccess && Conv::get_workspace_size(args) == 0;
}

// The kernel is launched here, not through the device class's initialize() + run(): initialize()
// raises the kernel's shared-memory limit with cudaFuncSetAttribute on every call, which does not
// belong inside a CUDA graph capture; the constructor raises it once instead (like the own family).
template <typename Conv>
class CutlassTactic final : public ConvTactic {
  using Kernel = typename Conv::UnderlyingKernel;
  static constexpr int kSmem = static_cast<int>(sizeof(typename Kernel::SharedStorage));

 public:
  CutlassTactic(const ConvProblem& pb, std::string id) : pb_(pb), id_(std::move(id)) {
    name_ = "cutlass " + id_.substr(std::string("cutlass:").size());
    // (without a GPU, e.g. listing candidates in a CPU test, this fails harmlessly: nothing runs)
    if (kSmem >= (48 << 10) &&
        cudaFuncSetAttribute(cutlass::Kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) != cudaSuccess)
      (void)cudaGetLastError();
  }
  const std::string& id() const override { return id_; }
  const std::string& name() const override { return name_; }
  size_t workspace() const override { return 0; }
  int kernels() const override { return 1; }
  void run(cudnnHandle_t, const ConvBuffers& b, cudaStream_t s) const override {
    YOLOCU_CHECK(b.bias_act, kInternal, "conv ", pb_.signature(), ": the cutlass family needs the fp16 bias");
    const typename Kernel::Params params(arguments<Conv>(pb_, b), nullptr);
    typename Conv::ThreadblockSwizzle swizzle;
    const dim3 grid = swizzle.get_grid_shape(params.grid_tiled_shape);
    cutlass::Kernel<Kernel><<<grid, dim3(32 * Conv::kWarpCount, 1, 1), kSmem, s>>>(params);
    YOLOCU_CUDA_CHECK_LAUNCH();
  }

 private:
  ConvProblem pb_;
  std::string id_, name_;
};

// One entry per instantiated tile shape: its id, and the tactic of that shape with the problem's
// epilogue (SiLU or not), null where CUTLASS cannot run the problem with it.
struct Entry {
  const char* id;
  TacticPtr (*make)(const ConvProblem& pb, const char* id);
};

template <typename Conv>
TacticPtr make_if_implementable(const ConvProblem& pb, const char* id) {
  return implementable<Conv>(pb) ? std::make_unique<CutlassTactic<Conv>>(pb, id) : nullptr;
}

template <int M, int N, int K, int WM, int WN, int Stages>
Entry entry(const char* id) {
  return {id, [](const ConvProblem& pb, const char* i) {
            return pb.silu ? make_if_implementable<typename Config<M, N, K, WM, WN, Stages, true>::Conv>(pb, i)
                           : make_if_implementable<typename Config<M, N, K, WM, WN, Stages, false>::Conv>(pb, i);
          }};
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = {
      entry<128, 128, 32, 64, 64, 3>("cutlass:tb128x128x32-s3"),  // large maps, many outputs
      entry<128, 64, 32, 64, 32, 4>("cutlass:tb128x64x32-s4"),
      entry<64, 128, 32, 32, 64, 4>("cutlass:tb64x128x32-s4"),
      entry<64, 64, 32, 32, 32, 5>("cutlass:tb64x64x32-s5"),      // small maps (batch 1, late layers)
  };
  return all;
}

}  // namespace

bool cutlass_conv_shape_ok(const ConvProblem& pb) {
  return pb.half && pb.group == 1 && pb.bias && !pb.residual && pb.inputs_packed() && pb.c % kVector == 0 &&
         pb.k % kVector == 0 && pb.y_pitch() % kVector == 0;
}

std::vector<TacticPtr> cutlass_conv_candidates(const ConvProblem& pb, const TacticLimits& lim) {
  std::vector<TacticPtr> out;
  if (!lim.cutlass || !cutlass_conv_shape_ok(pb)) return out;
  for (const Entry& e : entries())
    if (TacticPtr t = e.make(pb, e.id)) out.push_back(std::move(t));
  return out;
}

TacticPtr make_cutlass_conv(const ConvProblem& pb, const std::string& id, const TacticLimits& lim) {
  if (!lim.cutlass || !cutlass_conv_shape_ok(pb)) return nullptr;
  for (const Entry& e : entries())
    if (id == e.id) return e.make(pb, e.id);
  return nullptr;
}

bool cutlass_conv_available() { return true; }

#else  // built without CUTLASS: the family offers nothing

bool cutlass_conv_shape_ok(const ConvProblem&) { return false; }
std::vector<TacticPtr> cutlass_conv_candidates(const ConvProblem&, const TacticLimits&) { return {}; }
TacticPtr make_cutlass_conv(const ConvProblem&, const std::string&, const TacticLimits&) { return nullptr; }
bool cutlass_conv_available() { return false; }

#endif

}  // namespace yolocu::engine

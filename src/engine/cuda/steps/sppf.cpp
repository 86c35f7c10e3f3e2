// Step kSppf: SPPF in one kernel (sppf_kernel.cu): Concat(x, MaxPool(x), MaxPool^2(x),
// MaxPool^3(x)) on NHWC values, stride-1 "same" pools of size GpuStep::pool.
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class SppfStep final : public Step {
 public:
  using Step::Step;
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const Shape xs = ctx.shape_at(st_.in[0]);
    ck::sppf_nhwc(ctx.ptr(st_.in[0]), ctx.ptr(st_.out[0]), ctx.half, static_cast<int>(xs[0]), static_cast<int>(xs[2]),
                  static_cast<int>(xs[3]), static_cast<int>(xs[1]),
                  static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(st_.in[0])]),
                  static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(st_.out[0])]), st_.pool, s);
  }
};

}  // namespace

std::unique_ptr<Step> make_sppf_step(const engine::GpuStep& st) { return std::make_unique<SppfStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kToNhwc: a plain float32 NCHW value -> its NHWC twin in the activation dtype.
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class ToNhwcStep final : public Step {
 public:
  using Step::Step;
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const Shape xs = ctx.shape_at(st_.in[0]);
    ck::nchw_to_nhwc(ctx.ptr(st_.in[0]), false, ctx.ptr(st_.out[0]), ctx.half, static_cast<int>(xs[0]),
                     static_cast<int>(xs[1]), static_cast<int>(xs[2]), static_cast<int>(xs[3]), s);
  }
};

}  // namespace

std::unique_ptr<Step> make_to_nhwc_step(const engine::GpuStep& st) { return std::make_unique<ToNhwcStep>(st); }

}  // namespace yolocu::cuda_engine_internal

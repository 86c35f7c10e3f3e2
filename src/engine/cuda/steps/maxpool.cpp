// Step kMaxPool: 2-D max pooling on NHWC values.
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class MaxPoolStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    const Node& n = ctx.node(st_).node;
    const auto k = n.attr_ints("kernel_shape");
    const auto str = n.attr_ints("strides", {1, 1});
    const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
    YOLOCU_CHECK(k.size() == 2 && str.size() == 2 && pads.size() == 4, kUnsupported, n.describe(),
                 ": only 2-D max pooling is supported");
    const Shape& xs = ctx.val(st_.in[0]).shape;
    const Shape& ys = ctx.val(st_.out[0]).shape;
    pool_ = {0, static_cast<int>(xs[2]), static_cast<int>(xs[3]), static_cast<int>(xs[1]), static_cast<int>(ys[2]),
             static_cast<int>(ys[3]), static_cast<int>(k[0]), static_cast<int>(k[1]), static_cast<int>(str[0]),
             static_cast<int>(str[1]), static_cast<int>(pads[0]), static_cast<int>(pads[1])};
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    ck::PoolParams p = pool_;
    p.n = static_cast<int>(ctx.shape_at(st_.in[0])[0]);
    ck::maxpool_nhwc(ctx.ptr(st_.in[0]), ctx.ptr(st_.out[0]), ctx.half, p, s);
  }

 private:
  ck::PoolParams pool_{};  // n filled at launch
};

}  // namespace

std::unique_ptr<Step> make_maxpool_step(const engine::GpuStep& st) { return std::make_unique<MaxPoolStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kSoftmax: softmax of a plain float32 value over one axis (opset >= 13) or over the trailing
// axes from `axis` (opset < 13).
#include <algorithm>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class SoftmaxStep final : public Step {
 public:
  using Step::Step;
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const engine::PlanNode& pn = ctx.node(st_);
    const Shape xs = ctx.shape_at(st_.in[0]);
    const int64_t r = static_cast<int64_t>(xs.size());
    const bool one_axis = ctx.sp.plan.opset >= 13;
    int64_t axis = pn.node.attr_int("axis", one_axis ? -1 : 1);
    if (axis < 0) axis += r;
    YOLOCU_CHECK(axis >= 0 && axis < std::max<int64_t>(r, 1), kInvalidArgument, pn.node.describe(), ": axis out of range");
    int64_t outer = 1, len = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= xs[static_cast<size_t>(d)];
    for (int64_t d = axis; d < r; ++d) (d == axis || !one_axis ? len : inner) *= xs[static_cast<size_t>(d)];
    ck::softmax_plain(ctx.fptr(st_.in[0]), ctx.fptr(st_.out[0]), outer, len, inner, s);
  }
};

}  // namespace

std::unique_ptr<Step> make_softmax_step(const engine::GpuStep& st) { return std::make_unique<SoftmaxStep>(st); }

}  // namespace yolocu::cuda_engine_internal

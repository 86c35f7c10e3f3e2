// Step kEltwiseNhwc: a same-shape unary or binary op on NHWC values, element by element.
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class EltwiseNhwcStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    op_ = ck::elt_op(ctx.node(st_).node.op_type.c_str());  // throws for an op without kernel
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    ck::eltwise_flat(op_, ctx.ptr(st_.in[0]), st_.in.size() > 1 ? ctx.ptr(st_.in[1]) : nullptr, ctx.ptr(st_.out[0]),
                     ctx.half, shape_numel(ctx.shape_at(st_.out[0])), s);
  }

 private:
  ck::EltOp op_{};
};

}  // namespace

std::unique_ptr<Step> make_eltwise_nhwc_step(const engine::GpuStep& st) { return std::make_unique<EltwiseNhwcStep>(st); }

}  // namespace yolocu::cuda_engine_internal

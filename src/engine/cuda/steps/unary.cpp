// Step kUnary: a unary op on a plain float32 value.
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class UnaryStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    op_ = ck::elt_op(ctx.node(st_).node.op_type.c_str());  // throws for an op without kernel
    for (int id : st_.in) ctx.upload_const(id);
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    ck::unary_plain(op_, ctx.fptr(st_.in[0]), ctx.fptr(st_.out[0]), shape_numel(ctx.shape_at(st_.out[0])), s);
  }

 private:
  ck::EltOp op_{};
};

}  // namespace

std::unique_ptr<Step> make_unary_step(const engine::GpuStep& st) { return std::make_unique<UnaryStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kBinary: a binary op on plain float32 values with numpy broadcasting (constants allowed).
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class BinaryStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    op_ = ck::elt_op(ctx.node(st_).node.op_type.c_str());  // throws for an op without kernel
    for (int id : st_.in) ctx.upload_const(id);
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const Shape ys = ctx.shape_at(st_.out[0]);
    ck::StridedParams p;
    p.rank = static_cast<int>(ys.size());
    for (int d = 0; d < p.rank; ++d) p.out_dims[d] = ys[static_cast<size_t>(d)];
    // Each operand's strides per output axis, 0 where it broadcasts.
    for (int k = 0; k < 2; ++k) {
      const Shape xs = ctx.shape_at(st_.in[static_cast<size_t>(k)]);
      const Shape str = row_major_strides(xs);
      const int lead = p.rank - static_cast<int>(xs.size());
      YOLOCU_CHECK(lead >= 0, kInternal, ctx.node(st_).node.describe(), ": input rank above output rank");
      for (int d = 0; d < p.rank; ++d) {
        int64_t v = 0;
        if (d >= lead) {
          const size_t xd = static_cast<size_t>(d - lead);
          v = (xs[xd] == 1 && ys[static_cast<size_t>(d)] != 1) ? 0 : str[xd];
        }
        (k == 0 ? p.a_strides : p.b_strides)[d] = v;
      }
    }
    ck::binary_plain(op_, ctx.fptr(st_.in[0]), ctx.fptr(st_.in[1]), ctx.fptr(st_.out[0]), p, s);
  }

 private:
  ck::EltOp op_{};
};

}  // namespace

std::unique_ptr<Step> make_binary_step(const engine::GpuStep& st) { return std::make_unique<BinaryStep>(st); }

}  // namespace yolocu::cuda_engine_internal

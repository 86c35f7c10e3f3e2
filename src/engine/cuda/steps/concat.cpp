// Step kConcat: a Concat of plain float32 values along any axis but the batch's (with max_batch
// > 1), a strided row copy per input.
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class ConcatStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    const engine::PlanNode& pn = ctx.node(st_);
    int64_t axis = pn.node.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(ctx.val(st_.out[0]).shape.size());
    axis_ = static_cast<int>(axis);
    YOLOCU_CHECK(axis > 0 || !ctx.multi_batch(), kUnsupported, pn.node.describe(),
                 ": concatenating along the batch axis is not supported with max_batch > 1");
    for (int id : st_.in) ctx.upload_const(id);
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const Shape ys = ctx.shape_at(st_.out[0]);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis_; ++d) outer *= ys[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(axis_) + 1; d < ys.size(); ++d) inner *= ys[d];
    const int64_t dst_pitch = ys[static_cast<size_t>(axis_)] * inner * 4;
    int64_t off = 0;
    for (int id : st_.in) {
      const Shape xs = ctx.shape_at(id);
      const int64_t chunk = xs[static_cast<size_t>(axis_)] * inner * 4;
      ck::copy_rows(ctx.ptr(id), chunk, static_cast<uint8_t*>(ctx.ptr(st_.out[0])) + off, dst_pitch, outer, chunk, s);
      off += chunk;
    }
  }
  int kernels(const LaunchContext& ctx) const override {
    (void)ctx;
    return static_cast<int>(st_.in.size());
  }

 private:
  int axis_ = 0;
};

}  // namespace

std::unique_ptr<Step> make_concat_step(const engine::GpuStep& st) { return std::make_unique<ConcatStep>(st); }

}  // namespace yolocu::cuda_engine_internal

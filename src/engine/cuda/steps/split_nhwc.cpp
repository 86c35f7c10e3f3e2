// Step kSplitNhwc: one output of a channel Split of an NHWC value (YOLOv8's C2f), a strided row
// copy of its channels.
#include <vector>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class SplitNhwcStep final : public Step {
 public:
  using Step::Step;

  // Channel offset of this output: the sizes of the outputs before it, from the node's split
  // sizes (input 2 from opset 13, else the attribute; none: equal parts).
  void setup(SetupContext& ctx) override {
    const engine::PlanNode& pn = ctx.node(st_);
    const Node& n = pn.node;
    const int64_t c = ctx.val(st_.in[0]).shape[1];
    std::vector<int64_t> sizes;
    if (pn.in.size() > 1 && pn.in[1] >= 0) {
      const Tensor& t = ctx.val(pn.in[1]).value;
      YOLOCU_CHECK(ctx.val(pn.in[1]).constant && t.dtype() == DType::kInt64, kUnsupported, n.describe(),
                   ": split sizes computed at run time are not supported on the GPU");
      sizes.assign(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
    } else {
      sizes = n.attr_ints("split", {});
    }
    const int64_t parts = static_cast<int64_t>(pn.out.size());
    if (sizes.empty()) sizes.assign(static_cast<size_t>(parts), parts > 0 ? c / parts : 0);
    YOLOCU_CHECK(static_cast<int64_t>(sizes.size()) == parts, kInvalidArgument, n.describe(), ": ", sizes.size(),
                 " split sizes for ", parts, " outputs");
    start_ = 0;
    for (int k = 0; k < st_.out_index; ++k) start_ += sizes[static_cast<size_t>(k)];
    YOLOCU_CHECK(start_ + ctx.val(st_.out[0]).shape[1] <= c, kInvalidArgument, n.describe(),
                 ": split sizes exceed the ", c, " channels");
  }

  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const int64_t es = static_cast<int64_t>(ctx.es);
    const Shape ys = ctx.shape_at(st_.out[0]);
    const int64_t src_pitch = ctx.sp.channel_pitch[static_cast<size_t>(st_.in[0])] * es;
    const int64_t c = ys[1] * es;
    ck::copy_rows(static_cast<const uint8_t*>(ctx.ptr(st_.in[0])) + start_ * es, src_pitch, ctx.ptr(st_.out[0]),
                  ctx.sp.channel_pitch[static_cast<size_t>(st_.out[0])] * es, ys[0] * ys[2] * ys[3], c, s);
  }

 private:
  int64_t start_ = 0;  // the output's first channel in the input
};

}  // namespace

std::unique_ptr<Step> make_split_nhwc_step(const engine::GpuStep& st) { return std::make_unique<SplitNhwcStep>(st); }

}  // namespace yolocu::cuda_engine_internal

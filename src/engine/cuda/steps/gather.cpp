// Step kGather: Transpose, Slice or one output of a Split on plain float32 values, as one strided
// gather (input strides per output axis and a base offset, from the node's attributes at setup).
// The batch axis stays in place with max_batch > 1.
#include <algorithm>
#include <vector>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"
#include "engine/ops.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class GatherStep final : public Step {
 public:
  using Step::Step;

  void setup(SetupContext& ctx) override {
    const std::string& op = ctx.node(st_).node.op_type;
    if (op == "Transpose")
      setup_transpose(ctx);
    else if (op == "Slice")
      setup_slice(ctx);
    else
      setup_split(ctx);
  }

  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const Shape xs = ctx.shape_at(st_.in[0]), ys = ctx.shape_at(st_.out[0]);
    const Shape str = row_major_strides(xs);
    ck::StridedParams p;
    p.rank = static_cast<int>(ys.size());
    for (int d = 0; d < p.rank; ++d) p.out_dims[d] = ys[static_cast<size_t>(d)];
    const std::string& op = ctx.node(st_).node.op_type;
    if (op == "Transpose") {
      for (int d = 0; d < p.rank; ++d) p.a_strides[d] = str[static_cast<size_t>(perm_[static_cast<size_t>(d)])];
    } else if (op == "Slice") {
      for (int d = 0; d < p.rank; ++d) {
        p.a_strides[d] = str[static_cast<size_t>(d)] * step_[static_cast<size_t>(d)];
        p.a_base += start_[static_cast<size_t>(d)] * str[static_cast<size_t>(d)];
      }
    } else {
      for (int d = 0; d < p.rank; ++d) p.a_strides[d] = str[static_cast<size_t>(d)];
      p.a_base = split_start_ * str[static_cast<size_t>(axis_)];
    }
    ck::gather_plain(ctx.fptr(st_.in[0]), ctx.fptr(st_.out[0]), p, s);
  }

 private:
  void setup_transpose(const SetupContext& ctx) {
    const Node& n = ctx.node(st_).node;
    const int64_t rank = static_cast<int64_t>(ctx.val(st_.in[0]).shape.size());
    perm_ = n.attr_ints("perm", {});
    if (perm_.empty())
      for (int64_t d = rank; d-- > 0;) perm_.push_back(d);
    YOLOCU_CHECK(static_cast<int64_t>(perm_.size()) == rank, kParse, n.describe(), ": perm has wrong rank");
    YOLOCU_CHECK(!ctx.multi_batch() || perm_[0] == 0, kUnsupported, n.describe(),
                 ": transposing the batch axis is not supported with max_batch > 1");
  }

  void setup_slice(const SetupContext& ctx) {
    const engine::PlanNode& pn = ctx.node(st_);
    const Node& n = pn.node;
    const Shape& xs = ctx.val(st_.in[0]).shape;
    const int64_t rank = static_cast<int64_t>(xs.size());
    const Shape& ys = ctx.val(st_.out[0]).shape;
    std::vector<int64_t> starts, axes, steps;
    if (ctx.sp.plan.opset >= 10) {
      auto cint = [&](size_t k) {
        if (pn.in.size() <= k || pn.in[k] < 0) return std::vector<int64_t>{};
        YOLOCU_CHECK(ctx.val(pn.in[k]).constant, kUnsupported, n.describe(), ": slice parameters must be constant");
        return ops::to_int_vector(ctx.val(pn.in[k]).value);
      };
      starts = cint(1);
      axes = cint(3);
      steps = cint(4);
    } else {
      starts = n.attr_ints("starts");
      axes = n.attr_ints("axes");
    }
    if (axes.empty())
      for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    start_.assign(static_cast<size_t>(rank), 0);
    step_.assign(static_cast<size_t>(rank), 1);
    for (size_t j = 0; j < axes.size(); ++j) {
      int64_t ax = axes[j] < 0 ? axes[j] + rank : axes[j];
      YOLOCU_CHECK(ax >= 0 && ax < rank && j < starts.size(), kParse, n.describe(), ": bad slice axes");
      const int64_t stp = j < steps.size() ? steps[j] : 1;
      YOLOCU_CHECK(stp != 0, kParse, n.describe(), ": slice step 0");
      const int64_t dim = xs[static_cast<size_t>(ax)];
      int64_t s0 = starts[j] < 0 ? starts[j] + dim : starts[j];
      s0 = stp > 0 ? std::clamp<int64_t>(s0, 0, dim) : std::clamp<int64_t>(s0, 0, dim - 1);
      start_[static_cast<size_t>(ax)] = s0;
      step_[static_cast<size_t>(ax)] = stp;
    }
    YOLOCU_CHECK(!ctx.multi_batch() || (start_[0] == 0 && step_[0] == 1 && ys[0] == xs[0]), kUnsupported,
                 n.describe(), ": slicing the batch axis is not supported with max_batch > 1");
  }

  void setup_split(const SetupContext& ctx) {
    const engine::PlanNode& pn = ctx.node(st_);
    const Node& n = pn.node;
    const int64_t rank = static_cast<int64_t>(ctx.val(st_.in[0]).shape.size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    axis_ = static_cast<int>(axis);
    YOLOCU_CHECK(axis > 0 || !ctx.multi_batch(), kUnsupported, n.describe(),
                 ": splitting the batch axis is not supported with max_batch > 1");
    for (int k = 0; k < st_.out_index; ++k)
      if (pn.out[static_cast<size_t>(k)] >= 0)
        split_start_ += ctx.val(pn.out[static_cast<size_t>(k)]).shape[static_cast<size_t>(axis)];
  }

  std::vector<int64_t> perm_;         // Transpose
  std::vector<int64_t> start_, step_;  // Slice: per input axis
  int64_t split_start_ = 0;           // Split: offset along axis_
  int axis_ = 0;
};

}  // namespace

std::unique_ptr<Step> make_gather_step(const engine::GpuStep& st) { return std::make_unique<GatherStep>(st); }

}  // namespace yolocu::cuda_engine_internal

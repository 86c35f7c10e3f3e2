// Step kResize: nearest resizing of NHWC values through per-axis source index tables (device).
#include <algorithm>
#include <vector>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class ResizeStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    const engine::PlanNode& pn = ctx.node(st_);
    const auto idx = engine::resize_indices(ctx.sp.plan, pn);
    YOLOCU_CHECK(idx.size() == 4, kInternal, pn.node.describe(), ": resize index tables");
    auto upload = [&](const std::vector<int64_t>& v) {
      std::vector<int> t(v.begin(), v.end());
      DeviceMem m = ctx.alloc(std::max<size_t>(t.size(), 1) * sizeof(int), "resize tables");
      YOLOCU_CUDA_CHECK(cudaMemcpy(m.get(), t.data(), t.size() * sizeof(int), cudaMemcpyHostToDevice));
      return m;
    };
    d_sy_ = upload(idx[2]);
    d_sx_ = upload(idx[3]);
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const Shape xs = ctx.shape_at(st_.in[0]), ys = ctx.shape_at(st_.out[0]);
    ck::resize_nearest_nhwc(ctx.ptr(st_.in[0]), static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(st_.in[0])]),
                            ctx.ptr(st_.out[0]), ctx.half, static_cast<int>(xs[0]),
                            static_cast<int>(xs[2]), static_cast<int>(xs[3]), static_cast<int>(xs[1]),
                            static_cast<int>(ys[2]), static_cast<int>(ys[3]),
                            static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(st_.out[0])]),
                            static_cast<const int*>(d_sy_.get()), static_cast<const int*>(d_sx_.get()), s);
  }

 private:
  DeviceMem d_sy_, d_sx_;  // source row of each output row, source column of each output column
};

}  // namespace

std::unique_ptr<Step> make_resize_step(const engine::GpuStep& st) { return std::make_unique<ResizeStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kV8Tail: YOLOv8 / YOLO11's Detect tail (engine::V8Head) in one launch for every level: the
// levels' box and class convolution outputs (NHWC) -> the plain float32 output [N, 4 + nc, A]
// (steps/v8_tail_kernel.cu).
#include "core/check.hpp"
#include "engine/cuda/steps/step.hpp"
#include "engine/cuda/steps/v8_tail_kernel.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

class V8TailStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    const engine::V8Head& h = ctx.sp.v8_heads[static_cast<size_t>(st_.head)];
    YOLOCU_CHECK(st_.in.size() == 2 * h.levels.size() && h.levels.size() <= engine::v8tail::kMaxLevels, kInternal,
                 st_.label, ": ", st_.in.size(), " inputs for ", h.levels.size(), " levels");
    // The kernel writes ctx.batch images: every level must hold one image per item.
    for (int id : st_.in)
      YOLOCU_CHECK(ctx.val(id).shape[0] == ctx.options.max_batch, kUnsupported, st_.label,
                   ": the YOLOv8 Detect head's input '", ctx.val(id).name, "' has ", ctx.val(id).shape[0],
                   " images in dim 0 where the engine's batch is ", ctx.options.max_batch);
    levels_.count = static_cast<int>(h.levels.size());
    for (size_t l = 0; l < h.levels.size(); ++l)
      levels_.level[l] = engine::v8tail::level_from(h.levels[l], ctx.sp.channel_pitch[static_cast<size_t>(st_.in[2 * l])],
                                                    ctx.sp.channel_pitch[static_cast<size_t>(st_.in[2 * l + 1])]);
    nc_ = h.nc;
    anchors_ = h.anchors;
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    cuda_kernels::V8TailLevels t = levels_;
    for (int l = 0; l < t.count; ++l) {
      t.box[l] = ctx.ptr(st_.in[static_cast<size_t>(2 * l)]);
      t.cls[l] = ctx.ptr(st_.in[static_cast<size_t>(2 * l + 1)]);
    }
    cuda_kernels::v8_tail(t, ctx.half, ctx.fptr(st_.out[0]), nc_, anchors_, ctx.batch, s);
  }

 private:
  cuda_kernels::V8TailLevels levels_;  // geometry and pitches (the pointers are set per launch)
  int64_t nc_ = 0, anchors_ = 0;
};

}  // namespace

std::unique_ptr<Step> make_v8_tail_step(const engine::GpuStep& st) { return std::make_unique<V8TailStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kDetectTail: the Detect head's tail (engine::DetectHead) in one launch for every level: the
// levels' head convolution outputs (NHWC) -> the merged plain float32 output, through per-level
// constant tables (engine/detect_tail.hpp) uploaded at setup.
#include <vector>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class DetectTailStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    // The kernel writes ctx.batch images of `rows` rows: every level must hold one image per item.
    for (int id : st_.in)
      YOLOCU_CHECK(ctx.val(id).shape[0] == ctx.options.max_batch, kUnsupported, st_.label, ": the Detect head's input '",
                   ctx.val(id).name, "' has ", ctx.val(id).shape[0], " images in dim 0 where the engine's batch is ",
                   ctx.options.max_batch);
    for (const engine::DetectLevel& L : ctx.sp.heads[static_cast<size_t>(st_.head)].levels) {
      std::vector<float> t;
      engine::tail::tables_of(L, &t);
      DeviceMem m = ctx.upload(t.data(), t.size() * sizeof(float), "Detect tail tables");
      levels_.push_back(engine::tail::level_from(L, static_cast<const float*>(m.get())));
      levels_.back().pitch = ctx.sp.channel_pitch[static_cast<size_t>(st_.in[levels_.size() - 1])];
      tables_.push_back(std::move(m));
    }
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const int64_t rows = ctx.sp.heads[static_cast<size_t>(st_.head)].rows;
    ck::TailLevels t;
    t.count = static_cast<int>(st_.in.size());
    YOLOCU_CHECK(t.count <= ck::kMaxTailLevels, kUnsupported, "Detect head with ", t.count, " levels (at most ",
                 ck::kMaxTailLevels, ")");
    for (size_t l = 0; l < st_.in.size(); ++l) {
      t.src[l] = ctx.ptr(st_.in[l]);
      t.level[l] = levels_[l];
    }
    ck::detect_tail(t, ctx.half, ctx.fptr(st_.out[0]), rows, ctx.batch, s);
  }

 private:
  std::vector<DeviceMem> tables_;            // per level, the 5 constant tables
  std::vector<engine::tail::Level> levels_;  // (tables pointing at tables_)
};

}  // namespace

std::unique_ptr<Step> make_detect_tail_step(const engine::GpuStep& st) { return std::make_unique<DetectTailStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kQuantize: the int8 copy of an NHWC fp16 value at one scale (planning/int8_lowering.cpp),
// for INT8 convolutions reading a value a float step wrote; int8_math.hpp's rounding.
#include "engine/cuda/int8/int8_convert.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

class QuantizeStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    const Shape& xs = ctx.val(st_.in[0]).shape;
    YOLOCU_CHECK(ctx.half && xs.size() == 4 && xs[1] % 4 == 0 && st_.scale > 0.f, kInternal, st_.label,
                 ": quantises fp16 NHWC values with a multiple of 4 channels, got ", shape_str(xs));
    channels_ = static_cast<int>(xs[1]);
    pitch_ = static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(st_.in[0])]);
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const Shape xs = ctx.shape_at(st_.in[0]);
    engine::int8_quantize_run(ctx.ptr(st_.in[0]), pitch_, channels_, static_cast<int8_t*>(ctx.ptr(st_.out[0])),
                              channels_, xs[0] * xs[2] * xs[3], st_.scale, s);
  }

 private:
  int channels_ = 0, pitch_ = 0;
};

}  // namespace

std::unique_ptr<Step> make_quantize_step(const engine::GpuStep& st) { return std::make_unique<QuantizeStep>(st); }

}  // namespace yolocu::cuda_engine_internal

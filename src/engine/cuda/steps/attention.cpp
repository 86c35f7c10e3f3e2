// Step kAttention: one C2PSA attention block (engine::AttentionBlock) in one launch: the qkv
// convolution's NHWC output -> x (NHWC, what the Add with pe's output and the proj convolution
// read) and pe's input Reshape(v) (NHWC) (steps/attention_kernel.cu).
#include <vector>

#include "core/check.hpp"
#include "engine/cuda/steps/attention_kernel.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

class AttentionStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    const engine::AttentionBlock& a = ctx.sp.attention[static_cast<size_t>(st_.head)];
    YOLOCU_CHECK(st_.in.size() == 1 && (st_.out.size() == 1 || st_.out.size() == 2), kInternal, st_.label, ": ", st_.in.size(), " inputs, ",
                 st_.out.size(), " outputs");
    std::vector<int> ids{st_.in[0]};
    ids.insert(ids.end(), st_.out.begin(), st_.out.end());
    for (int id : ids) {
      YOLOCU_CHECK(ctx.val(id).shape[0] == ctx.options.max_batch, kUnsupported, st_.label, ": the attention's value '",
                   ctx.val(id).name, "' has ", ctx.val(id).shape[0], " images in dim 0 where the engine's batch is ",
                   ctx.options.max_batch);
      YOLOCU_CHECK(ctx.sp.channel_pitch[static_cast<size_t>(id)] > 0 && ctx.sp.channel_offset[static_cast<size_t>(id)] < 0,
                   kInternal, st_.label, ": value '", ctx.val(id).name, "' is not an NHWC buffer of its own");
    }
    g_.heads = static_cast<int>(a.heads);
    g_.key_dim = static_cast<int>(a.key_dim);
    g_.head_dim = static_cast<int>(a.head_dim);
    g_.tokens = static_cast<int>(a.tokens);
    g_.scale = a.scale;
    g_.qkv_pitch = static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(st_.in[0])]);
    g_.out_pitch = static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(st_.out[0])]);
    g_.v_pitch = st_.out.size() > 1 ? static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(st_.out[1])]) : 0;
    tensor_cores_ = cuda_kernels::attention_prepare(g_, ctx.half);
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    cuda_kernels::attention(g_, ctx.half, tensor_cores_, ctx.ptr(st_.in[0]), ctx.ptr(st_.out[0]),
                            st_.out.size() > 1 ? ctx.ptr(st_.out[1]) : nullptr, ctx.batch, s);
  }

 private:
  engine::attn::Geometry g_;
  bool tensor_cores_ = false;  // attention_prepare's choice of kernel
};

}  // namespace

std::unique_ptr<Step> make_attention_step(const engine::GpuStep& st) { return std::make_unique<AttentionStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kConv: a convolution with its fused bias, SiLU and residual, NHWC -> NHWC, through the
// tactic the tuner chose for its layer and the batch size (tactics/). Setup makes the layer
// (engine::ConvProblem at max_batch; conv_layer.hpp, which the INT8 step shares) and its device
// weights: OIHW -> KRSC in the activation dtype, output channels padded with zeros to the value's
// pitch; the space-to-depth stem's weights regrouped as a 3x3 filter; float32 biases (and fp16
// copies for the cutlass family).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cuda_check.hpp"
#include "engine/cuda/steps/conv_layer.hpp"

namespace yolocu::cuda_engine_internal {

ConvInfo make_conv_layer(const SetupContext& ctx, const engine::GpuStep& st, const Tensor& w) {
  const Node& n = ctx.node(st).node;
  ConvInfo ci;
  ci.name = n.name;
  ci.x = st.in[0];
  ci.y = st.out[0];
  ci.residual = st.residual;
  YOLOCU_CHECK(w.rank() == 4 && w.dtype() == DType::kFloat32, kUnsupported, n.describe(),
               ": only 2-D convolutions with float weights are supported, weights ", shape_str(w.shape()));
  engine::ConvProblem& p = ci.pb;
  const int cg = static_cast<int>(w.dim(1));
  p.group = static_cast<int>(n.attr_int("group", 1));
  const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
  const auto str = n.attr_ints("strides", {1, 1});
  const auto dil = n.attr_ints("dilations", {1, 1});
  YOLOCU_CHECK(str.size() == 2 && dil.size() == 2 && pads.size() == 4, kUnsupported, n.describe(),
               ": only 2-D convolutions are supported");
  YOLOCU_CHECK(pads[0] == pads[2] && pads[1] == pads[3], kUnsupported, n.describe(),
               ": asymmetric padding is not supported by the GPU engine");
  const Shape& xs = ctx.val(ci.x).shape;
  const Shape& ys = ctx.val(ci.y).shape;
  YOLOCU_CHECK(xs[1] == int64_t{cg} * p.group, kInvalidArgument, n.describe(), ": input has ", xs[1],
               " channels, weights expect ", int64_t{cg} * p.group);
  // Convolutions are planned and tuned with the batch in dim 0 (p.n = max_batch, launched at the
  // run's batch): a value holding several images per batch item (a Reshape folding them into dim
  // 0) would be convolved only in part.
  YOLOCU_CHECK(xs[0] == ctx.options.max_batch && ys[0] == ctx.options.max_batch, kUnsupported, n.describe(),
               ": its input has ", xs[0], " images in dim 0 where the engine's batch is ", ctx.options.max_batch,
               " (the GPU engine convolves only values whose dim 0 is the network input's batch)");
  p.n = ctx.options.max_batch;
  // A channel view input (GpuStepOptions::channel_views) keeps its channels, read with its root's
  // pitch; likewise a residual.
  p.xp = static_cast<int>(engine::view_pitch(ctx.sp, ci.x));
  p.c = p.xp > 0 ? static_cast<int>(xs[1]) : static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(ci.x)]);
  p.h = static_cast<int>(xs[2]);
  p.w = static_cast<int>(xs[3]);
  // Output channels as stored (the fused Detect tail's padding included); a copy-free Concat's
  // input writes its k channels with the Concat's channel count as pixel pitch.
  const bool in_place = ctx.sp.channel_offset[static_cast<size_t>(ci.y)] >= 0;
  p.k = static_cast<int>(in_place ? ys[1] : ctx.sp.channel_pitch[static_cast<size_t>(ci.y)]);
  if (in_place) p.yp = static_cast<int>(ctx.sp.channel_pitch[static_cast<size_t>(ci.y)]);
  p.r = static_cast<int>(w.dim(2));
  p.s = static_cast<int>(w.dim(3));
  p.p = static_cast<int>(ys[2]);
  p.q = static_cast<int>(ys[3]);
  p.pad_h = static_cast<int>(pads[0]);
  p.pad_w = static_cast<int>(pads[1]);
  p.str_h = static_cast<int>(str[0]);
  p.str_w = static_cast<int>(str[1]);
  p.dil_h = static_cast<int>(dil[0]);
  p.dil_w = static_cast<int>(dil[1]);
  p.half = ctx.half;
  p.bias = st.in[2] >= 0;
  p.silu = st.silu;
  p.residual = st.residual >= 0;
  p.rp = static_cast<int>(engine::view_pitch(ctx.sp, st.residual));
  YOLOCU_CHECK(p.c == xs[1], kInternal, n.describe(), ": reads a channel-padded value");
  YOLOCU_CHECK(!p.residual || p.rp > 0 || ctx.sp.channel_pitch[static_cast<size_t>(st.residual)] == p.k, kInternal,
               n.describe(), ": its residual's channels differ from its output's");
  if (p.xp == p.c) p.xp = 0;
  if (p.rp == p.k) p.rp = 0;
  return ci;
}

std::vector<float> krsc_weights(const Tensor& w, bool s2d, int in_h, int in_w, engine::ConvProblem& p) {
  const float* src = w.data_as<float>();
  const int k = static_cast<int>(w.dim(0)), cg = static_cast<int>(w.dim(1));
  const int r = static_cast<int>(w.dim(2)), sz = static_cast<int>(w.dim(3));
  auto at = [&](int o, int c, int y, int x) { return src[((static_cast<size_t>(o) * cg + c) * r + y) * sz + x]; };
  std::vector<float> krsc;
  if (s2d) {
    p.c = kStemChannels;
    p.h = in_h / 2;
    p.w = in_w / 2;
    p.r = p.s = 3;
    p.str_h = p.str_w = 1;
    p.pad_h = p.pad_w = 1;
    krsc.assign(static_cast<size_t>(p.k) * 9 * kStemChannels, 0.f);
    for (int o = 0; o < k; ++o)
      for (int fy = 0; fy < 3; ++fy)
        for (int fx = 0; fx < 3; ++fx)
          for (int ch = 0; ch < cg; ++ch)
            for (int dy = 0; dy < 2; ++dy)
              for (int dx = 0; dx < 2; ++dx)
                krsc[((static_cast<size_t>(o) * 3 + fy) * 3 + fx) * kStemChannels + ch * 4 + dy * 2 + dx] =
                    at(o, ch, 2 * fy + dy, 2 * fx + dx);
  } else {
    krsc.assign(static_cast<size_t>(p.k) * r * sz * cg, 0.f);
    for (int o = 0; o < k; ++o)
      for (int c = 0; c < cg; ++c)
        for (int y = 0; y < r; ++y)
          for (int x = 0; x < sz; ++x) krsc[((static_cast<size_t>(o) * r + y) * sz + x) * cg + c] = at(o, c, y, x);
  }
  return krsc;
}

namespace {

// Host floats -> a device buffer in fp16 (half) or float32.
DeviceMem upload(const SetupContext& ctx, const std::vector<float>& v, bool half, const char* what) {
  if (!half) return ctx.upload(v.data(), v.size() * sizeof(float), what);
  std::vector<uint16_t> h(v.size());
  for (size_t j = 0; j < v.size(); ++j) h[j] = float_to_half(v[j]);
  return ctx.upload(h.data(), h.size() * sizeof(uint16_t), what);
}

class ConvStep final : public Step {
 public:
  using Step::Step;

  void setup(SetupContext& ctx) override {
    const Node& n = ctx.node(st_).node;
    const Tensor& w = ctx.val(st_.in[1]).value;
    ConvInfo ci = make_conv_layer(ctx, st_, w);
    ci.step = ctx.step;
    engine::ConvProblem& p = ci.pb;
    const int k = static_cast<int>(w.dim(0)), cg = static_cast<int>(w.dim(1));
    const int r = static_cast<int>(w.dim(2)), sz = static_cast<int>(w.dim(3));
    const Shape& xs = ctx.val(ci.x).shape;
    const Shape& ys = ctx.val(ci.y).shape;
    const int input = ctx.sp.plan.inputs[0];
    ci.s2d = ctx.options.space_to_depth_stem && is_s2d_stem(ci, input, ctx.input_readers, ctx.in_h, ctx.in_w);
    // The network's first convolution, alone on the input: the direct stem kernel may run it
    // (p still has the ONNX layer's shape here).
    if (ctx.half && ctx.options.direct_stem && ci.x == input && ctx.input_readers == 1 && p.group == 1 &&
        p.str_h == 2 && p.str_w == 2 && p.dil_h == 1 && p.dil_w == 1 && xs[1] == ctx.in_c)
      ctx.setup_direct_stem(ci, static_cast<int>(ctx.convs.size()), w.data_as<float>(), k);
    ci.d_w = upload(ctx, krsc_weights(w, ci.s2d, ctx.in_h, ctx.in_w, p), ctx.half, "weights");
    if (p.bias) {
      const Tensor& b = ctx.val(st_.in[2]).value;
      YOLOCU_CHECK(b.dtype() == DType::kFloat32 && b.numel() == k, kInvalidArgument, n.describe(), ": bias has ",
                   b.numel(), " elements, expected ", k);
      std::vector<float> bias(static_cast<size_t>(p.k), 0.f);
      std::copy(b.data_as<float>(), b.data_as<float>() + k, bias.begin());
      ci.d_bias = upload(ctx, bias, false, "bias");
      if (ctx.half && ctx.options.cutlass_tactics) ci.d_bias_act = upload(ctx, bias, true, "bias");
    }
    ctx.stats.conv_flops_per_image += 2.0 * k * cg * r * sz * static_cast<double>(ys[2] * ys[3]);
    conv_ = static_cast<int>(ctx.convs.size());
    if (ci.s2d) ctx.stem_conv = conv_;
    ctx.convs.push_back(std::move(ci));
  }

  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    if (direct(ctx)) return;  // computed with the input (Engine::convert_input)
    const ConvInfo& ci = ctx.convs[static_cast<size_t>(conv_)];
    const Workspace ws = ctx.workspace_of(conv_);
    ctx.be.tactics[static_cast<size_t>(conv_)]->run(ctx.cudnn, conv_buffers(ci, ctx.values, ctx.stem_input, ws.ptr, ws.bytes), s);
  }

  // As the tactic runs it (a direct stem: none of its own, it runs in the input's launch).
  int kernels(const LaunchContext& ctx) const override {
    return direct(ctx) ? 0 : ctx.be.tactics[static_cast<size_t>(conv_)]->kernels();
  }

  int conv_layer() const override { return conv_; }

 private:
  bool direct(const LaunchContext& ctx) const { return conv_ == ctx.direct_conv && ctx.be.direct_stem; }

  int conv_ = -1;  // index into the engine's layers
};

}  // namespace

std::unique_ptr<Step> make_conv_step(const engine::GpuStep& st) { return std::make_unique<ConvStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kConvInt8: an INT8 convolution (planning/int8_lowering.cpp) with its bias, SiLU and residual
// fused, reading the int8 copy of its input and writing one or two forms of its output (fp16, int8
// copies). Setup makes the layer as the Conv step does (conv_layer.hpp), quantises the weights per
// output channel with the calibration's scales (KRSC int8) and makes the epilogue's multipliers
// x_scale * w_scale[k], as the host reference does (engine/quant/int8_conv_ref.hpp). Tune times
// every kernel that runs the layer (the mma.sync tiles with split-K; Hopper's persistent kernels, a
// layer with two outputs once for both or once per output) at each tuned batch size and keeps the
// fastest; a batch size in between takes its nearest tuned size's kernel.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "engine/cuda/int8/conv_int8_kernel.hpp"
#include "engine/cuda/int8/conv_int8_sm90.hpp"
#include "engine/cuda/steps/conv_layer.hpp"
#include "engine/cuda/tactics/batch_sizes.hpp"
#include "engine/cuda/tactics/replay_timing.hpp"
#include "engine/quant/int8_conv_ref.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

// One way to run the layer: a mma.sync tile (split-K slices) or a Hopper kernel; a step with two
// outputs runs a Hopper kernel once for both (`both`: one form through its epilogue's auxiliary
// store, where the kernel takes that) or once per output.
struct Int8Kernel {
  bool sm90 = false;
  int index = 0;
  int split_k = 1;
  bool both = false;
};

// The same layer writing only its second output (y2 as y), for a Hopper kernel's second run.
engine::Int8ConvArgs second_output(const engine::Int8ConvArgs& a) {
  engine::Int8ConvArgs b = a;
  b.y = a.y2, b.out = a.out2, b.y_scale = a.y2_scale, b.y_pitch = a.y2_pitch;
  b.y2 = nullptr;
  return b;
}
engine::Int8ConvArgs first_output(const engine::Int8ConvArgs& a) {
  engine::Int8ConvArgs b = a;
  b.y2 = nullptr;
  return b;
}

// Split-K keeps its int32 partial sums in a workspace of the step's own; at most this much.
constexpr size_t kMaxSplitWorkspace = size_t{8} << 20;

class ConvInt8Step final : public Step {
 public:
  using Step::Step;

  void setup(SetupContext& ctx) override {
    const Node& n = ctx.node(st_).node;
    const engine::GpuInt8Conv& g = ctx.sp.int8_convs[static_cast<size_t>(st_.int8)];
    const Tensor& w = ctx.val(st_.in[1]).value;
    ConvInfo ci = make_conv_layer(ctx, st_, w);
    engine::ConvProblem& p = ci.pb;
    const int k = static_cast<int>(w.dim(0));
    YOLOCU_CHECK(ctx.half && p.group == 1 && p.k == k && p.xp == 0 && p.rp == 0, kUnsupported, n.describe(),
                 ": INT8 runs ungrouped convolutions on an fp16 engine, with packed inputs and residuals");
    YOLOCU_CHECK(static_cast<int>(g.w_scales.size()) == k, kInvalidArgument, n.describe(), ": the calibration has ",
                 g.w_scales.size(), " weight scales for ", k, " output channels");
    a_.c = p.c, a_.h = p.h, a_.w_ = p.w, a_.k = p.k, a_.r = p.r, a_.s = p.s, a_.p = p.p, a_.q = p.q;
    a_.pad_h = p.pad_h, a_.pad_w = p.pad_w, a_.str_h = p.str_h, a_.str_w = p.str_w, a_.dil_h = p.dil_h, a_.dil_w = p.dil_w;
    a_.silu = st_.silu;
    // weights: KRSC, then quantised per output channel (each channel's R x S x C values contiguous)
    const std::vector<float> krsc = krsc_weights(w, false, 0, 0, p);
    const std::vector<int8_t> q = engine::quant::quantize_weights(krsc.data(), k, int64_t{p.r} * p.s * p.c, g.w_scales);
    d_w_ = ctx.upload(q.data(), q.size(), "INT8 weights");
    const std::vector<float> mult = engine::quant::int8_multipliers(g.x_scale, g.w_scales);
    d_scale_ = ctx.upload(mult.data(), mult.size() * sizeof(float), "INT8 multipliers");
    if (p.bias) {
      const Tensor& b = ctx.val(st_.in[2]).value;
      YOLOCU_CHECK(b.dtype() == DType::kFloat32 && b.numel() == k, kInvalidArgument, n.describe(), ": bias has ",
                   b.numel(), " elements, expected ", k);
      d_bias_ = ctx.upload(b.data_as<float>(), static_cast<size_t>(k) * sizeof(float), "bias");
    }
    if (p.residual) {
      a_.residual_type = g.residual_scale > 0.f ? engine::Int8Residual::kInt8 : engine::Int8Residual::kHalf;
      a_.residual_scale = g.residual_scale > 0.f ? g.residual_scale : 1.f;
    }
    set_output(ctx, 0, a_.out, a_.y_scale, a_.y_pitch);
    if (st_.out.size() > 1) set_output(ctx, 1, a_.out2, a_.y2_scale, a_.y2_pitch);
    ctx.stats.conv_flops_per_image += 2.0 * k * p.c * p.r * p.s * static_cast<double>(p.p * p.q);
    ++ctx.stats.int8_convs;
  }

  void tune(const TuneContext& ctx) override {
    std::vector<Int8Kernel> chosen(static_cast<size_t>(ctx.max_batch) + 1);
    for (int b : ctx.tuned) chosen[static_cast<size_t>(b)] = fastest(ctx, b);
    size_t ws = 0;
    for (int b = 1; b <= ctx.max_batch; ++b) {
      Int8Kernel& kb = chosen[static_cast<size_t>(b)];
      if (std::find(ctx.tuned.begin(), ctx.tuned.end(), b) == ctx.tuned.end())
        kb = chosen[static_cast<size_t>(engine::nearest_tuned(b, ctx.tuned))];
      size_t need = int8_conv_workspace_of(args(ctx.values, b, kb), kb);
      if (need > kMaxSplitWorkspace) {  // a larger batch than its tuned size
        kb.split_k = 1;
        need = 0;
      }
      ws = std::max(ws, need);
    }
    kernels_ = std::move(chosen);
    if (ws > 0) workspace_ = ctx.alloc(ws, "INT8 split-K workspace");
    workspace_bytes_ = ws;
    ctx.stats.int8_kernels.push_back(st_.label + ": " + describe(kernels_[static_cast<size_t>(ctx.tuned.back())]));
  }

  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const Int8Kernel& kn = kernels_.at(static_cast<size_t>(ctx.batch));
    engine::Int8ConvArgs a = args(ctx.values, ctx.batch, kn);
    a.workspace = workspace_.get();
    a.workspace_bytes = workspace_bytes_;
    run(a, kn, s);
  }

  std::string kernel_at(int batch) const override { return describe(kernels_.at(static_cast<size_t>(batch))); }

  int kernels(const LaunchContext& ctx) const override {
    const Int8Kernel& kn = kernels_.at(static_cast<size_t>(ctx.batch));
    return kn.sm90 && !kn.both ? static_cast<int>(st_.out.size()) : kn.split_k > 1 ? 2 : 1;
  }

 private:
  // Output `i` of the step: fp16 (written with its buffer's pixel pitch: a Concat's slice) or an
  // int8 copy at its scale (packed).
  void set_output(const SetupContext& ctx, size_t i, engine::Int8Out& out, float& scale, int& pitch) const {
    const float sc = ctx.sp.int8_convs[static_cast<size_t>(st_.int8)].out_scales[i];
    const int id = st_.out[i];
    out = sc > 0.f ? engine::Int8Out::kInt8 : engine::Int8Out::kHalf;
    scale = sc > 0.f ? sc : 1.f;
    const int64_t p = ctx.sp.channel_pitch[static_cast<size_t>(id)];
    pitch = p == a_.k ? 0 : static_cast<int>(p);
  }

  engine::Int8ConvArgs args(const ValueBuffers& v, int batch, const Int8Kernel& kn) const {
    engine::Int8ConvArgs a = a_;
    a.n = batch;
    a.x = static_cast<const int8_t*>(v.ptr(st_.in[0]));
    a.w = static_cast<const int8_t*>(d_w_.get());
    a.scale = static_cast<const float*>(d_scale_.get());
    a.bias = static_cast<const float*>(d_bias_.get());
    a.residual = st_.residual >= 0 ? v.ptr(st_.residual) : nullptr;
    a.y = v.ptr(st_.out[0]);
    a.y2 = st_.out.size() > 1 ? v.ptr(st_.out[1]) : nullptr;
    a.split_k = kn.sm90 ? 1 : kn.split_k;
    return a;
  }

  static size_t int8_conv_workspace_of(const engine::Int8ConvArgs& a, const Int8Kernel& kn) {
    return kn.sm90 ? 0 : engine::int8_conv_workspace(a);
  }

  static void run(const engine::Int8ConvArgs& a, const Int8Kernel& kn, cudaStream_t s) {
    if (!kn.sm90) {
      engine::int8_conv_run(a, kn.index, s);
      return;
    }
    if (kn.both) {
      engine::int8_sm90_run(a, kn.index, s);
      return;
    }
    engine::int8_sm90_run(first_output(a), kn.index, s);
    if (a.y2 != nullptr) engine::int8_sm90_run(second_output(a), kn.index, s);
  }

  static std::string unsupported(const engine::Int8ConvArgs& a, const Int8Kernel& kn) {
    if (!kn.sm90) return engine::int8_conv_unsupported(a);
    if (kn.both) return a.y2 ? engine::int8_sm90_unsupported(a, kn.index) : "one output";
    std::string why = engine::int8_sm90_unsupported(first_output(a), kn.index);
    if (why.empty() && a.y2 != nullptr) why = engine::int8_sm90_unsupported(second_output(a), kn.index);
    return why;
  }

  static std::string describe(const Int8Kernel& kn) {
    if (kn.sm90) return engine::int8_sm90_kernels()[static_cast<size_t>(kn.index)] + (kn.both ? " (both forms)" : "");
    return engine::int8_tile_id(engine::int8_conv_tiles()[static_cast<size_t>(kn.index)]) + " k" + std::to_string(kn.split_k);
  }

  // Every kernel that runs the layer at `batch`, timed on the arena's buffers; the fastest.
  Int8Kernel fastest(const TuneContext& ctx, int batch) const {
    std::vector<Int8Kernel> cand;
    for (size_t i = 0; i < engine::int8_sm90_kernels().size(); ++i) {
      // (the pingpong 1x1 kernels join once ConvInt8Sm90's tests have run them on a GPU)
      if (engine::int8_sm90_kernels()[i].find(":pp-") != std::string::npos) continue;
      cand.push_back({true, static_cast<int>(i), 1, false});
      if (st_.out.size() > 1) cand.push_back({true, static_cast<int>(i), 1, true});
    }
    for (size_t t = 0; t < engine::int8_conv_tiles().size(); ++t)
      for (int split : {1, 2, 4, 8}) cand.push_back({false, static_cast<int>(t), split});
    DeviceMem ws;
    size_t ws_bytes = 0;
    for (const Int8Kernel& kn : cand) ws_bytes = std::max(ws_bytes, capped_workspace(ctx, batch, kn));
    if (ws_bytes > 0) ws = ctx.alloc(ws_bytes, "INT8 tuning workspace");
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    YOLOCU_CUDA_CHECK(cudaEventCreate(&e0));
    YOLOCU_CUDA_CHECK(cudaEventCreate(&e1));
    Int8Kernel best;
    float best_ms = -1.f;
    for (const Int8Kernel& kn : cand) {
      engine::Int8ConvArgs a = args(ctx.values, batch, kn);
      a.workspace = ws.get();
      a.workspace_bytes = ws_bytes;
      const size_t need = int8_conv_workspace_of(a, kn);
      if (need > kMaxSplitWorkspace || (kn.split_k > 1 && need == 0)) continue;
      if (!unsupported(a, kn).empty()) continue;
      const float ms = time_ms(a, kn, ctx.stream, e0, e1);
      if (best_ms < 0.f || ms < best_ms) {
        best_ms = ms;
        best = kn;
      }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    YOLOCU_CHECK(best_ms >= 0.f, kUnsupported, st_.label, ": no INT8 kernel runs this layer at batch ", batch);
    return best;
  }

  size_t capped_workspace(const TuneContext& ctx, int batch, const Int8Kernel& kn) const {
    const size_t need = int8_conv_workspace_of(args(ctx.values, batch, kn), kn);
    return need > kMaxSplitWorkspace ? 0 : need;
  }

  // The median of three timings of five launches (after one untimed launch), in ms per launch. The
  // five are replayed as a CUDA graph, as the engine runs them (the FP16 tuner times the same way,
  // tactics/replay_timing.hpp): eager launches would also time the host's work per launch, which
  // Hopper's kernels have more of (their TMA descriptors), and on small layers that is longer than
  // the kernel. Eager where the capture fails.
  static float time_ms(const engine::Int8ConvArgs& a, const Int8Kernel& kn, cudaStream_t s, cudaEvent_t e0,
                       cudaEvent_t e1) {
    run(a, kn, s);  // (also the first launch's one-time setup, outside the capture)
    return static_cast<float>(
        engine::median_replay_us([&](cudaStream_t st) { run(a, kn, st); }, 5, 3, s, s, e0, e1) / 1e3);
  }

  engine::Int8ConvArgs a_;  // the layer at max_batch, pointers and n set per launch
  DeviceMem d_w_, d_scale_, d_bias_, workspace_;
  size_t workspace_bytes_ = 0;
  std::vector<Int8Kernel> kernels_;  // per batch size (index), chosen by tune
};

}  // namespace

std::unique_ptr<Step> make_conv_int8_step(const engine::GpuStep& st) { return std::make_unique<ConvInt8Step>(st); }

}  // namespace yolocu::cuda_engine_internal

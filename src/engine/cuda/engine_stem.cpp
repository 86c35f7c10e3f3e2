// GPU engine: the direct stem kernel (CudaEngineOptions::direct_stem; the kernel is
// tactics/stem_conv_kernel.cu). The network's first convolution, when it alone reads the input, may
// run from the NCHW input in place of the input conversion and the layer's tuned tactic. Per tuned
// batch size the two ways are checked against each other on random image-like input and timed on
// the engine's buffers; the faster one runs, and the choice goes into the tactic cache (a later
// build takes it without timing: builds from the same cache compute the same bits).
#include "engine/cuda/engine_impl.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace yolocu::cuda_engine_internal {
namespace {

// The cache entry of the choice (the stem layer's signature at that batch behind this prefix; a
// new kernel version gets a new prefix, so that an older choice is not taken for it).
constexpr const char* kChoicePrefix = "direct-stem-v3|";  // v3: 16-byte patch loads, fast SiLU, zero plane
constexpr const char* kDirect = "own:direct-stem";
constexpr const char* kConversion = "input-conversion";

// Each way timed 15 times after 3 warm-ups, alternating, on stream s: the median microseconds of
// the direct stem and of the conversion.
template <typename Direct, typename Conversion>
std::pair<double, double> time_both_ways(Direct direct_way, Conversion conversion_way, cudaStream_t s) {
  Event e0 = make_event(cudaEventDefault), e1 = make_event(cudaEventDefault);
  std::vector<float> direct_ms, conversion_ms;
  for (int i = 0; i < 18; ++i)
    for (const bool direct : {true, false}) {
      YOLOCU_CUDA_CHECK(cudaEventRecord(e0.get(), s));
      if (direct)
        direct_way();
      else
        conversion_way();
      YOLOCU_CUDA_CHECK(cudaEventRecord(e1.get(), s));
      YOLOCU_CUDA_CHECK(cudaEventSynchronize(e1.get()));
      float ms = 0;
      YOLOCU_CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()));
      if (i >= 3) (direct ? direct_ms : conversion_ms).push_back(ms);
    }
  auto median = [](std::vector<float> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  return {1e3 * median(direct_ms), 1e3 * median(conversion_ms)};
}

}  // namespace

void Engine::setup_direct_stem(const ConvInfo& ci, int conv, const float* oihw, int k) {
  const engine::ConvProblem& p = ci.pb;
  if (p.residual) return;
  engine::StemConvArgs a;
  a.n = options.max_batch;
  a.c = in_c;
  a.h = in_h;
  a.w_ = in_w;
  a.k = p.k;  // the output's channels, padded as the layer's other tactics write them
  a.r = p.r;
  a.s = p.s;
  a.p = p.p;
  a.q = p.q;
  a.pad_h = p.pad_h;
  a.pad_w = p.pad_w;
  a.y_pitch = p.yp;
  a.silu = p.silu;
  if (!engine::stem_conv_unsupported(a).empty()) return;
  std::vector<float> w(static_cast<size_t>(p.k) * in_c * p.r * p.s, 0.f);  // padded channels: zeros
  std::copy(oihw, oihw + static_cast<size_t>(k) * in_c * p.r * p.s, w.begin());
  const std::vector<uint16_t> packed = engine::stem_conv_pack(a, w.data());
  direct_w = alloc(packed.size() * 2, "weights");
  YOLOCU_CUDA_CHECK(cudaMemcpy(direct_w.get(), packed.data(), packed.size() * 2, cudaMemcpyHostToDevice));
  stats.weight_bytes += packed.size() * 2;
  direct_launch = engine::stem_conv_prepare(a);  // (the kernel, its shared memory and resident blocks)
  direct_args = a;
  direct_conv = conv;
}

void Engine::run_direct_stem(const void* d_input, int batch, cudaStream_t s) {
  const ConvInfo& ci = convs[static_cast<size_t>(direct_conv)];
  engine::StemConvArgs a = direct_args;
  a.n = batch;
  a.x = d_input;
  if (reinterpret_cast<uintptr_t>(d_input) % 16 != 0) {
    // The kernel copies the input 16 bytes at a time: an input that is not 16-byte aligned (a
    // caller's device pointer) is copied first.
    const size_t bytes = static_cast<size_t>(batch) * in_c * in_h * in_w * es;
    YOLOCU_CUDA_CHECK(cudaMemcpyAsync(staging.get(), d_input, bytes, cudaMemcpyDeviceToDevice, s));
    a.x = staging.get();
  }
  a.w = direct_w.get();
  a.bias = static_cast<const float*>(ci.d_bias.get());
  a.y = ptr(ci.y);
  engine::stem_conv_run(direct_launch, a, s);
}

void Engine::choose_direct_stem(BatchExec& be, int batch, void* y_ref) {
  be.direct_stem = false;
  if (direct_conv < 0) return;
  const ConvInfo& ci = convs[static_cast<size_t>(direct_conv)];
  const engine::ConvProblem pb = ci.problem(batch);
  const std::string sig = kChoicePrefix + pb.signature();
  const engine::ConvTactic& tactic = *be.tactics[static_cast<size_t>(direct_conv)];
  // This process's choice for the same layer, batch and tactic, else the cache file's.
  const std::string memo_key = std::to_string(options.device) + "|" + sig + "|b" + std::to_string(batch) + "|" + tactic.id();
  std::string choice;
  if (!engine::find_process_choice(memo_key, &choice)) {
    const engine::TacticRecord* r = tactic_cache ? tactic_cache->find(sig, batch) : nullptr;
    if (r && (r->tactic == kDirect || r->tactic == kConversion)) choice = r->tactic;
  }
  if (!choice.empty() && tactic_cache && !tactic_cache->find(sig, batch))  // another engine's choice: into this file too
    tactic_cache->put(sig, batch, {choice, choice == kDirect ? "own direct stem" : "input conversion + tactic", 0});
  if (choice == kConversion) return;
  const bool cached = choice == kDirect;

  cudaStream_t s = stream.get();
  auto conversion_path = [&] {
    convert_input(be, staging.get(), batch, s);  // be.direct_stem is false here
    tactic.run(cudnn.get(), conv_buffers(ci), s);
  };
  // Image-like input (0..1); the conversion and the tactic give the reference output.
  const int64_t in_elems = static_cast<int64_t>(batch) * in_c * in_h * in_w;
  ck::fill_uniform(staging.get(), half, in_elems, 0x5eed0101u, 0.f, 1.f, s);
  const size_t pitch = static_cast<size_t>(pb.y_pitch()) * es, row = static_cast<size_t>(pb.k) * es;
  const size_t pixels = static_cast<size_t>(batch) * pb.p * pb.q;
  conversion_path();
  YOLOCU_CUDA_CHECK(cudaMemcpy2DAsync(y_ref, row, ptr(ci.y), pitch, row, pixels, cudaMemcpyDeviceToDevice, s));
  YOLOCU_CUDA_CHECK(cudaMemset2DAsync(ptr(ci.y), pitch, 0xff, row, pixels, s));  // NaNs: every output written?
  run_direct_stem(staging.get(), batch, s);
  DeviceMem acc_mem = alloc(sizeof(ck::CompareAcc), "tactic check reference");
  auto* d_acc = static_cast<ck::CompareAcc*>(acc_mem.get());
  YOLOCU_CUDA_CHECK(cudaMemsetAsync(d_acc, 0, sizeof(ck::CompareAcc), s));
  ck::compare_rows(ptr(ci.y), pb.y_pitch(), y_ref, pb.k, half, static_cast<int64_t>(pixels) * pb.k, d_acc, s);
  ck::CompareAcc acc{};
  YOLOCU_CUDA_CHECK(cudaMemcpyAsync(&acc, d_acc, sizeof acc, cudaMemcpyDeviceToHost, s));
  YOLOCU_CUDA_CHECK(cudaStreamSynchronize(s));
  const engine::CheckVerdict verdict = engine::check_verdict(acc, true);  // the tuner's FP16 bounds
  if (!verdict.ok) {
    stats.warnings.push_back(detail::cat("the direct stem kernel differs from the input conversion and the layer's ",
                                         "tactic at batch ", batch, " (rel L2 ", verdict.rel_l2, ", max |d| ",
                                         verdict.max_diff, "): the conversion runs"));
    if (tactic_cache) tactic_cache->put(sig, batch, {kConversion, "input conversion + tactic (direct stem failed its check)", 0});
    engine::put_process_choice(memo_key, kConversion);
    return;
  }
  // YOLOCU_DIRECT_STEM=always: the direct stem wherever it passes its check, untimed (tests of its
  // path through the engine; comparisons); not kept in the cache.
  const char* force = std::getenv("YOLOCU_DIRECT_STEM");
  if (cached || (force && std::string(force) == "always")) {
    be.direct_stem = true;
    return;
  }
  // Timed: the medians decide.
  const auto [direct_us, conversion_us] = time_both_ways([&] { run_direct_stem(staging.get(), batch, s); },
                                                         conversion_path, s);
  be.direct_stem = direct_us < conversion_us;
  engine::put_process_choice(memo_key, be.direct_stem ? kDirect : kConversion);
  if (tactic_cache)
    tactic_cache->put(sig, batch,
                      be.direct_stem ? engine::TacticRecord{kDirect, "own direct stem", direct_us}
                                     : engine::TacticRecord{kConversion, "input conversion + tactic", conversion_us});
}

}  // namespace yolocu::cuda_engine_internal

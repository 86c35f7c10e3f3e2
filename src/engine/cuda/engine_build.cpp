// GPU engine build: plan and steps, batch scaling check, arena, the tactics of every tuned batch
// size (tactics/tuner.hpp) and the derived ones.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/cuda/engine_impl.hpp"
#include "engine/cuda/tactics/batch_sizes.hpp"
#include "yolocu/int8.hpp"

namespace yolocu::cuda_engine_internal {

void Engine::check_batch_scaling(const engine::Plan& big) {
  // Steps are planned once at max_batch and launched at smaller batches by scaling dim 0 of every
  // runtime value; verify on a batch-1 plan that the model really scales that way.
  const engine::Plan one = engine::build_plan(*model, {{1, in_c, in_h, in_w}});
  YOLOCU_CHECK(one.values.size() == big.values.size() && one.nodes.size() == big.nodes.size(), kUnsupported,
               "CudaEngine: the model's graph changes with the batch size (", big.nodes.size(), " runtime nodes at batch ",
               options.max_batch, ", ", one.nodes.size(), " at batch 1)");
  const int64_t mb = options.max_batch;
  for (size_t v = 0; v < big.values.size(); ++v) {
    const auto& a = big.values[v];
    const auto& b = one.values[v];
    YOLOCU_CHECK(a.constant == b.constant && a.shape.size() == b.shape.size(), kUnsupported, "CudaEngine: value '",
                 a.name, "' differs between batch sizes");
    if (a.constant) continue;
    bool ok = !a.shape.empty() && a.shape[0] == b.shape[0] * mb;
    for (size_t d = 1; ok && d < a.shape.size(); ++d) ok = a.shape[d] == b.shape[d];
    YOLOCU_CHECK(ok, kUnsupported, "CudaEngine: value '", a.name, "' does not scale with the batch (",
                 shape_str(b.shape), " at batch 1, ", shape_str(a.shape), " at batch ", mb, ")");
  }
  for (size_t n = 0; n < big.nodes.size(); ++n) {
    const auto& pn = big.nodes[n];
    YOLOCU_CHECK(pn.node.op_type == one.nodes[n].node.op_type, kUnsupported, "CudaEngine: node order differs");
    if (pn.op->is_view) continue;  // shape inputs are never read on the device
    if (pn.node.op_type == "Resize" || pn.node.op_type == "Upsample") {
      // The dynamic export computes Resize 'sizes' from the input shape, batch included: what
      // must not change is the source index map of the non-batch axes.
      auto indices = [&](const engine::Plan& p, const engine::PlanNode& node) {
        auto idx = engine::resize_indices(p, node);
        idx.erase(idx.begin());
        return idx;
      };
      YOLOCU_CHECK(indices(big, pn) == indices(one, one.nodes[n]), kUnsupported, pn.node.describe(),
                   ": the resize depends on the batch size");
      continue;
    }
    for (int id : pn.in) {
      if (id < 0 || !big.values[static_cast<size_t>(id)].constant) continue;
      const Tensor& ta = big.values[static_cast<size_t>(id)].value;
      const Tensor& tb = one.values[static_cast<size_t>(id)].value;
      YOLOCU_CHECK(ta.shape() == tb.shape() && ta.nbytes() == tb.nbytes() &&
                       (ta.nbytes() == 0 || std::memcmp(ta.data(), tb.data(), ta.nbytes()) == 0),
                   kUnsupported, pn.node.describe(), ": constant input '", big.values[static_cast<size_t>(id)].name,
                   "' depends on the batch size");
    }
  }
}


// Tactics for every tuned batch size, through the tuner (cache, check, timing) on the engine's own
// buffers, with a temporary workspace of workspace_limit and a reference output buffer; then the
// engine's workspace is sized to what the chosen tactics need.
void Engine::choose_tactics() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<engine::TacticCache> cache;
  std::string path = options.tactic_cache.empty() ? engine::TacticCache::default_path() : options.tactic_cache;
  if (path == "none") path.clear();
  double cache_io_ms = 0;
  if (!path.empty()) {
    cache = std::make_unique<engine::TacticCache>(engine::tactic_device_key(options.device));
    std::string warning;
    if (!cache->load(path, &warning)) stats.warnings.push_back(warning);
    cache_io_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  stats.tactic_cache_path = path;

  engine::TacticLimits lim;
  lim.workspace = options.workspace_limit;
  lim.max_graph_plans = options.max_graph_plans;
  lim.cutlass = options.cutlass_tactics;
  lim.own_depthwise = options.own_depthwise_tactics;
  lim.own_thin = options.own_thin_tactics;
  DeviceMem tmp_ws, y_ref;
  if (lim.workspace > 0) {
    try {
      tmp_ws = alloc(lim.workspace, "tactic tuning workspace");
    } catch (const Error&) {
      lim.workspace = 0;
    }
  }
  size_t y_max = 0;
  for (const ConvInfo& ci : convs) {
    const engine::ConvProblem p = ci.problem(tuned.back());
    y_max = std::max(y_max, static_cast<size_t>(p.n) * p.p * p.q * p.k * es);
  }
  y_ref = alloc(y_max, "tactic check reference");
  tuner = std::make_unique<engine::Tuner>(cudnn.get(), lim, cache.get(), options.device, stream.get());
  {
    std::vector<engine::ConvProblem> all;
    for (int b : tuned)
      for (const ConvInfo& ci : convs) all.push_back(ci.problem(b));
    tuner->prebuild(all, options.device, pool_threads());
  }
  const size_t need = tune_layers(tmp_ws.get(), lim.workspace, y_ref.get());
  YOLOCU_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  tmp_ws.reset();
  // Derived batch sizes may need some workspace of their own: keep at least 16 MiB.
  workspace_bytes = std::min(options.workspace_limit, std::max(need, engine::kDerivedWorkspaceFloor));
  workspace = alloc(workspace_bytes, "workspace");
  workspaces = {Workspace{workspace.get(), workspace_bytes}};
  lim.workspace = workspace_bytes;
  tuner->set_limits(lim);
  // The cache stays with the engine: derived batch sizes (batch_exec) add their plans to it.
  tactic_cache = std::move(cache);
  tactic_cache_path = path;
  // The direct stem or the conversion and the stem's tactic, per tuned batch (engine_stem.cpp).
  for (int b : tuned) {
    choose_direct_stem(*batches[static_cast<size_t>(b)], b, y_ref.get());
    if (batches[static_cast<size_t>(b)]->direct_stem) stats.direct_stem_batches.push_back(b);
  }
  y_ref.reset();
  tune_steps();
  // The tuning wrote random data into the arena: start every run from zeros as before.
  YOLOCU_CUDA_CHECK(cudaMemset(arena.get(), 0, std::max<size_t>(sp.arena_bytes, 256)));

  if (tactic_cache && tactic_cache->dirty()) {
    const auto s0 = std::chrono::steady_clock::now();
    std::string warning;
    if (!tactic_cache->save(path, &warning)) stats.warnings.push_back(warning);
    cache_io_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
  }
  record_tuning_stats(t0, cache_io_ms);
}

// Every layer's tactic at every tuned batch size (batches[b]), tuned with the temporary workspace
// ws; returns the largest workspace the chosen tactics need.
size_t Engine::tune_layers(void* ws, size_t ws_bytes, void* y_ref) {
  size_t need = 0;
  for (int b : tuned) {
    auto be = std::make_unique<BatchExec>();
    be->tactics.resize(convs.size());
    for (size_t c = 0; c < convs.size(); ++c) {
      engine::ConvBuffers bufs = conv_buffers(convs[c]);
      bufs.ws = ws;
      bufs.ws_bytes = ws_bytes;
      const engine::TunedLayer t = tuner->choose(convs[c].problem(b), bufs, y_ref);
      need = std::max(need, t.tactic->workspace());
      be->tactics[c] = t.tactic;
      be->plain.push_back(t.plain);
    }
    batches[static_cast<size_t>(b)] = std::move(be);
  }
  return need;
}

void Engine::record_tuning_stats(std::chrono::steady_clock::time_point t0, double cache_io_ms) {
  const engine::TunerStats& ts = tuner->stats();
  for (const std::string& w : tuner->warnings()) stats.warnings.push_back(w);
  stats.tuned_batches = tuned;
  stats.tactic_layers = ts.layers;
  stats.tactic_cache_hits = ts.cache_hits;
  stats.tactic_plans_restored = ts.plans_restored;
  stats.tactic_memo_hits = ts.memo_hits;
  stats.tactics_tuned = ts.tuned;
  stats.tactic_candidates = ts.candidates;
  stats.tactic_rejected = ts.rejected;
  stats.tune_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  engine::TuneBreakdown bd = ts.breakdown;
  bd.total_ms = stats.tune_ms;
  bd.cache_io_ms = cache_io_ms;
  stats.tune_breakdown = engine::describe(bd);
  if (options.print_warnings)
    for (const std::string& w : stats.warnings) std::fprintf(stderr, "yolocu: warning: %s\n", w.c_str());
}

BatchExec& Engine::batch_exec(int batch) {
  auto& slot = batches[static_cast<size_t>(batch)];
  if (!slot) prepare_batches({batch});
  return *slot;
}

void Engine::prepare_batches(const std::vector<int>& sizes) {
  // Not tuned: the tactics of the nearest tuned batch size (engine/cuda/tactics/batch_sizes.hpp),
  // or with derive_without_compiling its candidates that compile nothing, every layer of every
  // size built in one pool call.
  std::vector<int> todo;
  for (int b : sizes)
    if (!batches[static_cast<size_t>(b)] && std::find(todo.begin(), todo.end(), b) == todo.end()) todo.push_back(b);
  if (todo.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<engine::ConvProblem> problems;
  std::vector<std::string> ids;
  for (int b : todo) {
    const BatchExec& from = *batches[static_cast<size_t>(engine::nearest_tuned(b, tuned))];
    const bool plain = options.derive_without_compiling && from.plain.size() == convs.size();
    for (size_t c = 0; c < convs.size(); ++c) {
      problems.push_back(convs[c].problem(b));
      const std::string& own = from.tactics[c]->id();
      // derive_without_compiling: the plain candidate, unless the cache file keeps this size's plan
      // of the tuned tactic (restored, not compiled)
      const engine::TacticRecord* kept =
          plain && tactic_cache ? tactic_cache->find_derived(problems.back().signature(), b) : nullptr;
      const bool restorable = kept && kept->tactic == own && !kept->plan.empty();
      ids.push_back(plain && !from.plain[c].empty() && !restorable ? from.plain[c] : own);
    }
  }
  const std::vector<std::shared_ptr<const engine::ConvTactic>> built =
      tuner->derive_many(problems, ids, options.device, pool_threads());
  for (size_t k = 0; k < todo.size(); ++k) {
    const int b = todo[k];
    auto be = std::make_unique<BatchExec>();
    be->tactics.assign(built.begin() + static_cast<std::ptrdiff_t>(k * convs.size()),
                       built.begin() + static_cast<std::ptrdiff_t>((k + 1) * convs.size()));
    be->direct_stem = batches[static_cast<size_t>(engine::nearest_tuned(b, tuned))]->direct_stem;
    batches[static_cast<size_t>(b)] = std::move(be);
  }
  if (tactic_cache && tactic_cache->dirty()) {
    std::string warning;
    if (!tactic_cache->save(tactic_cache_path, &warning)) stats.warnings.push_back(warning);
  }
  stats.derived_batches += static_cast<int>(todo.size());
  stats.derived_plans_restored = tuner->stats().derived_restored;
  stats.derived_compiled = tuner->stats().derived_compiled;
  stats.derive_pool_ms = tuner->stats().derive_pool_ms;
  stats.derive_finish_ms = tuner->stats().derive_finish_ms;
  stats.derive_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void Engine::build() {
  const auto t0 = std::chrono::steady_clock::now();
  const Model& m = *model;
  const ValueInfo& in = read_input(m);
  if (in.dims[0].is_static() && options.max_batch > 1) {
    // export.py's default static batch-1 file: run it at any batch (checked by check_batch_scaling).
    model = std::make_shared<Model>(engine::make_batch_dynamic(m));
    return build();
  }

  engine::Plan plan = engine::build_plan(m, {{options.max_batch, in_c, in_h, in_w}});
  if (options.max_batch > 1) check_batch_scaling(plan);
  engine::GpuStepOptions so;
  so.act_elem_size = es;
  so.fuse_detect_tail = options.fuse_detect_tail;
  so.fuse_v8_tail = options.fuse_v8_tail;
  so.fuse_attention = options.fuse_attention;
  {
    int device = 0, optin = 0;
    YOLOCU_CUDA_CHECK(cudaGetDevice(&device));
    YOLOCU_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    so.attention_smem = static_cast<size_t>(optin);
  }
  so.fuse_sppf = options.fuse_sppf;
  so.copy_free_concat = options.copy_free_concat && options.workspace_limit > 0;
  so.channel_views = options.channel_views && so.copy_free_concat;
  so.branch_arena = options.cuda_graphs && options.graph_branches;
  if (options.precision == Precision::kInt8) {
    check_int8_calibration(*options.int8_calibration, m);
    so.int8 = options.int8_calibration.get();
    so.int8_residuals = options.int8_residuals;
  }
  sp = engine::plan_gpu_steps(std::move(plan), so);
  values.init(&sp, options.max_batch);
  allocate();
  setup_steps();
  if (stem_conv >= 0) {
    const size_t bytes = static_cast<size_t>(options.max_batch) * (in_h / 2) * (in_w / 2) * kStemChannels * es;
    stem_input = alloc(bytes, "space-to-depth input");
    YOLOCU_CUDA_CHECK(cudaMemset(stem_input.get(), 0, bytes));
    stats.space_to_depth_stem = true;
  }

  // Tactics for the tuned batch sizes.
  YOLOCU_CUDNN_CHECK(cudnnSetStream(cudnn.get(), stream.get()));
  batches.resize(static_cast<size_t>(options.max_batch) + 1);
  tuned = options.tune_batches.empty() ? std::vector<int>{1, options.max_batch} : options.tune_batches;
  for (int b : tuned)
    YOLOCU_CHECK(b >= 1 && b <= options.max_batch, kInvalidArgument, "CudaEngine: tune batch ", b,
                 " outside [1, max_batch = ", options.max_batch, "]");
  std::sort(tuned.begin(), tuned.end());
  tuned.erase(std::unique(tuned.begin(), tuned.end()), tuned.end());
  if (options.pad_batches) anchors = engine::batch_anchors(options.max_batch, tuned);
  choose_tactics();
  if (options.cuda_graphs && options.graph_branches)
    for (int b : tuned) plan_workspaces(*batches[static_cast<size_t>(b)], b, true);
  record_build_stats(t0);
}

const ValueInfo& Engine::read_input(const Model& m) {
  YOLOCU_CHECK(m.graph.inputs.size() == 1, kUnsupported, "CudaEngine: the model has ", m.graph.inputs.size(),
               " inputs (one image input expected)");
  const ValueInfo& in = m.graph.inputs[0];
  YOLOCU_CHECK(in.dims.size() == 4, kUnsupported, "CudaEngine: input '", in.name, "' has rank ", in.dims.size(),
               " (N, C, H, W expected)");
  in_c = in.dims[1].is_static() ? static_cast<int>(in.dims[1].value) : 3;
  in_h = engine::planned_input_dim(in.dims[2], options.height);
  in_w = engine::planned_input_dim(in.dims[3], options.width);
  YOLOCU_CHECK(!in.dims[0].is_static() || in.dims[0].value == 1 || options.max_batch == 1, kInvalidArgument,
               "CudaEngine: the model's batch is fixed at ", in.dims[0].value, "; max_batch ", options.max_batch,
               " needs a batch-1 or a dynamic-batch export");
  return in;
}

// The cuDNN handle, the streams, the arena and the input staging buffer (zeroed).
void Engine::allocate() {
  cudnnHandle_t h = nullptr;
  YOLOCU_CUDNN_CHECK(cudnnCreate(&h));
  cudnn.reset(h);
  cudaStream_t s = nullptr;
  YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream.reset(s);
  YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  capture_stream.reset(s);

  arena = alloc(std::max<size_t>(sp.arena_bytes, 256), "activations");
  values.set_arena(arena.get());
  YOLOCU_CUDA_CHECK(cudaMemset(arena.get(), 0, std::max<size_t>(sp.arena_bytes, 256)));
  const size_t staging_bytes = static_cast<size_t>(options.max_batch) * in_c * in_h * in_w * es;
  staging = alloc(staging_bytes, "input staging");
  YOLOCU_CUDA_CHECK(cudaMemset(staging.get(), 0, staging_bytes));
}

// The steps' own timed choices (Step::tune: the INT8 convolutions' kernels) at the tuned sizes.
void Engine::tune_steps() {
  const TuneContext ctx{sp, values, tuned, options.max_batch, stream.get(), &budget, stats};
  for (const auto& step : steps) step->tune(ctx);
  YOLOCU_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
}

void Engine::record_build_stats(std::chrono::steady_clock::time_point t0) {
  stats.anchors = anchors;
  stats.activation_bytes = sp.arena_bytes;
  stats.naive_bytes = sp.naive_bytes;
  stats.workspace_bytes = workspace_bytes;
  stats.workspaces = static_cast<int>(workspaces.size());
  stats.device_bytes = budget.used();  // the tuning buffers are freed by now
  stats.steps = static_cast<int>(sp.steps.size());
  stats.fused_convs = sp.fused_silu;
  stats.fused_residuals = sp.fused_residual;
  stats.fused_tail_nodes = sp.fused_tail_nodes;
  stats.fused_attention = static_cast<int>(sp.attention.size());
  stats.fused_attention_nodes = sp.fused_attention_nodes;
  stats.fused_sppf = sp.fused_sppf;
  stats.concat_inputs_in_place = sp.concat_inputs_in_place;
  stats.concat_inputs_copied = sp.concat_inputs_copied;
  stats.channel_views = sp.channel_views;
  stats.copy_steps_removed = sp.copy_steps_removed;
  stats.convs = sp.convs;
  stats.int8_quantize_steps = sp.quantize_steps;
  stats.int8_concats = sp.int8_concats;
  for (const auto& f : sp.int8_float_convs)
    stats.int8_float_convs.push_back(sp.plan.nodes[static_cast<size_t>(f.node)].node.name + ": " + f.why);
  count_kernels();
  stats.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void Engine::setup_steps() {
  input_readers = 0;
  for (const GpuStep& st : sp.steps)
    for (int id : st.in) input_readers += id == sp.plan.inputs[0] ? 1 : 0;
  SetupContext ctx{sp, options, values, &budget, stats, half, es, in_c, in_h, in_w, input_readers, -1, convs, stem_conv,
                   [this](const ConvInfo& ci, int conv, const float* oihw, int k) { setup_direct_stem(ci, conv, oihw, k); }};
  steps.reserve(sp.steps.size());
  for (size_t i = 0; i < sp.steps.size(); ++i) {
    steps.push_back(make_step(sp.steps[i]));
    ctx.step = static_cast<int>(i);
    steps.back()->setup(ctx);
  }
}

void Engine::count_kernels() {
  // As the largest tuned batch runs them, plus the input conversion (or the direct stem).
  const BatchExec& largest = *batches[static_cast<size_t>(tuned.back())];
  const LaunchContext ctx = launch_context(largest, tuned.back());
  int kernels = 1;
  for (const auto& step : steps) kernels += step->kernels(ctx);
  stats.kernels_per_run = kernels;
  const std::vector<engine::StepAccess> acc = step_accesses(largest, tuned.back());
  stats.launching_steps = static_cast<int>(std::count_if(acc.begin(), acc.end(), [](const auto& a) { return a.launches; }));
  stats.step_depth = engine::dependency_depth(engine::step_dependencies(acc), acc);
  const std::vector<engine::StepAccess> values_only = step_accesses(largest, tuned.back(), false);
  stats.value_depth = engine::dependency_depth(engine::step_dependencies(values_only), values_only);
}

}  // namespace yolocu::cuda_engine_internal

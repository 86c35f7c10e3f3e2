// GPU engine execution: the input conversion, the steps' launches (steps/), CUDA graph capture and
// replay.
#include "engine/cuda/engine_impl.hpp"
#include "engine/cuda/planning/step_graph.hpp"
#include "engine/cuda/tactics/batch_sizes.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

engine::ByteRange bytes_of(const void* p, size_t n) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  return {b, b + n};
}

// The capture stream's dependency set: the nodes its next launch will wait for.
std::vector<cudaGraphNode_t> capture_leaves(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* nodes = nullptr;
  size_t n = 0;
#if CUDART_VERSION >= 13000
  YOLOCU_CUDA_CHECK(cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &nodes, nullptr, &n));
#else
  YOLOCU_CUDA_CHECK(cudaStreamGetCaptureInfo_v3(s, &status, nullptr, nullptr, &nodes, nullptr, &n));
#endif
  return std::vector<cudaGraphNode_t>(nodes, nodes + n);
}

void set_capture_leaves(cudaStream_t s, std::vector<cudaGraphNode_t>& nodes) {
#if CUDART_VERSION >= 13000
  YOLOCU_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(s, nodes.data(), nullptr, nodes.size(),
                                                        cudaStreamSetCaptureDependencies));
#else
  YOLOCU_CUDA_CHECK(cudaStreamUpdateCaptureDependencies_v2(s, nodes.data(), nullptr, nodes.size(),
                                                           cudaStreamSetCaptureDependencies));
#endif
}

}  // namespace

std::vector<engine::StepAccess> Engine::step_accesses(const BatchExec& be, int batch, bool with_workspaces) const {
  std::vector<engine::StepAccess> acc = engine::value_accesses(sp, es, reinterpret_cast<uintptr_t>(arena.get()));
  const LaunchContext ctx = launch_context(be, batch);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i]->kernels(ctx) == 0) {
      acc[i].launches = false;
      continue;
    }
    const int l = steps[i]->conv_layer();
    if (l < 0) continue;
    const engine::ConvTactic* t = be.tactics[static_cast<size_t>(l)].get();
    if (with_workspaces && t != nullptr && t->workspace() > 0)
      acc[i].writes.push_back(bytes_of(ctx.workspace_of(l).ptr, t->workspace()));
    if (convs[static_cast<size_t>(l)].s2d) acc[i].reads.push_back(bytes_of(stem_input.get(), stem_input.get_deleter().bytes));
  }
  return acc;
}

void Engine::plan_workspaces(BatchExec& be, int batch, bool grow) {
  be.workspaces_planned = true;
  be.workspace.clear();
  const std::vector<engine::StepAccess> data = step_accesses(be, batch, false), shared = step_accesses(be, batch);
  std::vector<std::vector<bool>> waits;  // the data's ancestor sets, for every slot choice below
  const int data_depth = engine::dependency_depth(engine::step_dependencies(data, &waits), data);
  if (engine::dependency_depth(engine::step_dependencies(shared), shared) <= data_depth)
    return;  // one workspace orders nothing the data does not
  std::vector<size_t> needs(steps.size(), 0);
  for (size_t i = 0; i < steps.size(); ++i) {
    const int l = steps[i]->conv_layer();
    const engine::ConvTactic* t = l >= 0 ? be.tactics[static_cast<size_t>(l)].get() : nullptr;
    if (t != nullptr && data[i].launches) needs[i] = t->workspace();
  }
  std::vector<size_t> had;
  for (const Workspace& w : workspaces) had.push_back(w.bytes);
  std::vector<size_t> capacity = had;
  std::vector<int> slot = engine::workspace_slots(waits, needs, capacity, kMaxWorkspaces, grow);
  if (grow) {
    try {  // the new workspaces, and larger ones where their users need more (no graph holds them yet)
      for (size_t w = 1; w < capacity.size(); ++w) {
        if (w < had.size() && capacity[w] <= had[w]) continue;
        DeviceMem m = alloc(capacity[w], "branch workspace");
        const Workspace ws{m.get(), capacity[w]};
        if (w < workspaces.size()) {  // (extra_workspaces[w - 1] backs workspaces[w])
          extra_workspaces[w - 1] = std::move(m);
          workspaces[w] = ws;
        } else {
          extra_workspaces.push_back(std::move(m));
          workspaces.push_back(ws);
        }
      }
    } catch (const Error&) {  // max_device_memory: the workspaces there are
      capacity.clear();
      for (const Workspace& w : workspaces) capacity.push_back(w.bytes);
      slot = engine::workspace_slots(waits, needs, capacity, kMaxWorkspaces, false);
    }
  }
  be.workspace.assign(convs.size(), 0);
  for (size_t i = 0; i < steps.size(); ++i)
    if (slot[i] > 0) be.workspace[static_cast<size_t>(steps[i]->conv_layer())] = slot[i];
}

void Engine::capture_branches(BatchExec& be, int batch, const std::vector<engine::StepAccess>& acc,
                              const std::vector<std::vector<int>>& deps, cudaStream_t cs, size_t first, size_t last) {
  YOLOCU_CUDNN_CHECK(cudnnSetStream(cudnn.get(), cs));
  const LaunchContext ctx = launch_context(be, batch);
  std::vector<std::vector<cudaGraphNode_t>> leaves(steps.size());  // each step's last nodes
  for (size_t i = first; i < last; ++i) {
    std::vector<cudaGraphNode_t> wait;
    for (int j : deps[i])
      if (static_cast<size_t>(j) >= first) wait.insert(wait.end(), leaves[static_cast<size_t>(j)].begin(), leaves[static_cast<size_t>(j)].end());
    std::sort(wait.begin(), wait.end());
    wait.erase(std::unique(wait.begin(), wait.end()), wait.end());  // (a step that enqueued nothing passes its own on)
    set_capture_leaves(cs, wait);
    steps[i]->launch(ctx, cs);
    leaves[i] = capture_leaves(cs);
    std::sort(leaves[i].begin(), leaves[i].end());
    // A step that declared no launch must not have captured any (it would wait for nothing).
    YOLOCU_CHECK(acc[i].launches || leaves[i] == wait, kInternal, "step '", steps[i]->name(),
                 "' enqueued work at batch ", batch, " but declares no kernel (graph capture by branches)");
  }
}

LaunchContext Engine::launch_context(const BatchExec& be, int batch) const {
  return LaunchContext{sp, values, batch, half, es, be, cudnn.get(), convs, direct_conv, stem_input.get(), &workspaces};
}

void Engine::enqueue_steps(BatchExec& be, int batch, cudaStream_t s, size_t first, size_t last) {
  YOLOCU_CUDNN_CHECK(cudnnSetStream(cudnn.get(), s));
  const LaunchContext ctx = launch_context(be, batch);
  for (size_t i = first; i < std::min(last, steps.size()); ++i) steps[i]->launch(ctx, s);
}

void Engine::capture(BatchExec& be, int batch, bool branches) {
  cudaStream_t cs = capture_stream.get();
  // graph_segments graphs of consecutive steps (as equal in step count as they divide)
  const size_t n = sp.steps.size();
  const size_t k = std::max<size_t>(1, std::min(n, static_cast<size_t>(options.graph_segments)));
  std::vector<GraphExec> graphs;
  // with branches: every step's accesses and the edges between them, for all the segments
  std::vector<engine::StepAccess> acc;
  std::vector<std::vector<int>> deps;
  if (branches) {
    if (!be.workspaces_planned) plan_workspaces(be, batch, false);
    acc = step_accesses(be, batch);
    deps = engine::step_dependencies(acc);
  }
  for (size_t seg = 0; seg < k; ++seg) {
    const size_t first = n * seg / k, last = n * (seg + 1) / k;
    YOLOCU_CUDA_CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    try {
      if (branches)
        capture_branches(be, batch, acc, deps, cs, first, last);
      else
        enqueue_steps(be, batch, cs, first, last);
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(cs, &g);
      if (g) cudaGraphDestroy(g);
      (void)cudaGetLastError();
      throw;
    }
    cudaGraph_t g = nullptr;
    YOLOCU_CUDA_CHECK(cudaStreamEndCapture(cs, &g));
    CudaGraph graph(g);
    cudaGraphExec_t exec = nullptr;
    YOLOCU_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
    graphs.emplace_back(exec);
  }
  be.graphs = std::move(graphs);
  ++stats.graphs_captured;
}

void Engine::convert_input(const BatchExec& be, const void* d_input, int batch, cudaStream_t s) {
  if (be.direct_stem)
    run_direct_stem(d_input, batch, s);
  else if (stem_conv >= 0)
    ck::nchw_to_s2d_nhwc(d_input, half, stem_input.get(), half, batch, in_c, in_h, in_w, kStemChannels, s);
  else
    ck::nchw_to_nhwc(d_input, half, ptr(sp.plan.inputs[0]), half, batch, in_c, in_h, in_w, s);
}

void Engine::run(const void* d_input, int n, cudaStream_t s) {
  // With pad_batches the steps run at the anchor `batch` >= n; only the n images of d_input are
  // converted (d_input may hold no more), rows n..batch-1 keep what the buffers held (zeros from
  // the build or an earlier batch's values: finite, computed, never read back).
  const int batch = engine::run_batch(n, anchors);
  stats.padded_images += batch - n;
  BatchExec& be = batch_exec(batch);
  // The input conversion (or the direct stem) stays outside the graph: the graph then never
  // depends on d_input.
  convert_input(be, d_input, n, s);
  // The first run of a batch size is eager (it loads every kernel module outside any capture);
  // the second captures the graph, later ones replay it.
  if (options.cuda_graphs && !be.graph_failed && be.runs++ > 0) {
    if (be.graphs.empty()) {
      try {
        capture(be, batch, options.graph_branches);
      } catch (const Error& e) {
        (void)cudaGetLastError();
        be.graph_failed = true;  // run eagerly from now on (still correct, only slower)
        if (options.graph_branches) {  // unless one chain captures
          stats.warnings.push_back("batch " + std::to_string(batch) + ": the graph as branches failed (" + e.what() +
                                   "); captured as one chain");
          try {
            capture(be, batch, false);
            be.graph_failed = false;
          } catch (const Error&) {
            (void)cudaGetLastError();
          }
        }
      }
    }
    if (!be.graphs.empty()) {
      for (const GraphExec& g : be.graphs) YOLOCU_CUDA_CHECK(cudaGraphLaunch(g.get(), s));
      return;
    }
  }
  enqueue_steps(be, batch, s);
}

}  // namespace yolocu::cuda_engine_internal

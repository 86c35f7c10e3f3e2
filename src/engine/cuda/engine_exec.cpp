// GPU engine execution: the input conversion, the steps' launches (steps/), CUDA graph capture and
// replay.
#include "engine/cuda/engine_impl.hpp"
#include "engine/cuda/tactics/batch_sizes.hpp"

namespace yolocu::cuda_engine_internal {

LaunchContext Engine::launch_context(const BatchExec& be, int batch) const {
  return LaunchContext{sp,    values,      batch,       half, es, be, cudnn.get(), convs, direct_conv, stem_input.get(),
                       workspace.get(), workspace_bytes};
}

void Engine::enqueue_steps(BatchExec& be, int batch, cudaStream_t s, size_t first, size_t last) {
  YOLOCU_CUDNN_CHECK(cudnnSetStream(cudnn.get(), s));
  const LaunchContext ctx = launch_context(be, batch);
  for (size_t i = first; i < std::min(last, steps.size()); ++i) steps[i]->launch(ctx, s);
}

void Engine::capture(BatchExec& be, int batch) {
  cudaStream_t cs = capture_stream.get();
  // graph_segments graphs of consecutive steps (as equal in step count as they divide)
  const size_t n = sp.steps.size();
  const size_t k = std::max<size_t>(1, std::min(n, static_cast<size_t>(options.graph_segments)));
  std::vector<GraphExec> graphs;
  for (size_t seg = 0; seg < k; ++seg) {
    const size_t first = n * seg / k, last = n * (seg + 1) / k;
    YOLOCU_CUDA_CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    try {
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
        capture(be, batch);
      } catch (const Error&) {
        be.graph_failed = true;  // run eagerly from now on (still correct, only slower)
        (void)cudaGetLastError();
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

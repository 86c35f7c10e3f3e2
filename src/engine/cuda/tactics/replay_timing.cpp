// median_replay_us (replay_timing.hpp).
#include "engine/cuda/tactics/replay_timing.hpp"

#include <algorithm>
#include <vector>

#include "core/cuda_check.hpp"
#include "yolocu/error.hpp"

namespace yolocu::engine {
namespace {

// `reps` launches of `run` captured on `capture` as an executable graph; null where that fails.
cudaGraphExec_t capture_launches(const std::function<void(cudaStream_t)>& run, int reps, cudaStream_t capture) {
  cudaGraphExec_t exec = nullptr;
  try {
    cudaGraph_t g = nullptr;
    YOLOCU_CUDA_CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < reps; ++i) run(capture);
    } catch (...) {
      cudaStreamEndCapture(capture, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    YOLOCU_CUDA_CHECK(cudaStreamEndCapture(capture, &g));
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    YOLOCU_CUDA_CHECK(e);
  } catch (const Error&) {
    (void)cudaGetLastError();
    exec = nullptr;  // launched eagerly
  }
  return exec;
}

}  // namespace

double median_replay_us(const std::function<void(cudaStream_t)>& run, int reps, int timings, cudaStream_t capture,
                        cudaStream_t stream, cudaEvent_t e0, cudaEvent_t e1) {
  cudaGraphExec_t exec = capture_launches(run, reps, capture);
  const auto launch = [&] {
    if (exec) YOLOCU_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    else
      for (int i = 0; i < reps; ++i) run(stream);
  };
  std::vector<double> us;
  try {
    launch();  // warm-up
    for (int k = 0; k < timings; ++k) {
      YOLOCU_CUDA_CHECK(cudaEventRecord(e0, stream));
      launch();
      YOLOCU_CUDA_CHECK(cudaEventRecord(e1, stream));
      YOLOCU_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      YOLOCU_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      us.push_back(1e3 * ms / reps);
    }
  } catch (...) {
    if (exec) cudaGraphExecDestroy(exec);
    throw;
  }
  if (exec) cudaGraphExecDestroy(exec);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace yolocu::engine

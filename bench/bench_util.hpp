// Shared helpers of the CUDA benchmark binaries: a fatal check macro (a benchmark has nothing to
// recover), CUDA-event timing of a stream's work (warm-up, then median / p10 / p90), also of
// launches replayed as one CUDA graph, and a comma-list parser.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define BENCH_CUDA(x)                                                      \
  do {                                                                     \
    const cudaError_t e_ = (x);                                            \
    if (e_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

namespace yolocu::bench {

// "1,8,32" -> {1, 8, 32} (each item as atoi reads it; a trailing comma adds nothing).
inline std::vector<int> parse_int_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p) ++p;
  }
  return v;
}

struct EventTiming {
  float median_ms, p10_ms, p90_ms;
};

// Runs fn `warmup` times, then `runs` times each between two events on `s`.
inline EventTiming time_events(int runs, int warmup, cudaStream_t s, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  BENCH_CUDA(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < runs; ++i) {
    BENCH_CUDA(cudaEventRecord(a, s));
    fn();
    BENCH_CUDA(cudaEventRecord(b, s));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]};
}

// `reps` launches of `launch` captured in one CUDA graph, timed by time_events (3 warm-up replays,
// `samples` timed ones): per launch.
inline EventTiming time_graph(int samples, int reps, cudaStream_t s, const std::function<void()>& launch) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < reps; ++i) launch();
  BENCH_CUDA(cudaStreamEndCapture(s, &graph));
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  EventTiming t = time_events(samples, 3, s, [&] { BENCH_CUDA(cudaGraphLaunch(exec, s)); });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (float* v : {&t.median_ms, &t.p10_ms, &t.p90_ms}) *v /= static_cast<float>(reps);
  return t;
}

}  // namespace yolocu::bench

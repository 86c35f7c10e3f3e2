// How the engine times a kernel candidate, as it will run it: `reps` launches captured in one CUDA
// graph, one untimed replay, then `timings` replays between two events; the median per launch. The
// FP16 tuner (tuner.cpp) and the INT8 step (steps/conv_int8.cpp) time their candidates this way.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace yolocu::engine {

// `run(stream)` launches the candidate once on `stream`. The launches are captured on `capture`
// and replayed on `stream` (the same stream may serve both); where the capture fails (a launch
// throws or CUDA refuses the graph) they are launched eagerly instead. Returns microseconds per
// launch; throws Error when a timed launch fails (the graph freed, CUDA's error left to the caller).
double median_replay_us(const std::function<void(cudaStream_t)>& run, int reps, int timings, cudaStream_t capture,
                        cudaStream_t stream, cudaEvent_t e0, cudaEvent_t e1);

}  // namespace yolocu::engine

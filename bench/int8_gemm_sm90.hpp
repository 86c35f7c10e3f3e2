// CUTLASS's persistent Hopper INT8 GEMM kernels (bench_int8_gemm_sm90.cu) for the 1x1 stride-1
// layers of bench_conv_int8_sm90, and the launch-and-timing both use. A translation unit of their
// own: CUTLASS's sm90 GEMM and convolution kernels cannot be instantiated in one.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "bench_util.hpp"
#include "cutlass/cutlass.h"

namespace yolocu::bench {

// One CUTLASS device operator (GemmUniversalAdapter, ConvUniversalAdapter) on `args`: checked,
// initialised, run once and synchronised (a failed launch is named here), then timed by time_graph:
// an empty string and the timing in *out (the output left written), or why it could not run.
template <class Op>
std::string run_timed(const typename Op::Arguments& args, int samples, int reps, cudaStream_t s,
                      EventTiming* out) {
  Op op;
  if (op.can_implement(args) != cutlass::Status::kSuccess) return "cannot implement";
  const size_t ws_bytes = Op::get_workspace_size(args);
  void* ws = nullptr;
  if (ws_bytes) BENCH_CUDA(cudaMalloc(&ws, ws_bytes));
  std::string why;
  if (op.initialize(args, ws, s) != cutlass::Status::kSuccess) why = "initialize failed";
  if (why.empty() && op.run(s) != cutlass::Status::kSuccess) why = "run failed";
  if (why.empty()) {
    const cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) why = std::string("launch failed: ") + cudaGetErrorString(e);
  }
  if (why.empty()) *out = time_graph(samples, reps, s, [&] { op.run(s); });
  if (ws) cudaFree(ws);
  return why;
}

// Kernel `config` (0: pingpong 64x128x64, 1: pingpong 64x64x64, 2: cooperative 128x128x64,
// 3: cooperative 128x64x64) on Y[m, n] = sat(rint(alpha * X[m, k] W[n, k]^T)), all row-major int8:
// an empty string and its timing in *out (Y left written), or why it could not run.
std::string int8_gemm_sm90_run(int config, int m, int n, int k, const int8_t* x, const int8_t* w,
                               int8_t* y, float alpha, int samples, int reps, cudaStream_t s,
                               EventTiming* out);

}  // namespace yolocu::bench

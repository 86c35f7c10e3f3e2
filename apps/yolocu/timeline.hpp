// `yolocu bench --timeline FILE`: the GPU batches of a throughput pass with stage profiling on, as a
// Chrome trace (chrome://tracing, Perfetto: one row per execution context, a slice per stage), and
// a one-line account of their overlap: what an Nsight Systems timeline would show, from yolocu's
// own CUDA events (the GPU machine's nsys records but cannot import its reports).
#pragma once

#include <string>
#include <vector>

#include "yolocu/detector.hpp"

namespace yolocu::cli {

// The Chrome-trace events of one batch size's spans ("traceEvents" entries, comma-separated; pid =
// the batch size, tid = the context).
std::string trace_events(const std::vector<BatchSpan>& spans, int batch);

// "N batches on C contexts in X ms: engines running at once max K; Y% of the upload time under
// another batch's engine" (empty spans: "no batches").
std::string describe_overlap(const std::vector<BatchSpan>& spans);

}  // namespace yolocu::cli

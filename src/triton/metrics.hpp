// The backend's own counters on Triton's Prometheus endpoint (Triton's custom-metrics API):
//   yolocu_images_decoded_total   images decoded and detected
//   yolocu_images_decoded_cpu_total  ... of which decoded on the CPU (decode cpu, or images nvJPEG
//                                 does not take: PNG, EXIF-rotated, CMYK, cut short)
//   yolocu_decode_failures_total  requests refused because an image could not be decoded
//   yolocu_images_refused_total   requests refused by a limit (pixels, side, request bytes)
//   yolocu_slow_executions_total  executions that took at least the parameter slow_execution_ms
// The functions are looked up in the server process when the backend loads; a server without them
// (or with metrics off) gets no counters and a log line, and serving goes on.
#pragma once

#include <cstdint>

namespace yolocu::triton {

enum class Counter { kImagesDecoded, kImagesDecodedCpu, kDecodeFailures, kImagesRefused, kSlowExecutions };

// Creates the metric families (once per backend, from TRITONBACKEND_Initialize). Thread-safe after.
void metrics_init();
void metrics_finalize();
void metrics_add(Counter counter, double value);

}  // namespace yolocu::triton

#include "triton/metrics.hpp"

#include <dlfcn.h>

#include <string>

#include "triton/log.hpp"
#include "triton/triton_api.hpp"

namespace yolocu::triton {
namespace {

struct MetricsApi {
  TritonMetricFamilyNewFn family_new = nullptr;
  TritonMetricFamilyDeleteFn family_delete = nullptr;
  TritonMetricNewFn metric_new = nullptr;
  TritonMetricDeleteFn metric_delete = nullptr;
  TritonMetricIncrementFn increment = nullptr;
};

struct Metric {
  const char* name;
  const char* help;
  TRITONSERVER_MetricFamily* family = nullptr;
  TRITONSERVER_Metric* metric = nullptr;
};

MetricsApi api;
Metric metrics[] = {
    {"yolocu_images_decoded_total", "Images the yolocu backend decoded and detected"},
    {"yolocu_images_decoded_cpu_total",
     "Images the yolocu backend decoded on the CPU: every image of decode cpu, and those nvJPEG does not take"},
    {"yolocu_decode_failures_total", "Requests the yolocu backend refused because an image could not be decoded"},
    {"yolocu_images_refused_total", "Requests the yolocu backend refused by a limit (pixels, image side, request bytes)"},
    {"yolocu_slow_executions_total", "Executions of the yolocu backend that took at least its parameter slow_execution_ms"},
};

template <typename Fn>
Fn lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// Logs and frees a failed call's error; true when the call succeeded.
bool ok(TRITONSERVER_Error* err, const std::string& what) {
  if (err == nullptr) return true;
  log_warn("custom metrics off: " + what + ": " + TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  return false;
}

}  // namespace

void metrics_init() {
  api.family_new = lookup<TritonMetricFamilyNewFn>("TRITONSERVER_MetricFamilyNew");
  api.family_delete = lookup<TritonMetricFamilyDeleteFn>("TRITONSERVER_MetricFamilyDelete");
  api.metric_new = lookup<TritonMetricNewFn>("TRITONSERVER_MetricNew");
  api.metric_delete = lookup<TritonMetricDeleteFn>("TRITONSERVER_MetricDelete");
  api.increment = lookup<TritonMetricIncrementFn>("TRITONSERVER_MetricIncrement");
  if (!api.family_new || !api.family_delete || !api.metric_new || !api.metric_delete || !api.increment) {
    log_warn("custom metrics off: this server has no custom-metrics API");
    api = {};
    return;
  }
  for (Metric& m : metrics) {
    if (!ok(api.family_new(&m.family, TRITONSERVER_METRIC_KIND_COUNTER, m.name, m.help), m.name)) {
      m.family = nullptr;
      continue;
    }
    if (!ok(api.metric_new(&m.metric, m.family, nullptr, 0), m.name)) m.metric = nullptr;
  }
}

void metrics_finalize() {
  for (Metric& m : metrics) {
    if (m.metric) ok(api.metric_delete(m.metric), m.name);
    if (m.family) ok(api.family_delete(m.family), m.name);
    m.metric = nullptr;
    m.family = nullptr;
  }
}

void metrics_add(Counter counter, double value) {
  Metric& m = metrics[static_cast<int>(counter)];
  if (m.metric && value > 0) ok(api.increment(m.metric, value), m.name);
}

}  // namespace yolocu::triton

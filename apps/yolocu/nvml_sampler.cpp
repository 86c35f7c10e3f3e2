// NVML sampling through dlopen (see the header). NVML's C API is declared here with the few types
// it needs (nvml.h is not required to build): nvmlReturn_t is an int (0: success), a device an
// opaque pointer.
#include "nvml_sampler.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <type_traits>

namespace yolocu::cli {

struct NvmlSampler::Api {
  struct Utilization {
    unsigned gpu, memory;
  };
  using Device = void*;
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, Device*) = nullptr;
  int (*decoder)(Device, unsigned*, unsigned*) = nullptr;
  int (*rates)(Device, Utilization*) = nullptr;
  std::vector<Device> devices;
};

NvmlSampler::NvmlSampler(int period_ms) : period_ms_(std::max(10, period_ms)) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why_not_ = "libnvidia-ml.so.1 does not load";
    return;
  }
  auto* a = new Api;
  a->lib = lib;
  auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name)); };
  sym(a->init, "nvmlInit_v2");
  sym(a->shutdown, "nvmlShutdown");
  sym(a->count, "nvmlDeviceGetCount_v2");
  sym(a->handle, "nvmlDeviceGetHandleByIndex_v2");
  sym(a->decoder, "nvmlDeviceGetDecoderUtilization");
  sym(a->rates, "nvmlDeviceGetUtilizationRates");
  unsigned n = 0;
  if (!a->init || !a->shutdown || !a->count || !a->handle || !a->decoder || !a->rates) {
    why_not_ = "libnvidia-ml.so.1 lacks an entry point";
  } else if (a->init() != 0) {
    why_not_ = "nvmlInit failed";
    a->shutdown = nullptr;
  } else if (a->count(&n) != 0 || n == 0) {
    why_not_ = "NVML sees no GPU";
  } else {
    for (unsigned i = 0; i < n; ++i) {
      Api::Device d = nullptr;
      if (a->handle(i, &d) == 0) a->devices.push_back(d);
    }
  }
  if (a->devices.empty()) {
    if (why_not_.empty()) why_not_ = "NVML gives no device handle";
    if (a->shutdown) a->shutdown();
    dlclose(lib);
    delete a;
    return;
  }
  api_ = a;
  dec_.resize(a->devices.size());
  sm_.resize(a->devices.size());
  thread_ = std::thread([this] { sample_loop(period_ms_); });
}

NvmlSampler::~NvmlSampler() {
  stop();
  if (api_) {
    api_->shutdown();
    dlclose(api_->lib);
    delete api_;
  }
}

void NvmlSampler::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void NvmlSampler::sample_loop(int period_ms) {
  while (!stop_.load()) {
    for (size_t i = 0; i < api_->devices.size(); ++i) {
      unsigned dec = 0, period_us = 0;
      Api::Utilization u{};
      if (api_->decoder(api_->devices[i], &dec, &period_us) == 0) dec_[i].push_back(dec);
      if (api_->rates(api_->devices[i], &u) == 0) sm_[i].push_back(u.gpu);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
  }
}

std::vector<double> NvmlSampler::decoder_means() const {
  std::vector<double> out;
  if (thread_.joinable()) return out;  // still sampling: stop() first
  for (const auto& d : dec_) {
    if (d.empty()) continue;
    double sum = 0;
    for (unsigned v : d) sum += v;
    out.push_back(sum / static_cast<double>(d.size()));
  }
  return out;
}

std::string NvmlSampler::summary() const {
  if (!api_) return "NVDEC utilisation: no NVML (" + why_not_ + ")";
  if (thread_.joinable()) return "NVDEC utilisation: still sampling (stop() first)";
  std::string s = "NVDEC utilisation (NVML, every " + std::to_string(period_ms_) + " ms):";
  char buf[160];
  for (size_t i = 0; i < dec_.size(); ++i) {
    std::vector<unsigned> d = dec_[i];
    if (d.empty()) {
      std::snprintf(buf, sizeof buf, "%s GPU %zu no samples", i ? ";" : "", i);
      s += buf;
      continue;
    }
    std::sort(d.begin(), d.end());
    double sum = 0, sm = 0;
    for (unsigned v : d) sum += v;
    for (unsigned v : sm_[i]) sm += v;
    std::snprintf(buf, sizeof buf, "%s GPU %zu mean %.1f%%, median %u%%, max %u%% of %zu samples (SM mean %.1f%%)",
                  i ? ";" : "", i, sum / static_cast<double>(d.size()), d[d.size() / 2], d.back(), d.size(),
                  sm_[i].empty() ? 0.0 : sm / static_cast<double>(sm_[i].size()));
    s += buf;
  }
  return s;
}

}  // namespace yolocu::cli

// NVDEC and SM utilisation of every GPU, sampled from NVML while a run goes on (yolocu detect
// --source --timeline, bench_video_decode). libnvidia-ml.so.1 (the driver's) is loaded with dlopen:
// builds and machines without it still run, and the summary says why it has no figures.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace yolocu::cli {

class NvmlSampler {
 public:
  // Starts sampling every `period_ms` on a thread of its own (nothing when NVML does not load).
  explicit NvmlSampler(int period_ms = 100);
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // Stops sampling (also done by the destructor); the figures stay.
  void stop();
  // "NVDEC utilisation (NVML, every 100 ms, N samples): GPU 0 mean X%, median Y%, max Z% (SM mean W%)"
  // per GPU; or "NVDEC utilisation: no NVML (<why>)".
  std::string summary() const;

  // Mean NVDEC utilisation (%) of each GPU so far (empty: no NVML or no samples).
  std::vector<double> decoder_means() const;

 private:
  void sample_loop(int period_ms);
  struct Api;
  Api* api_ = nullptr;  // owned; null when NVML did not load
  std::string why_not_;
  std::vector<std::vector<unsigned>> dec_, sm_;  // per GPU, per sample (written by the thread until stop())
  std::atomic<bool> stop_{false};
  std::thread thread_;
  int period_ms_ = 100;
};

}  // namespace yolocu::cli

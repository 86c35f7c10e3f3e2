#include "report.hpp"

#include <unistd.h>

#include <cstdio>

#include "json_out.hpp"

namespace yolocu::cli {

Progress::Progress(size_t total, bool quiet, bool force)
    : total_(total), quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1), force_(force) {}

void Progress::update(size_t done) {
  if (quiet_ || total_ < 2 || !(tty_ || force_)) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = s > 0 ? static_cast<double>(done) / s : 0.0;
  const long eta = rate > 0 ? static_cast<long>(static_cast<double>(total_ - done) / rate + 0.5) : 0;
  char line[96];
  std::snprintf(line, sizeof line, "[%zu/%zu] %.1f img/s, ETA %ld:%02ld", done, total_, rate, eta / 60, eta % 60);
  if (tty_) {
    std::fprintf(stderr, "\r%s\033[K", line);
    if (done == total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  } else if (done % 50 == 0 || done == total_) {
    std::fprintf(stderr, "%s\n", line);
  }
}

std::string describe_decode(const Detector& detector) {
  const DecodeStats d = detector.decode_stats();
  char buf[256];
  if (detector.options().decode == DecodeDevice::kCpu) {
    std::snprintf(buf, sizeof buf, "decode: cpu");
  } else {
    std::snprintf(buf, sizeof buf, "decode: gpu (%s): %lld images on the GPU, %lld on the CPU (PNG, EXIF-rotated, CMYK, ...)",
                  d.backend.empty() ? "nvjpeg" : d.backend.c_str(), static_cast<long long>(d.gpu),
                  static_cast<long long>(d.cpu_fallback));
  }
  return buf;
}

std::string describe_build(const Detector& detector) {
  const BuildInfo& b = detector.build_info();
  char buf[512];
  if (detector.device() != Device::kCuda) {
    std::snprintf(buf, sizeof buf, "built in %.0f ms (%s)", b.build_ms, device_name(detector.device()));
    return buf;
  }
  const char* kind = b.tactics_tuned > 0 ? (b.tactic_cache_hits + b.tactic_memo_hits > 0 ? "partly cold" : "cold")
                                         : "warm";
  std::snprintf(buf, sizeof buf,
                "built in %.0f ms; tactics: %d (%d from the cache file (%d plans restored), %d from this process, %d "
                "tuned) in %.0f ms, %s; cache %s",
                b.build_ms, b.tactic_layers, b.tactic_cache_hits, b.tactic_plans_restored, b.tactic_memo_hits,
                b.tactics_tuned, b.tune_ms, kind, b.tactic_cache.empty() ? "none" : b.tactic_cache.c_str());
  std::string out = buf;
  if (!b.direct_stem_batches.empty()) {
    out += "; direct stem at batch";
    for (size_t i = 0; i < b.direct_stem_batches.size(); ++i) out += (i ? ", " : " ") + std::to_string(b.direct_stem_batches[i]);
  }
  // Where the tuning time went, on a line of its own (greppable: "tune breakdown:").
  return b.tune_breakdown.empty() ? out : out + "\n    " + b.tune_breakdown;
}

std::string build_json_fields(const Detector& detector) {
  const BuildInfo& b = detector.build_info();
  return "\"build_ms\": " + json_number(b.build_ms) + ", \"tune_ms\": " + json_number(b.tune_ms) +
         ", \"tactic_layers\": " + std::to_string(b.tactic_layers) + ", \"tactic_cache_hits\": " +
         std::to_string(b.tactic_cache_hits) + ", \"tactic_plans_restored\": " + std::to_string(b.tactic_plans_restored) +
         ", \"tactics_tuned\": " + std::to_string(b.tactics_tuned) + ", \"direct_stem_batches\": [" + [&] {
           std::string list;
           for (size_t i = 0; i < b.direct_stem_batches.size(); ++i) list += (i ? ", " : "") + std::to_string(b.direct_stem_batches[i]);
           return list;
         }() + "]";
}

}  // namespace yolocu::cli

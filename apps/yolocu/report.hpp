// What the CLI tells the user on stderr besides results: the progress line, how the detector was
// built, how the images were decoded.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "yolocu/detector.hpp"

namespace yolocu::cli {

// "[37/128] 12.3 img/s, ETA 0:08" on stderr: rewritten in place on a terminal; when stderr is not
// a terminal, a line every 50 images with `force` (--progress) and nothing without.
class Progress {
 public:
  Progress(size_t total, bool quiet, bool force = false);
  void update(size_t done);

 private:
  size_t total_;
  bool quiet_, tty_, force_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// "decode: cpu", or "decode: gpu (nvjpeg hardware): N images on the GPU, M on the CPU (...)".
std::string describe_decode(const Detector& detector);

// One line on how the detector was built: wall time, and on the GPU the tactics' origin (tuned
// now = cold, or from the tactic cache file = warm), e.g. "built in T ms; tactics: L (L from the
// cache file (P plans restored), 0 tuned) in T ms, warm; cache ~/.cache/...", and on the
// GPU a second line, indented, "tune breakdown: ..." (CudaEngineStats::tune_breakdown).
std::string describe_build(const Detector& detector);
// The same as JSON fields (no braces): "build_ms": ..., "tune_ms": ..., ...
std::string build_json_fields(const Detector& detector);

}  // namespace yolocu::cli

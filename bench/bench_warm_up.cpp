// How long a GPU detector takes to be ready for every batch size 1..B (what `yolocu detect --source`
// does before B video streams open): Detector::create (the tuned sizes: 1 and B, tuned now or
// loaded from the tactic cache file) and Detector::warm_up of 1..B (the other sizes derived, their
// plans built or restored from the file, each size run once). Run it twice on one cache file: the
// first run is the cold start (remove the file first), the second the start from the file (a new
// process: the first one's in-process memo is gone).
//
//   bench_warm_up MODEL [--batch B] [--precision fp16|fp32] [--pad-batches] [--fast-start] [--tune-batches L]
//                 [--tactic-cache FILE]
//     --batch B        the largest batch (the number of streams); default 32
//     --pad-batches    DetectorOptions::pad_batches: only the anchor sizes are prepared
//     --fast-start     DetectorOptions::fast_start: that, B alone tuned, derived sizes compile nothing
//     --tune-batches L DetectorOptions::tune_batches, e.g. 32 (default: 1 and B)
//     --tactic-cache   the cache file (default: $YOLOCU_TACTIC_CACHE, else the user's cache)
// Prints one line: "warm start: batch sizes 1..B ready in T s (create C s: tune U s; warm-up W s)
// [engine sizes ...]", then what each batch size costs the engine once ready ("engine ms by batch
// size": the median of 20 calls' GPU engine stage, CUDA events, a 640x480 image letterboxed): with
// --pad-batches a size runs its anchor, so the two runs' lines side by side say what padding costs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"

namespace {

// The median GPU engine time (ms) of `reps` detect() calls of n images, stage profiling on.
double engine_ms(yolocu::Detector& det, const yolocu::ImageView& im, int n, int reps) {
  const std::vector<yolocu::ImageView> batch(static_cast<size_t>(n), im);
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    det.detect(batch);
    const yolocu::StageTimes t = det.last_times();
    if (t.gpu_timed_batches > 0) ms.push_back(t.gpu_engine);
  }
  if (ms.empty()) return -1;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// "engine ms by batch size<tag> (...): 1:x 2:y ...; mean over sizes 1..B: z ms per image".
void print_engine_ms(yolocu::Detector& det, const yolocu::ImageView& im, int max_batch, const char* tag) {
  det.set_stage_profiling(true);
  std::string row;
  double per_image = 0;
  for (int n = 1; n <= max_batch; ++n) {
    const double ms = engine_ms(det, im, n, 20);
    per_image += ms / n;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s%d:%.3f", n > 1 ? " " : "", n, ms);
    row += buf;
  }
  det.set_stage_profiling(false);
  std::printf("engine ms by batch size%s (median of 20, GPU stage events): %s; mean over sizes 1..%d: %.4f ms "
              "per image\n", tag, row.c_str(), max_batch, per_image / max_batch);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: bench_warm_up MODEL [--batch B] [--precision fp16|fp32] [--pad-batches] [--fast-start] "
                         "[--tune-batches L] [--tactic-cache FILE]\n");
    return 2;
  }
  yolocu::DetectorOptions o;
  o.device = yolocu::Device::kCuda;
  o.max_batch = 32;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--pad-batches") o.pad_batches = true;
    else if (a == "--fast-start") o.fast_start = true;
    else if (a == "--batch" && has_value) o.max_batch = std::atoi(argv[++i]);
    else if (a == "--precision" && has_value) o.precision = std::strcmp(argv[++i], "fp32") ? yolocu::Precision::kFloat16 : yolocu::Precision::kFloat32;
    else if (a == "--tactic-cache" && has_value) o.tactic_cache = argv[++i];
    else if (a == "--tune-batches" && has_value) {
      for (const char* p = argv[++i]; *p;) {  // a comma-separated list of sizes
        char* end = nullptr;
        o.tune_batches.push_back(static_cast<int>(std::strtol(p, &end, 10)));
        if (end == p) break;
        p = *end == ',' ? end + 1 : end;
      }
    }
    else {
      std::fprintf(stderr, "bench_warm_up: unknown or incomplete option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (o.max_batch < 1 || o.max_batch > 1024) {
    std::fprintf(stderr, "bench_warm_up: --batch must be in 1..1024\n");
    return 2;
  }
  try {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    auto det = yolocu::Detector::create(argv[1], o);
    const auto t1 = clock::now();
    det->warm_up();  // every size 1..max_batch
    const auto t2 = clock::now();
    const yolocu::BuildInfo& b = det->build_info();
    std::string sizes;
    for (int s : b.engine_batches) sizes += (sizes.empty() ? "" : " ") + std::to_string(s);
    const double create_s = std::chrono::duration<double>(t1 - t0).count();
    const double warm_s = std::chrono::duration<double>(t2 - t1).count();
    std::printf("warm start: batch sizes 1..%d ready in %.1f s (create %.1f s: tune %.1f s, %d tuned / %d from the "
                "cache file / %d plans restored; warm-up %.1f s)%s%s%s, %s, tactic cache %s\n",
                o.max_batch, create_s + warm_s, create_s, b.tune_ms / 1000.0, b.tactics_tuned, b.tactic_cache_hits,
                b.tactic_plans_restored, warm_s, sizes.empty() ? "" : " [engine sizes ", sizes.c_str(),
                sizes.empty() ? " [every size]" : "]", o.precision == yolocu::Precision::kFloat16 ? "fp16" : "fp32",
                b.tactic_cache.empty() ? "none" : b.tactic_cache.c_str());
    std::printf("warm-up: %d sizes derived in %.0f ms (plans built / restored on all cores %.0f ms, then on the "
                "engine's thread %.0f ms), %d derived plans restored from the file, %d compiled\n",
                b.derived_batches, b.derive_ms, b.derive_pool_ms, b.derive_finish_ms, b.derived_plans_restored,
                b.derived_compiled);
    if (!b.tune_breakdown.empty()) std::printf("%s\n", b.tune_breakdown.c_str());  // where create's tuning went
    // What each size costs once ready.
    std::vector<uint8_t> pixels(640 * 480 * 3, 114);
    const yolocu::ImageView im{pixels.data(), 640, 480, 640 * 3};
    print_engine_ms(*det, im, o.max_batch, o.pad_batches || o.fast_start ? " (padded)" : "");
  } catch (const yolocu::Error& e) {
    std::fprintf(stderr, "bench_warm_up: %s\n", e.what());
    return 1;
  }
  return 0;
}

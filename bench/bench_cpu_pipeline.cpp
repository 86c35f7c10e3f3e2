// End-to-end CPU pipeline benchmark, one image: decode (JPEG -> BGR), letterbox + input tensor,
// forward (oneDNN engine), post-processing (decode + NMS + back-projection), as `yolocu detect`
// runs them. Warm-up, then N timed runs; prints the median of each stage (and of the total) as a
// Markdown table row, comparable with bench/peer_torch_cpu.py's row.
//   bench_cpu_pipeline MODEL IMAGE [--iters N] [--warmup W] [--threads T]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"

using namespace yolocu;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_cpu_pipeline MODEL IMAGE [--iters N] [--warmup W] [--threads T]\n");
    return 2;
  }
  int iters = 20, warmup = 3, threads = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--iters") iters = std::max(v, 1);
    else if (k == "--warmup") warmup = std::max(v, 0);
    else if (k == "--threads") threads = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    DetectorOptions o;
    o.device = Device::kCpu;
    o.cpu_threads = threads;
    o.postprocess = detect_options();
    auto det = Detector::create(argv[1], o);
    std::vector<double> dec, pre, fwd, post, total;
    size_t found = 0;
    for (int i = 0; i < warmup + iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const Image im = decode_image_file(argv[2]);
      const auto t1 = std::chrono::steady_clock::now();
      found = det->detect(im.view()).size();
      const auto t2 = std::chrono::steady_clock::now();
      if (i < warmup) continue;
      const StageTimes st = det->last_times();
      dec.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      pre.push_back(st.preprocess);
      fwd.push_back(st.inference);
      post.push_back(st.postprocess);
      total.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    }
    std::printf("# %s on %s: %zu detections; %d threads requested (0 = all cores)\n", argv[1], argv[2], found, threads);
    std::printf("| pipeline | decode | letterbox | forward | post | total (median of %d) |\n", iters);
    std::printf("|---|---|---|---|---|---|\n");
    std::printf("| yolocu CPU (oneDNN) | %.2f | %.2f | %.2f | %.2f | %.2f |\n", median(dec), median(pre), median(fwd),
                median(post), median(total));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_cpu_pipeline: %s: %s\n", error_code_name(e.code()), e.what());
    return 1;
  }
}

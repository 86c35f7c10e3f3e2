// NMS-dominated benchmark: 1000 / 5000 / 20000 random boxes, one class and 80 classes (class
// offset), iou 0.45, through the CUDA post-processing (decode of one-hot rows at conf 0 + greedy
// NMS + projection + results into pinned memory; the decode of n rows is a few us), once per NMS
// path: kAuto (what the library chooses), kKeptBoxes, kBitmask. Boxes from the formula below,
// which bench/peer_postprocess.py reproduces bit for bit for torchvision.ops.batched_nms:
//   splitmix64(x): x += 0x9E3779B97F4A7C15; z = (x ^ x >> 30) * 0xBF58476D1CE4E5B9;
//                  z = (z ^ z >> 27) * 0x94D049BB133111EB; return z ^ z >> 31   (mod 2^64)
//   u(i) = float(splitmix64(seed << 32 | i) >> 40) / 2^24, seed = n
//   box k: cx = u(6k) * 640, cy = u(6k+1) * 640, w = 8 + u(6k+2) * 120, h = 8 + u(6k+3) * 120,
//          score = u(6k+4), class = min(79, int(u(6k+5) * 80)) (80 classes) or 0 (one class)
//          (float32 arithmetic)
// Ours stops at max_det = min(n, 4096) kept boxes (as the pipeline does); batched_nms keeps all.
// The workspaces get a 64 MiB bitmask budget (the default 16 MiB holds 11,456 candidates: 20000
// would take the kept-box path in kAuto). Median of `runs` calls timed with CUDA events (10
// warm-up calls); every path's detections are compared with kAuto's (bit-identical expected).
//
//   bench_nms [runs (default 100)]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/postprocess_cuda.hpp"

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float uniform(uint64_t seed, uint64_t i) {
  return static_cast<float>(splitmix64((seed << 32) | i) >> 40) * (1.f / 16777216.f);
}

bool same_bits(const yolocu::Detections& a, const yolocu::Detections& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace yolocu;
  const int runs = argc > 1 ? std::atoi(argv[1]) : 100;
  try {
    cudaStream_t s;
    BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaDeviceProp prop{};
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("# bench_nms on %s, median of %d runs (p10-p90)\n", prop.name, runs);
    std::printf(
        "| stage | boxes | classes | impl | median us | p10-p90 us | kept | same as auto |\n");
    for (int n : {1000, 5000, 20000}) {
      for (int nc : {1, 80}) {
        Tensor out(DType::kFloat32, {1, n, 5 + nc});
        std::memset(out.data(), 0, out.nbytes());
        float* p = out.data_as<float>();
        const uint64_t seed = static_cast<uint64_t>(n);
        for (int k = 0; k < n; ++k, p += 5 + nc) {
          const uint64_t i = 6ull * static_cast<uint64_t>(k);
          p[0] = uniform(seed, i) * 640.f;
          p[1] = uniform(seed, i + 1) * 640.f;
          p[2] = 8.f + uniform(seed, i + 2) * 120.f;
          p[3] = 8.f + uniform(seed, i + 3) * 120.f;
          p[4] = uniform(seed, i + 4);
          p[5 + (nc == 1 ? 0 : std::min(nc - 1, static_cast<int>(uniform(seed, i + 5) * 80.f)))] =
              1.f;
        }
        PostprocessOptions o;
        o.conf_threshold = 0.f;
        o.iou_threshold = 0.45f;
        o.max_det = std::min(n, kMaxCudaMaxDet);
        void* d = nullptr;
        BENCH_CUDA(cudaMalloc(&d, out.nbytes()));
        BENCH_CUDA(cudaMemcpy(d, out.data(), out.nbytes(), cudaMemcpyHostToDevice));
        OutputView v = output_view(out);
        v.data = d;
        const std::vector<LetterboxGeometry> geo{letterbox_geometry(640, 640, 640, 640)};
        Detections reference;
        for (CudaNmsPath path :
             {CudaNmsPath::kAuto, CudaNmsPath::kKeptBoxes, CudaNmsPath::kBitmask}) {
          CudaNmsConfig cfg;
          cfg.path = path;
          cfg.bitmask_bytes = size_t{64} << 20;
          PostprocessWorkspace ws(1, n, nc, o, 0, cfg);
          const auto t =
              bench::time_events(runs, 10, s, [&] { postprocess_cuda(v, geo, o, ws, s); });
          const Detections got = ws.results()[0];
          if (path == CudaNmsPath::kAuto) reference = got;
          const char* name = path == CudaNmsPath::kAuto        ? "auto"
                             : path == CudaNmsPath::kKeptBoxes ? "kept-boxes"
                                                               : "bitmask";
          const bool auto_bitmask =
              ws.plan().bitmask_capacity >= n && n >= ws.plan().bitmask_min_candidates;
          std::printf(
              "| nms | %d | %d | yolocu %s%s (max_det %d) | %.1f | %.1f-%.1f | %zu | %s |\n", n, nc,
              name,
              path == CudaNmsPath::kAuto ? (auto_bitmask ? " = bitmask" : " = kept-boxes") : "",
              o.max_det, t.median_ms * 1000.f, t.p10_ms * 1000.f, t.p90_ms * 1000.f, got.size(),
              same_bits(reference, got) ? "yes" : "NO");
        }
        BENCH_CUDA(cudaFree(d));
      }
    }
    BENCH_CUDA(cudaStreamDestroy(s));
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_nms: %s\n", e.what());
    return 1;
  }
  return 0;
}

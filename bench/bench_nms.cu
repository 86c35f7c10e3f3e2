// NMS-dominated benchmark: 1000 / 5000 / 25200 random boxes, class-aware (80 classes), iou 0.45,
// through the CUDA post-processing (decode of one-hot rows at conf 0 + greedy NMS + projection +
// copy back; the decode of n rows is a few us). Boxes from the formula below, which
// bench/peer_postprocess.py reproduces bit for bit for torchvision.ops.batched_nms:
//   splitmix64(x): x += 0x9E3779B97F4A7C15; z = (x ^ x >> 30) * 0xBF58476D1CE4E5B9;
//                  z = (z ^ z >> 27) * 0x94D049BB133111EB; return z ^ z >> 31   (mod 2^64)
//   u(i) = float(splitmix64(seed << 32 | i) >> 40) / 2^24, seed = n
//   box k: cx = u(6k) * 640, cy = u(6k+1) * 640, w = 8 + u(6k+2) * 120, h = 8 + u(6k+3) * 120,
//          score = u(6k+4), class = min(79, int(u(6k+5) * 80))   (float32 arithmetic)
// Ours stops at max_det = min(n, 4096) kept boxes (as the pipeline does); batched_nms keeps all.
//
//   bench_nms [runs (default 100)]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

}  // namespace

int main(int argc, char** argv) {
  using namespace yolocu;
  const int runs = argc > 1 ? std::atoi(argv[1]) : 100;
  constexpr int kNc = 80;
  try {
    cudaStream_t s;
    BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaDeviceProp prop{};
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("# bench_nms on %s, median of %d runs (p10-p90)\n", prop.name, runs);
    std::printf("| stage | boxes | mode | impl | median us | p10-p90 us | kept |\n");
    for (int n : {1000, 5000, 25200}) {
      Tensor out(DType::kFloat32, {1, n, 5 + kNc});  // zero-initialised
      float* p = out.data_as<float>();
      const uint64_t seed = static_cast<uint64_t>(n);
      for (int k = 0; k < n; ++k, p += 5 + kNc) {
        const uint64_t i = 6ull * static_cast<uint64_t>(k);
        p[0] = uniform(seed, i) * 640.f;
        p[1] = uniform(seed, i + 1) * 640.f;
        p[2] = 8.f + uniform(seed, i + 2) * 120.f;
        p[3] = 8.f + uniform(seed, i + 3) * 120.f;
        p[4] = uniform(seed, i + 4);
        p[5 + std::min(kNc - 1, static_cast<int>(uniform(seed, i + 5) * 80.f))] = 1.f;
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
      PostprocessWorkspace ws(1, n, kNc, o);
      const auto t = bench::time_events(runs, 10, s, [&] { postprocess_cuda(v, geo, o, ws, s); });
      const size_t kept = ws.results()[0].size();
      std::printf("| nms | %d | class-aware | yolocu (max_det %d) | %.1f | %.1f-%.1f | %zu |\n", n, o.max_det,
                  t.median_ms * 1000.f, t.p10_ms * 1000.f, t.p90_ms * 1000.f, kept);
      BENCH_CUDA(cudaFree(d));
    }
    BENCH_CUDA(cudaStreamDestroy(s));
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_nms: %s\n", e.what());
    return 1;
  }
  return 0;
}

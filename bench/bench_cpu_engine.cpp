// CPU forward benchmark of the yolocu engine: warm-up, then N timed runs; prints median and p90.
//   bench_cpu_engine MODEL [--batch B] [--size S] [--iters N] [--warmup W] [--threads T] [--fuse-detect 0|1]
// bench/cpu_forward_vs_ort.py runs it against ONNX Runtime in the same session.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"

using namespace yolocu;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_cpu_engine MODEL [--batch B] [--size S] [--iters N] [--warmup W] [--threads T] [--fuse-detect 0|1]\n");
    return 2;
  }
  const std::string path = argv[1];
  int batch = 1, size = 640, iters = 20, warmup = 3, threads = 0, fuse_detect = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--batch") batch = v;
    else if (k == "--size") size = v;
    else if (k == "--iters") iters = v;
    else if (k == "--warmup") warmup = v;
    else if (k == "--threads") threads = v;
    else if (k == "--fuse-detect") fuse_detect = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    auto model = std::make_shared<Model>(load_onnx(path));
    CpuEngineOptions opts;
    opts.num_threads = threads;
    opts.fuse_detect_head = fuse_detect != 0;
    CpuEngine engine(model, opts);
    const DType dt = model->graph.inputs[0].dtype;
    Tensor x(DType::kFloat32, {batch, 3, size, size});
    std::mt19937 rng(0);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = u(rng);
    if (dt != DType::kFloat32) x = cast_tensor(x, dt);
    const auto t0 = std::chrono::steady_clock::now();
    engine.prepare({x.shape()});
    const double prep = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (int i = 0; i < warmup; ++i) engine.run({x});
    std::vector<double> ms;
    for (int i = 0; i < iters; ++i) {
      const auto a = std::chrono::steady_clock::now();
      engine.run({x});
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(ms.begin(), ms.end());
    const EngineStats st = engine.stats();
    std::printf("yolocu_cpu model=%s batch=%d size=%d fuse_detect=%d median_ms=%.2f p90_ms=%.2f min_ms=%.2f prepare_ms=%.1f arena_mib=%.1f\n",
                path.substr(path.find_last_of('/') + 1).c_str(), batch, size, fuse_detect, ms[ms.size() / 2],
                ms[std::min(ms.size() - 1, ms.size() * 9 / 10)], ms.front(), prep, st.arena_bytes / 1048576.0);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_cpu_engine: %s\n", e.what());
    return 1;
  }
}

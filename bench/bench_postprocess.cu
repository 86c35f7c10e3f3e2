// GPU post-processing benchmark: decode + NMS + projection + the results into pinned memory, on the
// yolov5n reference outputs (reference/bus.npz and zidane.npz "output", alternating, tiled to the
// batch), detect (conf 0.25, iou 0.45, max_det 1000) and val (conf 0.001, iou 0.6, multi-label,
// max_det 300) settings, batch 1 and 32, float32 and float16 inputs. Warm-up, then the median of
// `runs` calls timed with CUDA events on the stream (events around the enqueue; the results land
// in pinned memory), once enqueued directly and once as a replayed CUDA graph, with the default
// NMS configuration (kAuto: the NMS launch carries the bitmask path's blocks) and with
// CudaNmsPath::kKeptBoxes (image blocks only). Prints table rows whose labels match
// bench/peer_postprocess.py.
//
//   bench_postprocess [data_dir (default $YOLOCU_DATA_DIR)] [runs (default 200)]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/npy.hpp"
#include "yolocu/postprocess_cuda.hpp"

namespace {

struct Timing {
  float median_us, p10_us, p90_us;
};

Timing time_it(int runs, cudaStream_t s, const std::function<void()>& fn) {
  const auto t = yolocu::bench::time_events(runs, 20, s, fn);
  return {t.median_ms * 1000.f, t.p10_ms * 1000.f, t.p90_ms * 1000.f};
}

yolocu::Tensor tile(const yolocu::Tensor& a, const yolocu::Tensor& b, int batch) {
  const int64_t rows = a.dim(a.rank() - 2), ch = a.dim(a.rank() - 1);
  yolocu::Tensor big(a.dtype(), {batch, rows, ch});
  for (int i = 0; i < batch; ++i) {
    const yolocu::Tensor& src = i % 2 ? b : a;
    std::memcpy(static_cast<uint8_t*>(big.data()) + i * src.nbytes(), src.data(), src.nbytes());
  }
  return big;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace yolocu;
  const char* env = std::getenv("YOLOCU_DATA_DIR");
  const std::string data = argc > 1 ? argv[1] : (env ? env : "");
  const int runs = argc > 2 ? std::atoi(argv[2]) : 200;
  if (data.empty()) {
    std::fprintf(stderr, "usage: bench_postprocess <data_dir> [runs] (or set YOLOCU_DATA_DIR)\n");
    return 2;
  }
  try {
    const Tensor bus = load_npz(data + "/reference/bus.npz").at("output");
    const Tensor zid = load_npz(data + "/reference/zidane.npz").at("output");
    const LetterboxGeometry gb = letterbox_geometry(810, 1080, 640, 640);
    const LetterboxGeometry gz = letterbox_geometry(1280, 720, 640, 640);
    cudaStream_t s;
    BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaDeviceProp prop{};
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("# bench_postprocess on %s, median of %d runs (p10-p90), input = yolov5n output of "
                "bus/zidane tiled\n",
                prop.name, runs);
    std::printf("| stage | setting | dtype | batch | impl | median us/batch | us/image | p10-p90 "
                "us/batch | detections img0 | workspace bytes |\n");
    for (int val = 0; val < 2; ++val) {
      const PostprocessOptions o = val ? val_options() : detect_options();
      for (DType dt : {DType::kFloat32, DType::kFloat16}) {
        for (int batch : {1, 32}) {
          const Tensor host = tile(cast_tensor(bus, dt), cast_tensor(zid, dt), batch);
          std::vector<LetterboxGeometry> geo;
          for (int i = 0; i < batch; ++i) geo.push_back(i % 2 ? gz : gb);
          void* d = nullptr;
          BENCH_CUDA(cudaMalloc(&d, host.nbytes()));
          BENCH_CUDA(cudaMemcpy(d, host.data(), host.nbytes(), cudaMemcpyHostToDevice));
          OutputView v = output_view(host);
          v.data = d;
          for (CudaNmsPath path : {CudaNmsPath::kAuto, CudaNmsPath::kKeptBoxes}) {
            PostprocessWorkspace ws(batch, v.rows, v.num_classes(), o, 0, CudaNmsConfig{path});
            const Timing ts = time_it(runs, s, [&] { postprocess_cuda(v, geo, o, ws, s); });
            BENCH_CUDA(cudaStreamSynchronize(s));
            const size_t dets = ws.results()[0].size();
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            postprocess_cuda(v, geo, o, ws, s);
            BENCH_CUDA(cudaStreamEndCapture(s, &graph));
            BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
            const Timing tg = time_it(runs, s, [&] { BENCH_CUDA(cudaGraphLaunch(exec, s)); });
            const char* dn = dt == DType::kFloat16 ? "fp16" : "fp32";
            const char* sn = val ? "val" : "detect";
            for (int g = 0; g < 2; ++g) {
              const Timing& t = g ? tg : ts;
              std::printf(
                  "| decode+nms+project | %s | %s | %d | yolocu %s%s | %.1f | %.2f | %.1f-%.1f "
                  "| %zu | %zu |\n",
                  sn, dn, batch, g ? "graph" : "stream",
                  path == CudaNmsPath::kAuto ? "" : " (kept-box path only)", t.median_us,
                  t.median_us / batch, t.p10_us, t.p90_us, dets, ws.device_bytes());
            }
            BENCH_CUDA(cudaGraphExecDestroy(exec));
            BENCH_CUDA(cudaGraphDestroy(graph));
          }
          BENCH_CUDA(cudaFree(d));
        }
      }
    }
    BENCH_CUDA(cudaStreamDestroy(s));
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_postprocess: %s\n", e.what());
    return 1;
  }
  return 0;
}

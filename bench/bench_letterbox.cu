// GPU letterbox benchmark: 810x1080 (bus.jpg size) -> 640x640, batch 1 and 32, exact and fast
// modes, float32 and float16 outputs. Warm-up, then the median of many launches timed with CUDA
// events; bytes moved = source bytes read + output bytes written; a device-to-device cudaMemcpy
// of the same number of bytes is the copy-bandwidth reference.
//
//   bench_letterbox [runs]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "bench_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/letterbox_cuda.hpp"

namespace {

float median_ms(int runs, cudaStream_t s, const std::function<void()>& fn) {
  return yolocu::bench::time_events(runs, 10, s, fn).median_ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  const int src_w = 810, src_h = 1080, dst = 640, max_batch = 32;
  try {
    cudaStream_t s;
    BENCH_CUDA(cudaStreamCreate(&s));
    const size_t src_bytes = static_cast<size_t>(src_w) * 3 * src_h;
    uint8_t* d_src = nullptr;
    BENCH_CUDA(cudaMalloc(&d_src, src_bytes * max_batch));
    std::vector<uint8_t> h(src_bytes * max_batch);
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
    BENCH_CUDA(cudaMemcpy(d_src, h.data(), h.size(), cudaMemcpyHostToDevice));
    std::vector<yolocu::LetterboxCudaDesc> descs;
    for (int b = 0; b < max_batch; ++b) {
      descs.push_back(yolocu::make_letterbox_cuda_desc(
          {d_src + src_bytes * b, src_w, src_h, static_cast<size_t>(src_w) * 3}, dst, dst));
    }
    yolocu::LetterboxCudaDesc* d_descs = nullptr;
    BENCH_CUDA(cudaMalloc(&d_descs, sizeof(yolocu::LetterboxCudaDesc) * max_batch));
    BENCH_CUDA(cudaMemcpy(d_descs, descs.data(), sizeof(yolocu::LetterboxCudaDesc) * max_batch,
                          cudaMemcpyHostToDevice));
    void* d_out = nullptr;
    BENCH_CUDA(cudaMalloc(&d_out, static_cast<size_t>(max_batch) * 3 * dst * dst * 4));
    void* d_copy = nullptr;
    BENCH_CUDA(cudaMalloc(&d_copy, static_cast<size_t>(max_batch) * (src_bytes + 3 * dst * dst * 4)));

    cudaDeviceProp prop;
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("letterbox %dx%d -> %dx%d on %s, median of %d runs\n", src_w, src_h, dst, dst,
                prop.name, runs);
    std::printf("%-6s %-6s %-5s %10s %12s %9s %14s %9s\n", "batch", "mode", "out", "time us",
                "MB moved", "GB/s", "memcpy D2D us", "GB/s");
    for (int batch : {1, 32}) {
      for (auto mode : {yolocu::LetterboxMode::kExact, yolocu::LetterboxMode::kFast}) {
        for (auto dtype : {yolocu::DType::kFloat32, yolocu::DType::kFloat16}) {
          const size_t out_bytes = static_cast<size_t>(batch) * 3 * dst * dst * yolocu::dtype_size(dtype);
          const size_t moved = static_cast<size_t>(batch) * src_bytes + out_bytes;
          const float ms = median_ms(runs, s, [&] {
            yolocu::letterbox_to_input_cuda(d_descs, batch, dst, dst, dtype, mode, d_out, s);
          });
          // the same bytes through the copy engine path of the SMs: read moved/2, write moved/2
          const float copy_ms = median_ms(runs, s, [&] {
            BENCH_CUDA(cudaMemcpyAsync(d_copy, static_cast<uint8_t*>(d_copy) + moved / 2, moved / 2,
                                       cudaMemcpyDeviceToDevice, s));
          });
          std::printf("%-6d %-6s %-5s %10.1f %12.2f %9.1f %14.1f %9.1f\n", batch,
                      mode == yolocu::LetterboxMode::kExact ? "exact" : "fast",
                      yolocu::dtype_name(dtype), ms * 1e3, moved / 1e6, moved / (ms * 1e6),
                      copy_ms * 1e3, moved / (copy_ms * 1e6));
        }
      }
    }
    cudaFree(d_copy);
    cudaFree(d_out);
    cudaFree(d_descs);
    cudaFree(d_src);
    cudaStreamDestroy(s);
    return 0;
  } catch (const yolocu::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

// Video decoding throughput: FrameSource over one file, or several copies of it at once through
// StreamSet (one reader thread each). Decoding only, no detection. Prints frames/s as the median of
// --runs passes. --decoder cpu: libavcodec + swscale BGR24 (cv2.VideoCapture's conversion), host
// frames; cuda: NVDEC, NV12 frames left in device memory (the decode half of the GPU video path).
// With cuda, NVDEC utilisation sampled from NVML over all the passes is printed last (a line
// "NVDEC utilisation ...", or why there is none).
//
//   bench_video_decode FILE [--threads N] [--streams K] [--runs R] [--decoder cpu|cuda]
//     --threads N   libavcodec threads per decoder (0 = FFmpeg's choice; default 0; cpu only)
//     --streams K   K sources at once (StreamSet, batches of K); default 1 (FrameSource alone)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "nvml_sampler.hpp"
#include "yolocu/error.hpp"
#include "yolocu/video.hpp"
#include "yolocu/video_streams.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_video_decode FILE [--threads N] [--streams K] [--runs R] [--decoder cpu|cuda]\n");
    return 2;
  }
  const std::string file = argv[1];
  int threads = 0, streams = 1, runs = 3;
  std::string decoder = "cpu";
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--streams")) streams = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--decoder")) decoder = argv[i + 1];
  }
  try {
    yolocu::VideoSourceOptions o;
    o.backend = decoder == "cuda" ? yolocu::DecodeBackend::kCuda : yolocu::DecodeBackend::kCpu;
    o.decoder_threads = threads;
    const yolocu::SourceInfo info = yolocu::FrameSource::open(file, o)->info();
    std::vector<double> fps;
    int64_t frames = 0;
    std::unique_ptr<yolocu::cli::NvmlSampler> nvml;
    if (o.backend == yolocu::DecodeBackend::kCuda) nvml = std::make_unique<yolocu::cli::NvmlSampler>();
    for (int r = 0; r < runs; ++r) {
      frames = 0;
      const auto t0 = std::chrono::steady_clock::now();
      if (streams == 1) {
        auto src = yolocu::FrameSource::open(file, o);
        yolocu::VideoFrame f;
        while (src->read(f)) ++frames;
      } else {
        yolocu::StreamOptions so;
        so.source = o;
        yolocu::StreamSet set(std::vector<std::string>(static_cast<size_t>(streams), file), so);
        std::vector<yolocu::VideoFrame> batch;
        while (set.next_batch(batch, static_cast<size_t>(streams))) frames += static_cast<int64_t>(batch.size());
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fps.push_back(static_cast<double>(frames) / s);
    }
    if (nvml) nvml->stop();
    std::sort(fps.begin(), fps.end());
    std::printf("%s: %dx%d %s, %s, decoder threads %d, %d stream(s): %lld frames per pass, %.1f frames/s "
                "(median of %d; min %.1f, max %.1f)\n",
                file.c_str(), info.width, info.height, info.codec.c_str(), info.decoder.c_str(), threads, streams,
                static_cast<long long>(frames), fps[fps.size() / 2], runs, fps.front(), fps.back());
    if (nvml) std::printf("%s\n", nvml->summary().c_str());
  } catch (const yolocu::Error& e) {
    std::fprintf(stderr, "bench_video_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}

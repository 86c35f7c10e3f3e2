// Video decoding throughput: FrameSource over one file, or several copies of it at once through
// StreamSet (one reader thread each). Decoding only, no detection. Prints frames/s as the median of
// --runs passes (with several streams also the rate over the middle half of the frames, without
// the sources' start and end, and when each pass's sources gave their first and last frames; with
// one stream, how long after opening the first frame came).
// --opens K: the start alone: K sources opened at once (a thread each, as StreamSet opens them),
// each reading its first frame and closing; then 8 opened one after another; then K at once beside
// one source that keeps decoding. Prints when open() returned and when the first frame came
// (median / max), and the running source's rate and longest wait meanwhile: a per-source cost that
// adds up across K sources (serialised in the driver) shows as the at-once maximum near K times the
// one-at-a-time cost, and a running source held up while the others start.
// --decoder cpu: libavcodec + swscale BGR24 (cv2.VideoCapture's conversion), host frames; cuda:
// NVDEC, NV12 frames left in device memory (the decode half of the GPU video path).
// With cuda, NVDEC utilisation sampled from NVML over all the passes is printed last (a line
// "NVDEC utilisation ...", or why there is none).
//
//   bench_video_decode FILE [--threads N] [--streams K] [--runs R] [--decoder cpu|cuda] [--devices 0,1] [--opens K]
//     --threads N   libavcodec threads per decoder (0 = FFmpeg's choice; default 0; cpu only)
//     --streams K   K sources at once (StreamSet, batches of K); default 1 (FrameSource alone)
//     --devices L   NVDEC on the GPUs of the list: source i on GPU L[i mod n], one consumer thread
//                   per GPU taking its sources' frames (as `yolocu detect --device cuda:0,1` does)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nvml_sampler.hpp"
#include "stats.hpp"
#include "yolocu/error.hpp"
#include "yolocu/video.hpp"
#include "yolocu/video_streams.hpp"

namespace {

std::vector<int> parse_devices(const char* list) {
  std::vector<int> out;
  for (const char* p = list; *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v < 0) return {};
    out.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return {};
  }
  return out;
}

// When each source's first and last frames were taken, in seconds from the pass's start: where
// the whole-run rate loses to the middle half's (sources opening, streams ending unevenly).
struct SourceTimes {
  std::vector<double> first, last;
  std::string summary() const {
    if (first.empty()) return "";
    const yolocu::cli::Stats f = yolocu::cli::stats_of(first), l = yolocu::cli::stats_of(last);
    char line[256];
    std::snprintf(line, sizeof line,
                  "sources' first frames after %.2f s (median; first %.2f, last %.2f), last frames at %.2f s (median; "
                  "first %.2f, last %.2f)",
                  f.median, *std::min_element(first.begin(), first.end()), f.max, l.median,
                  *std::min_element(last.begin(), last.end()), l.max);
    return line;
  }
};

// K copies of the file through one StreamSet, a group (and a consumer thread) per GPU of `devices`;
// the frames taken. `middle` gets the frames so far after every batch (MiddleRate: the rate without
// the sources' start and end), `times` each source's first and last frame.
int64_t decode_streams(const std::string& file, const yolocu::VideoSourceOptions& o, int streams,
                       const std::vector<int>& devices, yolocu::cli::MiddleRate& middle, SourceTimes& times) {
  const auto t0 = std::chrono::steady_clock::now();
  times.first.assign(static_cast<size_t>(streams), -1.0);
  times.last.assign(static_cast<size_t>(streams), 0.0);
  yolocu::StreamOptions so;
  so.source = o;
  const int g = static_cast<int>(devices.size());
  if (g > 1) {
    so.group_cuda_devices = devices;
    for (int i = 0; i < streams; ++i) so.groups.push_back(i % g);
  }
  yolocu::StreamSet set(std::vector<std::string>(static_cast<size_t>(streams), file), so);
  int64_t frames = 0;
  std::mutex m;
  auto consume = [&](int group) {
    std::vector<yolocu::VideoFrame> batch;
    const size_t n = static_cast<size_t>((streams + g - 1) / g);
    while (set.next_batch(batch, n, group)) {
      std::lock_guard<std::mutex> lock(m);
      frames += static_cast<int64_t>(batch.size());
      middle.mark(frames);
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (const yolocu::VideoFrame& f : batch) {
        const auto i = static_cast<size_t>(f.stream_id);
        if (i >= times.first.size()) continue;
        if (times.first[i] < 0) times.first[i] = now;
        times.last[i] = now;
      }
    }
  };
  std::vector<std::thread> consumers;
  for (int k = 1; k < g; ++k) consumers.emplace_back(consume, k);
  consume(0);
  for (std::thread& t : consumers) t.join();
  return frames;
}

// --opens: each source's open() and first-frame times (seconds from `t0`), K sources at once.
struct StartTimes {
  std::vector<double> opened, first;
  std::string summary() const {
    const yolocu::cli::Stats o = yolocu::cli::stats_of(opened), f = yolocu::cli::stats_of(first);
    char line[200];
    std::snprintf(line, sizeof line, "open() returned after %.1f ms (median; max %.1f), first frame after %.1f ms (median; max %.1f)",
                  1e3 * o.median, 1e3 * o.max, 1e3 * f.median, 1e3 * f.max);
    return line;
  }
};

StartTimes start_sources(const std::string& file, const yolocu::VideoSourceOptions& o, int k, bool at_once) {
  StartTimes t;
  t.opened.assign(static_cast<size_t>(k), 0.0);
  t.first.assign(static_cast<size_t>(k), 0.0);
  std::vector<std::string> errors(static_cast<size_t>(k));
  const auto t0 = std::chrono::steady_clock::now();
  auto one = [&](int i) {
    const auto s0 = at_once ? t0 : std::chrono::steady_clock::now();
    auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count(); };
    try {
      auto src = yolocu::FrameSource::open(file, o);
      t.opened[static_cast<size_t>(i)] = since();
      yolocu::VideoFrame f;
      if (src->read(f)) t.first[static_cast<size_t>(i)] = since();
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(i)] = e.what();
    }
  };
  if (at_once) {
    std::vector<std::thread> threads;
    for (int i = 0; i < k; ++i) threads.emplace_back(one, i);
    for (std::thread& th : threads) th.join();
  } else {
    for (int i = 0; i < k; ++i) one(i);
  }
  for (const std::string& e : errors)
    if (!e.empty()) throw std::runtime_error(e);
  return t;
}

// The start probe (--opens K): K at once, then 8 one at a time, with StreamSet's surfaces per source;
// then K at once again while one source decodes on (the file over and over): its frames and longest
// gap while the others start tell whether starting decoders holds up a running one.
void probe_start(const std::string& file, yolocu::VideoSourceOptions o, int k) {
  // StreamSet's surfaces per source (stream_set.cpp) at its default queue depth
  o.max_frames_held = static_cast<int>(std::min<size_t>(2 * yolocu::StreamOptions{}.queue_depth + 2, 16));
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto t0 = std::chrono::steady_clock::now();
  const StartTimes together = start_sources(file, o, k, true);
  std::printf("%d sources at once: %s; all closed after %.2f s\n", k, together.summary().c_str(), since(t0));
  const StartTimes alone = start_sources(file, o, 8, false);
  std::printf("8 sources one at a time: %s\n", alone.summary().c_str());

  std::atomic<bool> stop{false};
  std::atomic<int64_t> frames{0};
  std::mutex m;
  double gap = 0;  // the running source's longest wait for a frame while the others start (m)
  bool measuring = false;
  std::string failed;
  std::thread running([&] {
    auto last = std::chrono::steady_clock::now();
    while (!stop.load()) try {
      auto src = yolocu::FrameSource::open(file, o);
      last = std::chrono::steady_clock::now();  // its own reopening (at the file's end) is no wait for a frame
      yolocu::VideoFrame f;
      while (!stop.load() && src->read(f)) {
        f = yolocu::VideoFrame();
        const auto now = std::chrono::steady_clock::now();
        ++frames;
        std::lock_guard<std::mutex> lock(m);
        if (measuring) gap = std::max(gap, std::chrono::duration<double>(now - last).count());
        last = now;
      }
    } catch (const std::exception& e) {
      failed = e.what();
      return;
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));  // running at its own pace first
  const int64_t warm = frames.load();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double alone_rate = static_cast<double>(frames.load() - warm) / 2;
  const int64_t before = frames.load();
  { std::lock_guard<std::mutex> lock(m); measuring = true; }
  t0 = std::chrono::steady_clock::now();
  const StartTimes busy = start_sources(file, o, k, true);
  const double took = since(t0);
  const int64_t after = frames.load();
  { std::lock_guard<std::mutex> lock(m); measuring = false; }
  stop = true;
  running.join();
  if (!failed.empty()) throw std::runtime_error(failed);
  std::printf("%d sources at once beside a running one: %s; meanwhile the running source decoded %.1f frames/s "
              "(%.1f alone), its longest wait for a frame %.1f ms\n",
              k, busy.summary().c_str(), static_cast<double>(after - before) / took, alone_rate, 1e3 * gap);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_video_decode FILE [--threads N] [--streams K] [--runs R] [--decoder cpu|cuda] [--devices 0,1] [--opens K]\n");
    return 2;
  }
  const std::string file = argv[1];
  int threads = 0, streams = 1, runs = 3, opens = 0;
  std::string decoder = "cpu";
  std::vector<int> devices;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--streams")) streams = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--opens")) opens = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--decoder")) decoder = argv[i + 1];
    else if (!std::strcmp(argv[i], "--devices")) {
      devices = parse_devices(argv[i + 1]);
      if (devices.empty()) {
        std::fprintf(stderr, "bench_video_decode: --devices wants GPU indices such as 0,1, got '%s'\n", argv[i + 1]);
        return 2;
      }
    }
    else {
      std::fprintf(stderr, "bench_video_decode: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (devices.empty()) devices.push_back(0);
  if (devices.size() > 1 && (decoder != "cuda" || streams < 2)) {
    std::fprintf(stderr, "bench_video_decode: --devices with several GPUs needs --decoder cuda and --streams >= 2\n");
    return 2;
  }
  try {
    yolocu::VideoSourceOptions o;
    o.backend = decoder == "cuda" ? yolocu::DecodeBackend::kCuda : yolocu::DecodeBackend::kCpu;
    o.decoder_threads = threads;
    o.cuda_device = devices[0];
    const yolocu::SourceInfo info = yolocu::FrameSource::open(file, o)->info();
    if (opens > 0) {
      probe_start(file, o, opens);
      return 0;
    }
    std::vector<double> fps, middle_fps;
    int64_t frames = 0;
    std::unique_ptr<yolocu::cli::NvmlSampler> nvml;
    if (o.backend == yolocu::DecodeBackend::kCuda) nvml = std::make_unique<yolocu::cli::NvmlSampler>();
    for (int r = 0; r < runs; ++r) {
      frames = 0;
      const auto t0 = std::chrono::steady_clock::now();
      if (streams == 1) {  // the source's start alone: opened, decoder made, first picture out
        auto src = yolocu::FrameSource::open(file, o);
        yolocu::VideoFrame f;
        while (src->read(f)) {
          if (++frames == 1)
            std::printf("pass %d: the first frame %.1f ms after opening\n", r + 1,
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
      } else {
        yolocu::cli::MiddleRate middle;
        SourceTimes times;
        frames = decode_streams(file, o, streams, devices, middle, times);
        middle_fps.push_back(middle.frames_per_s());
        std::printf("pass %d: %s\n", r + 1, times.summary().c_str());
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fps.push_back(static_cast<double>(frames) / s);
    }
    std::sort(middle_fps.begin(), middle_fps.end());
    if (nvml) nvml->stop();
    std::sort(fps.begin(), fps.end());
    const std::string gpus =
        o.backend == yolocu::DecodeBackend::kCuda ? " on " + std::to_string(devices.size()) + " GPU(s)" : "";
    std::printf("%s: %dx%d %s, %s, decoder threads %d, %d stream(s)%s: %lld frames per pass, %.1f frames/s "
                "(median of %d; min %.1f, max %.1f)\n",
                file.c_str(), info.width, info.height, info.codec.c_str(), info.decoder.c_str(), threads, streams, gpus.c_str(),
                static_cast<long long>(frames), fps[fps.size() / 2], runs, fps.front(), fps.back());
    if (!middle_fps.empty())  // (not "frames/s": scripts read a log's last "<number> frames/s" as the whole run's)
      std::printf("%.1f over the middle half of the frames (every source running; median of %d)\n",
                  middle_fps[middle_fps.size() / 2], runs);
    if (nvml) std::printf("%s\n", nvml->summary().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_video_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}

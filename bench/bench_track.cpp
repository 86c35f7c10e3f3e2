// The cost of tracking many streams next to detection (issue #34): STREAMS streams of one clip
// (stream s starts s frames in, so the streams differ), each frame batch detected with one
// Detector call, each stream's detections through its own ByteTrack Tracker and a counting line,
// as yolocu track runs them. Decoding is done before timing (both paths decode the same). Prints
// the detection time, the tracking time (trackers + counters), frames/s with and without tracking
// and the overhead in percent, as a Markdown table row.
//   bench_track MODEL CLIP [--streams 32] [--frames 8] [--device cpu|cuda] [--tracker bytetrack.yaml]
//                         [--batch B] [--threads T] [--warmup 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/track.hpp"
#include "yolocu/track_count.hpp"
#include "yolocu/video.hpp"

using namespace yolocu;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Options {
  int streams = 32, frames = 8, batch = 0, threads = 0, warmup = 1;
  std::string device = "cpu", tracker = "bytetrack.yaml";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--streams") o.streams = std::max(std::atoi(v.c_str()), 1);
    else if (k == "--frames") o.frames = std::max(std::atoi(v.c_str()), 1);
    else if (k == "--batch") o.batch = std::max(std::atoi(v.c_str()), 1);
    else if (k == "--threads") o.threads = std::atoi(v.c_str());
    else if (k == "--warmup") o.warmup = std::max(std::atoi(v.c_str()), 0);
    else if (k == "--device") o.device = v;
    else if (k == "--tracker") o.tracker = v;
    else throw Error(ErrorCode::kInvalidArgument, "unknown option " + k);
  }
  if (o.batch == 0) o.batch = std::min(o.streams, 32);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_track MODEL CLIP [--streams 32] [--frames 8] [--device cpu|cuda] "
                         "[--tracker bytetrack.yaml] [--batch B] [--threads T] [--warmup 1]\n");
    return 2;
  }
  try {
    const Options o = parse(argc, argv);
    std::vector<Image> clip;
    auto src = FrameSource::open(argv[2]);
    while (clip.size() < 1000) {
      VideoFrame f;  // a fresh frame each time: the decoder reuses a frame's buffer
      if (!src->read(f)) break;
      clip.push_back(std::move(f.image));
    }
    if (clip.empty()) throw Error(ErrorCode::kInvalidArgument, std::string(argv[2]) + ": no frames");
    DetectorOptions dopt;
    dopt.device = o.device == "cuda" ? Device::kCuda : Device::kCpu;
    dopt.cpu_threads = o.threads;
    dopt.max_batch = o.batch;
    dopt.postprocess = detect_options();
    auto det = Detector::create(argv[1], dopt);
    const TrackerConfig cfg = load_tracker_config(o.tracker);
    const int w = clip[0].width(), h = clip[0].height();
    std::vector<Tracker> trackers;
    std::vector<TrackCounter> counters;
    for (int s = 0; s < o.streams; ++s) {
      trackers.emplace_back(cfg);
      counters.emplace_back(std::vector<CountRegion>{{{{0, h / 2.0}, {static_cast<double>(w), h / 2.0}}}});
    }
    double detect_ms = 0, track_ms = 0;
    size_t frames = 0, objects = 0, tracked = 0;
    for (int f = -o.warmup; f < o.frames; ++f) {
      std::vector<ImageView> views;
      for (int s = 0; s < o.streams; ++s)
        views.push_back(clip[static_cast<size_t>(std::max(f, 0) + s) % clip.size()].view());
      const auto t0 = Clock::now();
      const std::vector<Detections> dets = det->detect(views);
      const double d_ms = ms_since(t0);
      const auto t1 = Clock::now();
      size_t n_obj = 0, n_trk = 0;
      for (int s = 0; s < o.streams; ++s) {
        std::vector<TrackInput> in;
        for (const Detection& d : dets[static_cast<size_t>(s)])
          in.push_back({d.x1, d.y1, d.x2, d.y2, d.confidence, static_cast<float>(d.class_id)});
        const std::vector<TrackOutput> out = trackers[static_cast<size_t>(s)].update(in);
        counters[static_cast<size_t>(s)].update(out);
        n_obj += in.size();
        n_trk += out.size();
      }
      const double t_ms = ms_since(t1);
      if (f < 0) continue;  // warm-up
      detect_ms += d_ms, track_ms += t_ms;
      frames += static_cast<size_t>(o.streams), objects += n_obj, tracked += n_trk;
    }
    const double fps_detect = 1000.0 * static_cast<double>(frames) / detect_ms;
    const double fps_both = 1000.0 * static_cast<double>(frames) / (detect_ms + track_ms);
    std::printf("| streams | frames | objects/frame | detect ms/frame | track ms/frame | detect frames/s | detect+track frames/s | overhead |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::printf("| %d | %zu | %.1f | %.3f | %.4f | %.1f | %.1f | %.3f%% |\n", o.streams, frames,
                static_cast<double>(objects) / static_cast<double>(frames), detect_ms / static_cast<double>(frames),
                track_ms / static_cast<double>(frames), fps_detect, fps_both, 100.0 * track_ms / detect_ms);
    std::printf("device %s, %s, %s %dx%d, batch %d, %zu tracked objects; tracking: %.1f us per stream-frame\n",
                device_name(det->device()), o.tracker.c_str(), argv[2], w, h, o.batch, tracked,
                1000.0 * track_ms / static_cast<double>(frames));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_track: %s\n", e.what());
    return 1;
  }
}

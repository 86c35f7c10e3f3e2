// The trackers alone (issue #34): STREAMS ByteTrack (or BoT-SORT) trackers, each with a counting
// line, fed OBJECTS synthetic detections per frame that move with a steady drift and Gaussian
// jitter (seeded), as yolocu track feeds them after each batch. Prints the time per stream-frame
// of Tracker::update and of TrackCounter::update, the median over ROUNDS rounds.
//   bench_tracker [--streams 32] [--objects 3] [--frames 400] [--rounds 7] [--tracker bytetrack.yaml]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "yolocu/error.hpp"
#include "yolocu/track.hpp"
#include "yolocu/track_count.hpp"

using namespace yolocu;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int streams = 32, objects = 3, frames = 400, rounds = 7;
  std::string tracker = "bytetrack.yaml";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--streams") o.streams = std::max(std::atoi(v.c_str()), 1);
    else if (k == "--objects") o.objects = std::max(std::atoi(v.c_str()), 0);
    else if (k == "--frames") o.frames = std::max(std::atoi(v.c_str()), 1);
    else if (k == "--rounds") o.rounds = std::max(std::atoi(v.c_str()), 1);
    else if (k == "--tracker") o.tracker = v;
    else throw Error(ErrorCode::kInvalidArgument, "unknown option " + k + " (see the header of bench/bench_tracker.cpp)");
  }
  if ((argc - 1) % 2) throw Error(ErrorCode::kInvalidArgument, std::string("option ") + argv[argc - 1] + " has no value");
  return o;
}

// One round: fresh trackers, every stream's frames in turn; returns {tracker us, counter us} per
// stream-frame.
std::pair<double, double> round(const Options& o, const TrackerConfig& cfg) {
  std::vector<Tracker> trackers;
  std::vector<TrackCounter> counters;
  for (int s = 0; s < o.streams; ++s) {
    trackers.emplace_back(cfg);
    counters.emplace_back(std::vector<CountRegion>{{{{0, 540.0}, {1920.0, 540.0}}}});
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> jitter(0.f, 1.5f);
  double track_us = 0, count_us = 0;
  std::vector<TrackInput> in;
  for (int f = 0; f < o.frames; ++f)
    for (int s = 0; s < o.streams; ++s) {
      in.clear();
      for (int i = 0; i < o.objects; ++i) {
        const float x = 100.f + 300.f * static_cast<float>(i % 6) + 7.f * static_cast<float>(s) + 2.f * static_cast<float>(f);
        const float y = 100.f + 140.f * static_cast<float>(i / 6) + 1.2f * static_cast<float>(f);
        const float dx = jitter(rng), dy = jitter(rng);
        in.push_back({x + dx, y + dy, x + dx + 80.f, y + dy + 160.f, 0.8f, static_cast<float>(i % 3)});
      }
      const auto t0 = Clock::now();
      const std::vector<TrackOutput> out = trackers[static_cast<size_t>(s)].update(in);
      const auto t1 = Clock::now();
      counters[static_cast<size_t>(s)].update(out);
      const auto t2 = Clock::now();
      track_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
      count_us += std::chrono::duration<double, std::micro>(t2 - t1).count();
    }
  const double n = static_cast<double>(o.streams) * o.frames;
  return {track_us / n, count_us / n};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const TrackerConfig cfg = load_tracker_config(o.tracker);
    round(o, cfg);  // warm-up
    std::vector<double> tr, co;
    for (int r = 0; r < o.rounds; ++r) {
      const auto [t, c] = round(o, cfg);
      tr.push_back(t);
      co.push_back(c);
    }
    std::printf("%s, %d streams x %d frames, %d objects a frame, median of %d rounds: Tracker::update %.2f us, "
                "TrackCounter::update %.2f us per stream-frame (fastest round %.2f us)\n",
                o.tracker.c_str(), o.streams, o.frames, o.objects, o.rounds, median(tr), median(co),
                *std::min_element(tr.begin(), tr.end()));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_tracker: %s\n", e.what());
    return 1;
  }
}

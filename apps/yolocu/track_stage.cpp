// yolocu track's per-stream tracking, counting, drawing and MOT files (track_stage.hpp).
#include "track_stage.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "json_out.hpp"
#include "yolocu/annotate.hpp"
#include "yolocu/atomic_file.hpp"
#include "yolocu/error.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;

struct TrackStage::Stream {
  Tracker tracker;
  TrackCounter counter;
  std::unique_ptr<CameraMotion> motion;
  std::vector<int64_t> ids;                                    // of the objects of the latest frame
  std::map<int64_t, std::deque<std::pair<float, float>>> trails;  // box centres, oldest first
  std::map<int64_t, int64_t> trail_seen;                       // step a trail last grew
  int64_t step = 0;
  std::unique_ptr<AtomicFile> mot;  // --save-txt: renamed over <stem>.txt by finish(), else removed

  Stream(const TrackerConfig& c, const std::vector<CountRegion>& regions) : tracker(c), counter(regions) {}
};

TrackStage::TrackStage(TrackStageOptions options) : o_(std::move(options)), tracker_config_(o_.tracker) {
  gmc_ = o_.tracker.type == TrackerType::kBotSort && o_.tracker.gmc_method != GmcMethod::kNone;
  if (gmc_ && !o_.warps_given) make_camera_motion(o_.tracker.gmc_method);  // refuses now what this build cannot estimate
  tracker_config_.gmc_method = GmcMethod::kNone;
  Tracker check(tracker_config_);                        // and the rest of the config
  TrackCounter check_regions(o_.regions);
}

void TrackStage::begin(const std::vector<std::string>& class_names, const std::vector<std::string>& stems) {
  names_ = &class_names;
  stems_ = stems;
}

void TrackStage::name_stream(int stream, const std::string& stem) {
  if (stream < 0 || streams_.count(stream)) return;
  if (stems_.size() <= static_cast<size_t>(stream)) stems_.resize(static_cast<size_t>(stream) + 1);
  stems_[static_cast<size_t>(stream)] = stem;
}

// Not finished (an error): each stream's AtomicFile removes its partial file, a previous good one stays.
TrackStage::~TrackStage() = default;

TrackStage::Stream& TrackStage::stream(int id) {
  auto& s = streams_[id];
  if (s) return *s;
  s = std::make_unique<Stream>(tracker_config_, o_.regions);
  if (gmc_ && !o_.warps_given) s->motion = make_camera_motion(o_.tracker.gmc_method);
  if (!o_.mot_dir.empty()) {
    const std::string stem =
        static_cast<size_t>(id) < stems_.size() && !stems_[static_cast<size_t>(id)].empty() ? stems_[static_cast<size_t>(id)] : "stream" + std::to_string(id);
    s->mot = std::make_unique<AtomicFile>((fs::path(o_.mot_dir) / (stem + ".txt")).string());
  }
  return *s;
}

void TrackStage::write_mot(Stream& s, int64_t frame_number, const std::vector<TrackOutput>& tracks) {
  if (!s.mot) return;
  for (const TrackOutput& t : tracks) {
    char line[200];
    const int n = std::snprintf(line, sizeof line, "%" PRId64 ",%" PRId64 ",%.3f,%.3f,%.3f,%.3f,%.5f,-1,-1,-1\n",
                                frame_number, t.track_id, static_cast<double>(t.x1), static_cast<double>(t.y1),
                                static_cast<double>(t.x2 - t.x1), static_cast<double>(t.y2 - t.y1),
                                static_cast<double>(t.score));
    s.mot->write(line, static_cast<size_t>(std::min(std::max(n, 0), static_cast<int>(sizeof line) - 1)));
  }
}

void TrackStage::process(VideoFrame& frame, Detections& dets, FrameJson& json) {
  Warp2x3 warp{};
  if (gmc_) {
    if (frame.location == MemoryLocation::kDevice && frame.image.empty()) frame.image = frame_to_host_bgr(frame);
    warp = stream(frame.stream_id).motion->apply(frame.location == MemoryLocation::kDevice ? frame.image.view() : frame.view());
  }
  track(frame.stream_id, frame.index + 1, dets, json, gmc_ ? &warp : nullptr);
}

void TrackStage::track(int stream_id, int64_t frame_number, Detections& dets, FrameJson& json, const Warp2x3* warp) {
  Stream& s = stream(stream_id);
  std::vector<TrackInput> in;
  in.reserve(dets.size());
  for (const Detection& d : dets) in.push_back({d.x1, d.y1, d.x2, d.y2, d.confidence, static_cast<float>(d.class_id)});
  const std::vector<TrackOutput> tracks = s.tracker.update(in, warp);
  write_mot(s, frame_number, tracks);
  const int64_t step = ++s.step;
  Detections out;
  s.ids.clear();
  json.object_members.clear();
  for (const TrackOutput& t : tracks) {
    out.push_back({t.x1, t.y1, t.x2, t.y2, t.score, static_cast<int>(t.cls)});
    s.ids.push_back(t.track_id);
    json.object_members.push_back(", \"track_id\": " + std::to_string(t.track_id) + ", \"index\": " + std::to_string(t.idx));
    if (o_.trail_frames > 0) {
      auto& trail = s.trails[t.track_id];
      trail.emplace_back((t.x1 + t.x2) / 2, (t.y1 + t.y2) / 2);
      while (trail.size() > static_cast<size_t>(o_.trail_frames)) trail.pop_front();
      s.trail_seen[t.track_id] = step;
    }
  }
  for (auto it = s.trail_seen.begin(); it != s.trail_seen.end();) {  // trails of tracks gone a while
    if (step - it->second <= o_.trail_frames) {
      ++it;
      continue;
    }
    s.trails.erase(it->first);
    it = s.trail_seen.erase(it);
  }
  dets = std::move(out);
  if (!o_.regions.empty()) json.line_members = counts_json(s, s.counter.update(tracks));
}

std::string TrackStage::counts_json(const Stream& s, const std::vector<CountEvent>& events) const {
  auto per_class = [&](const std::map<int, int64_t>& m) {
    std::string j = "{";
    for (const auto& [cls, n] : m) j += (j.size() > 1 ? ", " : "") + json_string(class_name(*names_, cls)) + ": " + std::to_string(n);
    return j + "}";
  };
  std::string j = ", \"counts\": [";
  for (size_t r = 0; r < o_.regions.size(); ++r) {
    const RegionCounts& c = s.counter.counts()[r];
    const bool line = o_.regions[r].is_line();
    j += (r ? ", " : "") + std::string("{\"region\": ") + std::to_string(r) + ", \"type\": " + (line ? "\"line\"" : "\"zone\"") +
         ", \"in\": " + per_class(c.in) + ", \"out\": " + per_class(c.out);
    if (!line) j += ", \"inside\": " + per_class(c.inside);
    j += "}";
  }
  j += "], \"crossings\": [";
  for (size_t i = 0; i < events.size(); ++i) {
    const CountEvent& e = events[i];
    j += (i ? ", " : "") + std::string("{\"region\": ") + std::to_string(e.region) + ", \"track_id\": " +
         std::to_string(e.track_id) + ", \"class_id\": " + std::to_string(e.class_id) + ", \"class_name\": " +
         json_string(class_name(*names_, e.class_id)) + ", \"direction\": " + (e.in ? "\"in\"" : "\"out\"") + "}";
  }
  return j + "]";
}

void TrackStage::draw(Image& image, int stream_id, const Detections& dets) {
  Stream& s = stream(stream_id);
  for (const auto& [id, trail] : s.trails)
    draw_polyline(image, std::vector<std::pair<float, float>>(trail.begin(), trail.end()), false,
                  static_cast<int>(id % 100000));
  draw_tracked(image, dets, s.ids, *names_);
  const int lh = label_height(image);
  for (size_t r = 0; r < o_.regions.size(); ++r) {
    const CountRegion& region = o_.regions[r];
    std::vector<std::pair<float, float>> pts;
    for (const CountPoint& p : region.points) pts.emplace_back(static_cast<float>(p.x), static_cast<float>(p.y));
    const int colour = 1000 + static_cast<int>(r);
    draw_polyline(image, pts, !region.is_line(), colour);
    const RegionCounts& c = s.counter.counts()[r];
    auto total = [](const std::map<int, int64_t>& m) {
      int64_t n = 0;
      for (const auto& kv : m) n += kv.second;
      return n;
    };
    std::string head = (region.is_line() ? "line " : "zone ") + std::to_string(r) + " in " + std::to_string(total(c.in)) +
                       " out " + std::to_string(total(c.out));
    if (!region.is_line()) head += " inside " + std::to_string(total(c.inside));
    int x = static_cast<int>(pts[0].first), y = static_cast<int>(pts[0].second);
    draw_label(image, x, y, head, colour);
    std::map<int, std::pair<int64_t, int64_t>> by_class;
    for (const auto& [cls, n] : c.in) by_class[cls].first = n;
    for (const auto& [cls, n] : c.out) by_class[cls].second = n;
    for (const auto& [cls, io] : by_class)
      draw_label(image, x, y += lh, class_name(*names_, cls) + " in " + std::to_string(io.first) + " out " + std::to_string(io.second),
                 colour);
  }
}

void TrackStage::finish() {
  for (auto& [id, s] : streams_) {
    if (!s->mot) continue;
    s->mot->commit();
    s->mot.reset();
  }
}

}  // namespace yolocu::cli

// tracker.cpp - ByteTrack / BoT-SORT association, one frame at a time (see yolocu/track.hpp).
//
// The order of every step and list follows ultralytics' BYTETracker.update, since list order
// decides ties and output order: predict the pool (tracked + lost), [BoT-SORT: warp], first
// association of the pool with the high detections, second association of the still-tracked
// rest with the low detections (plain IoU, limit 0.5), unconfirmed tracks with the leftover high
// detections (limit 0.7), new tracks, stale lost tracks removed, then the pools merged.
#include <cmath>
#include <string>

#include "track/lapjv.hpp"
#include "track/strack.hpp"
#include "yolocu/error.hpp"
#include "yolocu/track.hpp"

namespace yolocu {

using track::BoxLayout;
using track::TrackList;
using track::TrackPtr;
using track::TrackState;

namespace {

constexpr size_t kRemovedBuffer = 1000;  // removed ids remembered, as ultralytics
constexpr float kMaxCoordinate = 1e6f;    // box coordinates beyond this are refused (areas stay finite)

struct FrameLists {
  TrackList activated, refind, lost, removed;
};

}  // namespace

struct Tracker::Impl {
  TrackerConfig cfg;
  track::KalmanFilter kf;
  int frame_id = 0;
  int64_t next_id = 1;
  TrackList tracked, lost;
  std::vector<int64_t> removed_ids;

  explicit Impl(const TrackerConfig& c)
      : cfg(c), kf(c.type == TrackerType::kBotSort ? BoxLayout::kXywh : BoxLayout::kXyah) {}
  BoxLayout layout() const { return kf.layout(); }

  std::vector<float> dists(const TrackList& tracks, const TrackList& dets) const {
    std::vector<float> d = track::iou_distance(tracks, dets, layout());
    if (cfg.fuse_score) track::fuse_score(d, dets);
    return d;
  }

  static track::Assignment assign(const std::vector<float>& cost, size_t rows, size_t cols, double limit) {
    return track::linear_assignment(std::vector<double>(cost.begin(), cost.end()), static_cast<int>(rows),
                                    static_cast<int>(cols), limit);
  }

  void update_track(track::STrack& t, const track::STrack& det, bool reactivate) {
    kf.update(t.kalman, track::measurement(det.det_tlwh, layout()));
    t.tracklet_len = reactivate ? 0 : t.tracklet_len + 1;
    t.state = TrackState::kTracked;
    t.is_activated = true;
    t.frame_id = frame_id;
    t.score = det.score;
    t.cls = det.cls;
    t.idx = det.idx;
  }

  void activate(track::STrack& t) {
    t.track_id = next_id++;
    t.kalman = kf.initiate(track::measurement(t.det_tlwh, layout()));
    t.has_state = true;
    t.tracklet_len = 0;
    t.state = TrackState::kTracked;
    if (frame_id == 1) t.is_activated = true;
    t.frame_id = t.start_frame = frame_id;
  }

  void apply_matches(const track::Assignment& a, const TrackList& pool, const TrackList& dets, FrameLists& f) {
    for (const auto& [it, id] : a.matches) {
      const TrackPtr& t = pool[it];
      const bool was_tracked = t->state == TrackState::kTracked;
      update_track(*t, *dets[id], !was_tracked);
      (was_tracked ? f.activated : f.refind).push_back(t);
    }
  }

  void predict(const TrackList& pool) {
    for (const auto& t : pool) {
      if (t->state != TrackState::kTracked) {
        t->kalman.mean[7] = 0;
        if (layout() == BoxLayout::kXywh) t->kalman.mean[6] = 0;
      }
      kf.predict(t->kalman);
    }
  }

  // Scores against the thresholds in float, as ultralytics compares its float32 score array.
  void split_detections(const std::vector<TrackInput>& in, TrackList& high, TrackList& low) const {
    const float high_thresh = static_cast<float>(cfg.track_high_thresh), low_thresh = static_cast<float>(cfg.track_low_thresh);
    high.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const TrackInput& d = in[i];
      const float w = d.x2 - d.x1, h = d.y2 - d.y1;
      // the Kalman state divides by the height (ultralytics drops w or h <= 0 likewise); a box so thin
      // that w/h overflows float would give an infinite state: dropped as well
      if (!(w > 0) || !(h > 0) || !std::isfinite(w / h) || !std::isfinite(h / w)) continue;
      if (d.conf >= high_thresh) high.push_back(track::make_detection(d, static_cast<int>(i)));
      else if (d.conf > low_thresh) low.push_back(track::make_detection(d, static_cast<int>(i)));
    }
  }

  // Second stage: tracks still in the Tracked state against the low-score detections.
  void second_association(const TrackList& pool, const std::vector<int>& u_track, const TrackList& low, FrameLists& f) {
    TrackList rest;
    rest.reserve(u_track.size());
    for (int i : u_track)
      if (pool[i]->state == TrackState::kTracked) rest.push_back(pool[i]);
    std::vector<int> unmatched;
    if (!rest.empty() && !low.empty()) {
      const auto a = assign(track::iou_distance(rest, low, layout()), rest.size(), low.size(), 0.5);
      apply_matches(a, rest, low, f);
      unmatched = a.unmatched_rows;
    } else {
      for (size_t i = 0; i < rest.size(); ++i) unmatched.push_back(static_cast<int>(i));
    }
    for (int i : unmatched) {
      rest[i]->state = TrackState::kLost;
      f.lost.push_back(rest[i]);
    }
  }

  // Unconfirmed tracks (started last frame) against the high detections left; returns those left.
  TrackList unconfirmed_association(const TrackList& unconfirmed, const TrackList& left, FrameLists& f) {
    if (unconfirmed.empty()) return left;
    const auto a = assign(dists(unconfirmed, left), unconfirmed.size(), left.size(), 0.7);
    for (const auto& [it, id] : a.matches) {
      update_track(*unconfirmed[it], *left[id], false);
      f.activated.push_back(unconfirmed[it]);
    }
    for (int it : a.unmatched_rows) {
      unconfirmed[it]->state = TrackState::kRemoved;
      f.removed.push_back(unconfirmed[it]);
    }
    TrackList out;
    for (int id : a.unmatched_cols) out.push_back(left[id]);
    return out;
  }

  void merge(FrameLists& f) {
    TrackList still;
    still.reserve(tracked.size());
    for (const auto& t : tracked)
      if (t->state == TrackState::kTracked) still.push_back(t);
    tracked = track::joint_tracks(track::joint_tracks(still, f.activated), f.refind);
    std::vector<int64_t> tracked_ids;
    tracked_ids.reserve(tracked.size());
    for (const auto& t : tracked) tracked_ids.push_back(t->track_id);
    lost = track::sub_tracks(lost, tracked_ids);
    lost.insert(lost.end(), f.lost.begin(), f.lost.end());
    lost = track::sub_tracks(lost, removed_ids);
    track::remove_duplicate_tracks(tracked, lost, layout());
    for (const auto& t : f.removed) removed_ids.push_back(t->track_id);
    if (removed_ids.size() > kRemovedBuffer)
      removed_ids.erase(removed_ids.begin(), removed_ids.end() - kRemovedBuffer);
  }

  // Refuses input that would poison the Kalman states, before anything changes.
  static void validate(const std::vector<TrackInput>& in, const Warp2x3* warp) {
    for (size_t i = 0; i < in.size(); ++i) {
      const TrackInput& d = in[i];
      for (float v : {d.x1, d.y1, d.x2, d.y2})
        if (!(std::fabs(v) <= kMaxCoordinate))
          throw Error(ErrorCode::kInvalidArgument, "Tracker::update: detection " + std::to_string(i) +
                                                       " has a coordinate that is not finite or beyond 1e6 px");
      if (!std::isfinite(d.conf) || !std::isfinite(d.cls))
        throw Error(ErrorCode::kInvalidArgument, "Tracker::update: detection " + std::to_string(i) + " has a non-finite conf or cls");
    }
    if (warp)
      for (double v : *warp)
        if (!(std::fabs(v) <= kMaxCoordinate)) throw Error(ErrorCode::kInvalidArgument, "Tracker::update: the warp is not finite");
  }

  std::vector<TrackOutput> step(const std::vector<TrackInput>& in, const Warp2x3* warp) {
    validate(in, warp);
    ++frame_id;
    FrameLists f;
    TrackList high, low;
    split_detections(in, high, low);
    TrackList unconfirmed, confirmed;
    confirmed.reserve(tracked.size());
    for (const auto& t : tracked) (t->is_activated ? confirmed : unconfirmed).push_back(t);
    const TrackList pool = track::joint_tracks(confirmed, lost);
    predict(pool);
    if (warp && cfg.type == TrackerType::kBotSort) {
      track::apply_warp(pool, *warp);
      track::apply_warp(unconfirmed, *warp);
    }
    const auto first = assign(dists(pool, high), pool.size(), high.size(), cfg.match_thresh);
    apply_matches(first, pool, high, f);
    second_association(pool, first.unmatched_rows, low, f);
    TrackList left;
    left.reserve(first.unmatched_cols.size());
    for (int id : first.unmatched_cols) left.push_back(high[id]);
    for (const auto& det : unconfirmed_association(unconfirmed, left, f)) {
      if (double(det->score) < cfg.new_track_thresh) continue;  // one float32 score: compared in double
      activate(*det);
      f.activated.push_back(det);
    }
    for (const auto& t : lost)
      if (frame_id - t->frame_id > cfg.track_buffer) {
        t->state = TrackState::kRemoved;
        f.removed.push_back(t);
      }
    merge(f);
    return output();
  }

  std::vector<TrackOutput> output() const {
    std::vector<TrackOutput> out;
    out.reserve(tracked.size());
    for (const auto& t : tracked) {
      if (!t->is_activated) continue;
      const auto b = track::xyxy(*t, layout());
      out.push_back({float(b[0]), float(b[1]), float(b[2]), float(b[3]), t->track_id, t->score, t->cls, t->idx});
    }
    return out;
  }
};

Tracker::Tracker(const TrackerConfig& config) {
  const auto bad = [](const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "Tracker: " + what); };
  if (!(config.track_low_thresh >= 0 && config.track_low_thresh <= config.track_high_thresh && config.track_high_thresh <= 1))
    bad("thresholds must satisfy 0 <= track_low_thresh <= track_high_thresh <= 1");
  if (!(config.new_track_thresh >= 0 && config.new_track_thresh <= 1)) bad("new_track_thresh must be in [0, 1]");
  if (!(config.match_thresh >= 0 && config.match_thresh <= 2)) bad("match_thresh must be in [0, 2]");
  if (config.track_buffer < 0) bad("track_buffer must be >= 0");
  if (config.type == TrackerType::kBotSort && config.with_reid)
    throw Error(ErrorCode::kUnsupported, "Tracker: BoT-SORT with ReID (with_reid: true) is not built; set with_reid: false");
  if (config.type == TrackerType::kBotSort && config.gmc_method != GmcMethod::kNone)
    throw Error(ErrorCode::kUnsupported,
                "Tracker: gmc_method other than none needs OpenCV, which libyolocu does not link; set gmc_method: none "
                "and pass the camera-motion warp to Tracker::update");
  impl_ = std::make_unique<Impl>(config);
}

Tracker::~Tracker() = default;
Tracker::Tracker(Tracker&&) noexcept = default;
Tracker& Tracker::operator=(Tracker&&) noexcept = default;

std::vector<TrackOutput> Tracker::update(const std::vector<TrackInput>& detections, const Warp2x3* warp) {
  return impl_->step(detections, warp);
}

void Tracker::reset() { impl_ = std::make_unique<Impl>(impl_->cfg); }
const TrackerConfig& Tracker::config() const { return impl_->cfg; }
int Tracker::frame_id() const { return impl_->frame_id; }

}  // namespace yolocu

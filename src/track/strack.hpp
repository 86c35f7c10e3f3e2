// strack.hpp - one track of a Tracker (ultralytics' STrack / BOTrack) and the box arithmetic
// the association runs on. A detection enters as an STrack too (no Kalman state yet) and becomes
// a track when it is activated. Box conversions round in float as ultralytics' float32 arrays do,
// so that thresholds fall on the same side; the Kalman state is double as there.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "track/kalman_filter.hpp"
#include "yolocu/track.hpp"

namespace yolocu::track {

enum class TrackState { kNew, kTracked, kLost, kRemoved };

struct STrack {
  std::array<float, 4> det_tlwh{};  // the detection's box (left, top, width, height)
  bool has_state = false;           // Kalman state set (activated once)
  KalmanState kalman;
  TrackState state = TrackState::kNew;
  bool is_activated = false;
  int64_t track_id = 0;
  float score = 0;
  float cls = 0;
  int idx = 0;
  int frame_id = 0;
  int start_frame = 0;
  int tracklet_len = 0;
};
using TrackPtr = std::shared_ptr<STrack>;
using TrackList = std::vector<TrackPtr>;

// An STrack for input detection `idx`: xyxy -> centre/size -> left/top, in float.
TrackPtr make_detection(const TrackInput& d, int idx);
// The Kalman measurement of a detection box in the filter's layout.
std::array<double, 4> measurement(const std::array<float, 4>& tlwh, BoxLayout layout);
// The track's box as x1, y1, x2, y2: from the Kalman state once it has one, else the detection.
std::array<double, 4> xyxy(const STrack& t, BoxLayout layout);
// 1 - IoU of every (a, b) pair (rows a), float32 as ultralytics' bbox_ioa with eps 1e-7.
std::vector<float> iou_distance(const TrackList& a, const TrackList& b, BoxLayout layout);
// 1 - (1 - cost) * score of each column's detection (ultralytics' fuse_score).
void fuse_score(std::vector<float>& cost, const TrackList& detections);
// Moves Kalman states by a camera-motion warp (xywh layout: BoT-SORT), as ultralytics' multi_gmc.
void apply_warp(const TrackList& tracks, const Warp2x3& warp);

// Track-list helpers of ultralytics' trackers, by track id.
TrackList joint_tracks(const TrackList& a, const TrackList& b);
TrackList sub_tracks(const TrackList& a, const std::vector<int64_t>& ids);
// Drops tracks of a and b that overlap (IoU > 0.85), keeping the longer-lived one.
void remove_duplicate_tracks(TrackList& a, TrackList& b, BoxLayout layout);

}  // namespace yolocu::track

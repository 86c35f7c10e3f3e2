// yolocu/track.hpp - multi-object tracking of one stream's detections: ByteTrack and BoT-SORT
// (without appearance features), with the association, Kalman filter and bookkeeping of
// ultralytics' BYTETracker / BOTSORT, so that the same detections give the same track ids.
//
// One Tracker per stream: it owns its tracks and its id counter (ids start at 1 and are never
// reused), is not thread-safe, and runs on the CPU. Coordinates are pixels of the frame the
// detections were made on (x1, y1, x2, y2; x2 > x1, y2 > y1 for a box to be tracked).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace yolocu {

enum class TrackerType { kByteTrack, kBotSort };

// Global motion compensation of BoT-SORT (ultralytics' `gmc_method`). The yolocu library does
// not link OpenCV, so only kNone runs inside it; a caller that estimates the camera motion
// itself passes the 2x3 warp to Tracker::update. A Tracker refuses the other methods.
enum class GmcMethod { kNone, kSparseOptFlow, kOrb, kSift, kEcc };

// The keys of ultralytics' tracker YAML files (bytetrack.yaml, botsort.yaml), same meaning and
// defaults as there (botsort.yaml's defaults; ReID keys are read and must leave ReID off).
// Thresholds are doubles as the YAML's numbers are in Python; they are compared as ultralytics
// does: against the float32 scores in float (the split), in double elsewhere.
struct TrackerConfig {
  TrackerType type = TrackerType::kByteTrack;
  double track_high_thresh = 0.25;  // first association: detections with conf >= this
  double track_low_thresh = 0.1;    // second association: low < conf < high
  double new_track_thresh = 0.25;   // an unmatched high detection starts a track at conf >= this
  int track_buffer = 30;            // frames a lost track is kept (not scaled by frame rate, as ultralytics)
  double match_thresh = 0.8;        // cost limit of the first association
  bool fuse_score = true;           // IoU similarity times detection score
  // BoT-SORT only
  GmcMethod gmc_method = GmcMethod::kNone;
  double proximity_thresh = 0.5;    // used by ReID only
  double appearance_thresh = 0.8;   // used by ReID only
  bool with_reid = false;           // must be false: ReID is not built
};

// Parses the text of an ultralytics tracker YAML file (a flat mapping of scalars; comments
// allowed). Unknown keys, values of the wrong type or out of range, duplicate keys, a missing
// `tracker_type` and any nesting throw yolocu::Error (kParse / kInvalidArgument / kUnsupported)
// naming the key and line. Keys absent from the text keep their defaults.
TrackerConfig parse_tracker_config(const std::string& yaml_text, const std::string& source_name = "<yaml>");
// Reads and parses a file; kIo when it cannot be read.
TrackerConfig read_tracker_config(const std::string& path);

// ultralytics' default tracker files (8.4.190, settings only), by name: "bytetrack.yaml" /
// "botsort.yaml" (also without ".yaml"); "" for another name. botsort.yaml's gmc_method is
// sparseOptFlow, which a Tracker runs only with a caller-supplied warp (see GmcMethod).
std::string default_tracker_yaml(const std::string& name);
// A tracker argument as ultralytics takes it: the YAML file at that path when it exists, else the
// default of that name; kIo when neither.
TrackerConfig load_tracker_config(const std::string& name_or_path);

// One detection of a frame, as the detector gives it.
struct TrackInput {
  float x1, y1, x2, y2;
  float conf;
  float cls;
};

// One row of ultralytics' tracker output: [x1, y1, x2, y2, track_id, score, cls, idx], the box
// being the Kalman filter's state after this frame's update; idx is the index of the detection
// (into this frame's input) that the track was matched to.
struct TrackOutput {
  float x1, y1, x2, y2;
  int64_t track_id;
  float score;
  float cls;
  int32_t idx;
};

// A 2x3 affine map from the previous frame's pixels to the current frame's (row-major), as
// OpenCV's estimateAffinePartial2D returns it; the identity when the camera did not move.
using Warp2x3 = std::array<double, 6>;

class Tracker {
 public:
  // Throws yolocu::Error (kInvalidArgument / kUnsupported) for a config it cannot run.
  explicit Tracker(const TrackerConfig& config);
  ~Tracker();
  Tracker(Tracker&&) noexcept;
  Tracker& operator=(Tracker&&) noexcept;
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  // Advances one frame and returns the tracks confirmed and matched in it, in ultralytics' order.
  // `warp` (BoT-SORT only; ByteTrack ignores it, as ultralytics' BYTETracker has no GMC) moves the
  // predicted tracks by the camera motion before association. Boxes of zero or negative width or
  // height are ignored, as ultralytics does. A detection with a non-finite value or a coordinate
  // beyond +-1e6 px, or a non-finite warp, throws yolocu::Error (kInvalidArgument) and leaves the
  // tracker unchanged.
  std::vector<TrackOutput> update(const std::vector<TrackInput>& detections, const Warp2x3* warp = nullptr);

  // Forgets every track and restarts ids at 1.
  void reset();
  const TrackerConfig& config() const;
  int frame_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yolocu

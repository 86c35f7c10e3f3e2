// yolocu track's per-stream state: a Tracker, the counting lines and zones, the trails drawn, the
// MOT file and (BoT-SORT with sparseOptFlow) the camera-motion estimate. One TrackStage serves
// every stream of a run, on the run's thread: the --source loop calls it as a FrameStage, and
// --detections (track_detections.cpp) calls track() directly.
#pragma once

#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "camera_motion.hpp"
#include "video_stage.hpp"
#include "yolocu/track.hpp"
#include "yolocu/track_count.hpp"

namespace yolocu::cli {

struct TrackStageOptions {
  TrackerConfig tracker;
  std::vector<CountRegion> regions;
  std::string mot_dir;             // --save-txt: <mot_dir>/<stem>.txt per stream; "" = none
  int trail_frames = 30;           // frames of each track's trail drawn
  bool warps_given = false;        // --detections: BoT-SORT's camera motion comes with each frame, not from pixels
};

class TrackStage : public FrameStage {
 public:
  // Checks the options (kInvalidArgument / kUnsupported for a config or region it cannot run).
  explicit TrackStage(TrackStageOptions options);
  ~TrackStage() override;

  const char* command() const override { return "track"; }
  void begin(const std::vector<std::string>& class_names, const std::vector<std::string>& stems) override;
  void process(VideoFrame& frame, Detections& dets, FrameJson& json) override;
  void draw(Image& image, int stream_id, const Detections& dets) override;
  void finish() override;

  // One frame of `stream`: `dets` replaced by its tracked objects (the tracker's boxes, in its
  // order), `json` filled (track_id and index per object, counts and crossings per line).
  // `frame_number` is the MOT file's frame column. `warp`: the camera motion, BoT-SORT only.
  void track(int stream, int64_t frame_number, Detections& dets, FrameJson& json, const Warp2x3* warp);
  // The file stem of `stream`'s MOT file, before its first frame (--detections: from its source).
  void name_stream(int stream, const std::string& stem);
  // Whether frames are needed to estimate camera motion (BoT-SORT with gmc_method other than none).
  bool needs_frames() const { return gmc_; }

 private:
  struct Stream;
  Stream& stream(int id);
  std::string counts_json(const Stream& s, const std::vector<CountEvent>& events) const;
  void write_mot(Stream& s, int64_t frame_number, const std::vector<TrackOutput>& tracks);

  TrackStageOptions o_;
  TrackerConfig tracker_config_;  // as given to each Tracker (gmc_method none: the warp comes from here)
  bool gmc_ = false;
  const std::vector<std::string>* names_ = nullptr;
  std::vector<std::string> stems_;
  std::map<int, std::unique_ptr<Stream>> streams_;
};

}  // namespace yolocu::cli

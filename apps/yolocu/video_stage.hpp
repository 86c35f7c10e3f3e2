// A per-frame step between the detector and the outputs of a --source run: yolocu track's trackers
// and counters sit here, on the video loop of yolocu detect --source (cmd_detect_video.cpp).
#pragma once

#include <string>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/image.hpp"
#include "yolocu/video.hpp"

namespace yolocu::cli {

// What a stage adds to a frame's JSON line.
struct FrameJson {
  std::vector<std::string> object_members;  // per object written: members appended inside its {...}
  std::string line_members;                 // appended inside the line's {...} (", \"key\": ...")
};

class FrameStage {
 public:
  virtual ~FrameStage() = default;
  // The command's name in messages ("track").
  virtual const char* command() const = 0;
  // Once, before the first frame: the detector's class names (they outlive the stage) and the file
  // stem of each stream (the names of its --save video).
  virtual void begin(const std::vector<std::string>& class_names, const std::vector<std::string>& stems) = 0;
  // Every frame, in order within its stream, on the run's thread, after detection. Replaces `dets`
  // by the objects to write and draw and fills `json`. `frame` may be copied to the host here
  // (frame.image) when the stage needs its pixels.
  virtual void process(VideoFrame& frame, Detections& dets, FrameJson& json) = 0;
  // Draws the frame's objects (as process() left them) and the stage's own marks.
  virtual void draw(Image& image, int stream_id, const Detections& dets) = 0;
  // After the last frame: closes the stage's files (throws yolocu::Error when one fails).
  virtual void finish() = 0;
};

}  // namespace yolocu::cli

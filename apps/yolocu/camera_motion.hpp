// BoT-SORT's global motion compensation for yolocu track: the camera's 2x3 warp between
// consecutive frames of one stream, which libyolocu's Tracker takes from its caller.
#pragma once

#include <memory>

#include "yolocu/image.hpp"
#include "yolocu/track.hpp"

namespace yolocu::cli {

class CameraMotion {
 public:
  virtual ~CameraMotion() = default;
  // The warp from the previous frame given to this one (the identity for the first frame).
  virtual Warp2x3 apply(const ImageView& bgr) = 0;
};

// True when this build can estimate `method` (sparseOptFlow needs the CLI built with OpenCV).
bool camera_motion_available(GmcMethod method);
// A fresh estimator per stream; kUnsupported (with what to do instead) when !available.
std::unique_ptr<CameraMotion> make_camera_motion(GmcMethod method);

}  // namespace yolocu::cli

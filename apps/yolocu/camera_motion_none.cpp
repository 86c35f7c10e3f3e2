// Camera motion in a CLI built without OpenCV: none can be estimated.
#include "camera_motion.hpp"
#include "yolocu/error.hpp"

namespace yolocu::cli {

bool camera_motion_available(GmcMethod) { return false; }

std::unique_ptr<CameraMotion> make_camera_motion(GmcMethod) {
  throw Error(ErrorCode::kUnsupported,
              "gmc_method: this yolocu was built without OpenCV, so it estimates no camera motion; use a tracker "
              "file with gmc_method: none (or bytetrack.yaml)");
}

}  // namespace yolocu::cli

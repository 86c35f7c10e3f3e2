// yolocu/detection.hpp - the result type every detection path returns.
#pragma once

#include <string>
#include <vector>

namespace yolocu {

// One detected object, in original-image pixels (x1, y1, x2, y2; continuous, unrounded, clipped
// to [0, width] x [0, height]).
struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  float confidence = 0;  // obj * cls score
  int class_id = 0;
};

using Detections = std::vector<Detection>;

}  // namespace yolocu

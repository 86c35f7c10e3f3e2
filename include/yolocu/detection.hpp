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

// The name of class `id`: names[id] when the list has that entry, else "class<id>" (a model
// without names metadata, or fewer names than classes).
inline std::string class_name(const std::vector<std::string>& names, int id) {
  return id >= 0 && static_cast<size_t>(id) < names.size() ? names[static_cast<size_t>(id)]
                                                           : "class" + std::to_string(id);
}

}  // namespace yolocu

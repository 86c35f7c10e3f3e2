// kalman_filter.hpp - the constant-velocity Kalman filter of ultralytics' trackers, in the two
// state layouts they use: xyah (ByteTrack: centre, aspect w/h, height) and xywh (BoT-SORT).
// The state is 8 numbers (the 4 box values then their velocities), the covariance 8x8 row-major;
// noise scales with the box height (xyah) or with width and height (xywh), as ultralytics'
// KalmanFilterXYAH / KalmanFilterXYWH do, in double precision.
#pragma once

#include <array>

namespace yolocu::track {

enum class BoxLayout { kXyah, kXywh };

struct KalmanState {
  std::array<double, 8> mean{};
  std::array<double, 64> covariance{};
};

class KalmanFilter {
 public:
  explicit KalmanFilter(BoxLayout layout) : layout_(layout) {}
  BoxLayout layout() const { return layout_; }

  // A new track at `measurement` (4 values in the filter's layout), zero velocity.
  KalmanState initiate(const std::array<double, 4>& measurement) const;
  // One time step forward (dt = 1 frame).
  void predict(KalmanState& state) const;
  // Corrects the state with a measurement.
  void update(KalmanState& state, const std::array<double, 4>& measurement) const;

 private:
  // Standard deviations of the position (4) and velocity (4) noise for a state's box.
  void process_std(const std::array<double, 8>& mean, double std_out[8]) const;
  BoxLayout layout_;
};

}  // namespace yolocu::track

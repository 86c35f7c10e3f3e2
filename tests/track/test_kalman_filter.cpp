// The Kalman filter against numbers printed by ultralytics' KalmanFilterXYAH / KalmanFilterXYWH for
// the same calls (initiate, predict, predict, update, predict), to 1e-9 relative.
#include <gtest/gtest.h>

#include <cmath>

#include "track/kalman_filter.hpp"

namespace yolocu::track {
namespace {

void expect_close(double got, double want, const char* what, int i) {
  EXPECT_NEAR(got, want, 1e-9 * std::max(1.0, std::fabs(want))) << what << "[" << i << "]";
}

KalmanState run(BoxLayout layout, const std::array<double, 4>& first, const std::array<double, 4>& z) {
  KalmanFilter kf(layout);
  KalmanState s = kf.initiate(first);
  kf.predict(s);
  kf.predict(s);
  kf.update(s, z);
  kf.predict(s);
  return s;
}

TEST(KalmanFilter, XyahMatchesUltralytics) {
  const KalmanState s = run(BoxLayout::kXyah, {100, 200, 0.5, 80}, {103, 198, 0.52, 82});
  const double mean[8] = {103.48409893992932, 197.67726737338046, 0.5005825257969648, 82.32273262661955,
                          0.7102473498233215, -0.4734982332155477, 5.825242435667848e-10, 0.4734982332155477};
  const double diag[8] = {52.7214466961062,   52.7214466961062,   0.0003912634897444967, 52.7214466961062,
                          13.865048186193208, 13.865048186193208, 3.999999912621364e-10, 13.865048186193208};
  for (int i = 0; i < 8; ++i) {
    expect_close(s.mean[i], mean[i], "mean", i);
    expect_close(s.covariance[i * 8 + i], diag[i], "diag", i);
  }
  expect_close(s.covariance[0 * 8 + 4], 17.391342756183754, "P04", 0);
  expect_close(s.covariance[3 * 8 + 7], 17.391342756183754, "P37", 0);
  expect_close(s.covariance[2 * 8 + 6], 5.912621130455286e-10, "P26", 0);
}

TEST(KalmanFilter, XywhMatchesUltralytics) {
  const KalmanState s = run(BoxLayout::kXywh, {100, 200, 40, 80}, {103, 198, 42, 82});
  const double mean[8] = {103.48409893992932, 197.67726737338046, 42.322732626619555, 82.32273262661955,
                          0.7102473498233215, -0.4734982332155477, 0.4734982332155477, 0.4734982332155477};
  const double diag[8] = {13.371696990570229, 52.7214466961062,  13.371696990570229, 52.7214466961062,
                          3.469251660869297,  13.865048186193208, 3.469251660869297,  13.865048186193208};
  for (int i = 0; i < 8; ++i) {
    expect_close(s.mean[i], mean[i], "mean", i);
    expect_close(s.covariance[i * 8 + i], diag[i], "diag", i);
  }
  expect_close(s.covariance[0 * 8 + 4], 4.347835689045938, "P04", 0);
  expect_close(s.covariance[3 * 8 + 7], 17.391342756183754, "P37", 0);
}

TEST(KalmanFilter, CovarianceStaysSymmetric) {
  KalmanFilter kf(BoxLayout::kXyah);
  KalmanState s = kf.initiate({50, 60, 0.4, 120});
  for (int k = 0; k < 20; ++k) {
    kf.predict(s);
    kf.update(s, {50.0 + 3 * k, 60.0 - k, 0.41, 121});
  }
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_NEAR(s.covariance[i * 8 + j], s.covariance[j * 8 + i], 1e-9);
  EXPECT_NEAR(s.mean[4], 3.0, 0.3);  // the x velocity has converged near the true 3 px/frame
}

}  // namespace
}  // namespace yolocu::track

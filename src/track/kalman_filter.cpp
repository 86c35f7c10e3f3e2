// kalman_filter.cpp - see kalman_filter.hpp. The matrices are small and fixed (8x8, 4x4), so the
// products are written out as loops; the 4x4 innovation covariance is symmetric positive definite
// and solved by Cholesky.
#include "track/kalman_filter.hpp"

#include <cmath>

#include "yolocu/error.hpp"

namespace yolocu::track {
namespace {

constexpr double kStdWeightPosition = 1.0 / 20;
constexpr double kStdWeightVelocity = 1.0 / 160;

// Solves S * X = B for X (4x8), S 4x4 symmetric positive definite, B 4x8; row-major. The
// substitutions multiply by the diagonal's reciprocals (4 divisions instead of 64, as LAPACK's
// optimised triangular solves do; results within an ulp or so of dividing).
void cholesky_solve(const double s[16], const double b[32], double x[32]) {
  double l[16] = {}, inv[4];
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j <= i; ++j) {
      double sum = s[i * 4 + j];
      for (int k = 0; k < j; ++k) sum -= l[i * 4 + k] * l[j * 4 + k];
      if (i == j) {
        if (!(sum > 0)) throw Error(ErrorCode::kInternal, "Kalman filter: innovation covariance is not positive definite");
        l[i * 4 + i] = std::sqrt(sum);
        inv[i] = 1.0 / l[i * 4 + i];
      } else {
        l[i * 4 + j] = sum * inv[j];
      }
    }
  }
  for (int c = 0; c < 8; ++c) {
    double y[4];
    for (int i = 0; i < 4; ++i) {
      double sum = b[i * 8 + c];
      for (int k = 0; k < i; ++k) sum -= l[i * 4 + k] * y[k];
      y[i] = sum * inv[i];
    }
    for (int i = 3; i >= 0; --i) {
      double sum = y[i];
      for (int k = i + 1; k < 4; ++k) sum -= l[k * 4 + i] * x[k * 8 + c];
      x[i * 8 + c] = sum * inv[i];
    }
  }
}

}  // namespace

KalmanState KalmanFilter::initiate(const std::array<double, 4>& m) const {
  KalmanState s;
  for (int i = 0; i < 4; ++i) s.mean[i] = m[i];
  double std[8];
  if (layout_ == BoxLayout::kXyah) {
    const double h = m[3];
    const double p = 2 * kStdWeightPosition * h, v = 10 * kStdWeightVelocity * h;
    const double v8[8] = {p, p, 1e-2, p, v, v, 1e-5, v};
    for (int i = 0; i < 8; ++i) std[i] = v8[i];
  } else {
    const double w = m[2], h = m[3];
    const double v8[8] = {2 * kStdWeightPosition * w,  2 * kStdWeightPosition * h,  2 * kStdWeightPosition * w,
                          2 * kStdWeightPosition * h,  10 * kStdWeightVelocity * w, 10 * kStdWeightVelocity * h,
                          10 * kStdWeightVelocity * w, 10 * kStdWeightVelocity * h};
    for (int i = 0; i < 8; ++i) std[i] = v8[i];
  }
  for (int i = 0; i < 8; ++i) s.covariance[i * 8 + i] = std[i] * std[i];
  return s;
}

void KalmanFilter::process_std(const std::array<double, 8>& mean, double std[8]) const {
  if (layout_ == BoxLayout::kXyah) {
    const double h = mean[3];
    const double p = kStdWeightPosition * h, v = kStdWeightVelocity * h;
    const double v8[8] = {p, p, 1e-2, p, v, v, 1e-5, v};
    for (int i = 0; i < 8; ++i) std[i] = v8[i];
  } else {
    const double w = mean[2], h = mean[3];
    const double v8[8] = {kStdWeightPosition * w, kStdWeightPosition * h, kStdWeightPosition * w,
                          kStdWeightPosition * h, kStdWeightVelocity * w, kStdWeightVelocity * h,
                          kStdWeightVelocity * w, kStdWeightVelocity * h};
    for (int i = 0; i < 8; ++i) std[i] = v8[i];
  }
}

void KalmanFilter::predict(KalmanState& s) const {
  double std[8];
  process_std(s.mean, std);  // from the state before the step, as ultralytics
  // mean' = F mean with F = [I I; 0 I]
  for (int i = 0; i < 4; ++i) s.mean[i] += s.mean[i + 4];
  // P' = F P F^T + Q: rows then columns of the position block gain their velocity counterparts
  auto& p = s.covariance;
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 8; ++c) p[i * 8 + c] += p[(i + 4) * 8 + c];
  for (int r = 0; r < 8; ++r)
    for (int j = 0; j < 4; ++j) p[r * 8 + j] += p[r * 8 + j + 4];
  for (int i = 0; i < 8; ++i) p[i * 8 + i] += std[i] * std[i];
}

void KalmanFilter::update(KalmanState& s, const std::array<double, 4>& z) const {
  // measurement noise R (diagonal)
  double r[4];
  if (layout_ == BoxLayout::kXyah) {
    const double h = s.mean[3];
    r[0] = r[1] = r[3] = kStdWeightPosition * h;
    r[2] = 1e-1;
  } else {
    r[0] = r[2] = kStdWeightPosition * s.mean[2];
    r[1] = r[3] = kStdWeightPosition * s.mean[3];
  }
  const auto& p = s.covariance;
  double sm[16];  // S = H P H^T + R: the top-left 4x4 block of P
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) sm[i * 4 + j] = p[i * 8 + j] + (i == j ? r[i] * r[i] : 0.0);
  double pht_t[32];  // (P H^T)^T = H P: the top 4 rows of P
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 8; ++c) pht_t[i * 8 + c] = p[c * 8 + i];
  double kt[32];  // K^T = S^-1 (P H^T)^T, K is 8x4
  cholesky_solve(sm, pht_t, kt);
  double innovation[4];
  for (int i = 0; i < 4; ++i) innovation[i] = z[i] - s.mean[i];
  for (int c = 0; c < 8; ++c) {
    double d = 0;
    for (int i = 0; i < 4; ++i) d += innovation[i] * kt[i * 8 + c];
    s.mean[c] += d;
  }
  // P' = P - K S K^T = P - K (H P), since S K^T = H P: no S K^T product (in place: what is left
  // reads only kt and pht_t)
  for (int a = 0; a < 8; ++a)
    for (int c = 0; c < 8; ++c) {
      double d = 0;
      for (int k = 0; k < 4; ++k) d += kt[k * 8 + a] * pht_t[k * 8 + c];
      s.covariance[a * 8 + c] -= d;
    }
}

}  // namespace yolocu::track

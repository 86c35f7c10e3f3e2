// CPU references of the training kernels against values derived independently in this file:
// direct index formulas for the upsample, hand-computed CIoU cases (identical, disjoint,
// contained, touching, aspect-only), central finite differences for the CIoU gradient with alpha
// frozen (ties included: at a min/max tie PyTorch's half/half split equals the mean of the two
// one-sided derivatives), and plain loops for EMA / SGD.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "yolocu/error.hpp"
#include "yolocu/tensor.hpp"
#include "yolocu/training/ciou.hpp"
#include "yolocu/training/multi_tensor.hpp"
#include "yolocu/training/upsample.hpp"

namespace yt = yolocu::training;

namespace {

// ---- upsample -------------------------------------------------------------------------------------
// Offset of (n, c, h, w) in a dense tensor of dims (N, C, H, W) stored in `layout`.
int64_t offset(yt::Layout layout, int64_t C, int64_t H, int64_t W, int64_t n, int64_t c, int64_t h, int64_t w) {
  if (layout == yt::Layout::kNCHW) return ((n * C + c) * H + h) * W + w;
  return ((n * H + h) * W + w) * C + c;
}

class training_UpsampleCpu : public ::testing::TestWithParam<std::tuple<yt::Layout, int, int, int, int>> {};

TEST_P(training_UpsampleCpu, ForwardAndBackwardMatchDirectFormulas) {
  const auto [layout, N, C, H, W] = GetParam();
  const yt::Upsample2xShape s{N, C, H, W, layout};
  const int64_t n_in = s.input_numel();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> x(n_in), y(4 * n_in), dy(4 * n_in), dx(n_in);
  for (auto& v : x) v = u(rng);
  for (auto& v : dy) v = u(rng);
  yt::upsample2x_forward_cpu(yt::FloatType::kFloat32, x.data(), y.data(), s);
  yt::upsample2x_backward_cpu(yt::FloatType::kFloat32, dy.data(), dx.data(), s);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < 2 * H; ++h)
        for (int w = 0; w < 2 * W; ++w)
          ASSERT_EQ(y[offset(layout, C, 2 * H, 2 * W, n, c, h, w)], x[offset(layout, C, H, W, n, c, h / 2, w / 2)]);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) {
          auto g = [&](int i, int j) { return dy[offset(layout, C, 2 * H, 2 * W, n, c, 2 * h + i, 2 * w + j)]; };
          const float expect = ((g(0, 0) + g(0, 1)) + g(1, 0)) + g(1, 1);  // PyTorch's order
          ASSERT_EQ(dx[offset(layout, C, H, W, n, c, h, w)], expect);
        }
  // Adjoint identity <up(x), dy> == <x, up^T(dy)> in double.
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < 4 * n_in; ++i) lhs += double(y[i]) * dy[i];
  std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end()), dxd(n_in);
  yt::upsample2x_backward_cpu(yt::FloatType::kFloat64, dyd.data(), dxd.data(), s);
  for (int64_t i = 0; i < n_in; ++i) rhs += xd[i] * dxd[i];
  EXPECT_NEAR(lhs, rhs, 1e-9 * (1 + std::fabs(lhs)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, training_UpsampleCpu,
                         ::testing::Values(std::make_tuple(yt::Layout::kNCHW, 2, 3, 4, 5),
                                           std::make_tuple(yt::Layout::kNCHW, 1, 1, 1, 1),
                                           std::make_tuple(yt::Layout::kNHWC, 2, 3, 4, 5),
                                           std::make_tuple(yt::Layout::kNHWC, 2, 8, 3, 2),
                                           std::make_tuple(yt::Layout::kNCHW, 0, 3, 4, 5)));

TEST(training_UpsampleCpu, HalfAndBFloat16AccumulateInFloatAndRoundOnce) {
  const yt::Upsample2xShape s{1, 1, 1, 1, yt::Layout::kNCHW};
  // 2048 + 1 + 1 + 1: in float 2051, rounds (half, spacing 2 at 2048) to 2052; summing in half with
  // a rounding after each add would give 2048.
  std::vector<uint16_t> dy = {yolocu::float_to_half(2048.f), yolocu::float_to_half(1.f), yolocu::float_to_half(1.f),
                              yolocu::float_to_half(1.f)};
  uint16_t dx = 0;
  yt::upsample2x_backward_cpu(yt::FloatType::kFloat16, dy.data(), &dx, s);
  EXPECT_EQ(yolocu::half_to_float(dx), 2052.f);
  // bfloat16 (8 mantissa bits): 256 + 1 + 1 + 1 = 259 -> nearest representable 260 (spacing 2).
  auto bf = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
  };
  std::vector<uint16_t> dyb = {bf(256.f), bf(1.f), bf(1.f), bf(1.f)};
  uint16_t dxb = 0;
  yt::upsample2x_backward_cpu(yt::FloatType::kBFloat16, dyb.data(), &dxb, s);
  const uint32_t u = static_cast<uint32_t>(dxb) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  EXPECT_EQ(f, 260.f);
  std::vector<uint16_t> y(4);
  yt::upsample2x_forward_cpu(yt::FloatType::kFloat16, &dy[0], y.data(), s);
  for (uint16_t v : y) EXPECT_EQ(v, dy[0]);
}

TEST(training_UpsampleCpu, RejectsNegativeDims) {
  const yt::Upsample2xShape s{1, -1, 2, 2, yt::Layout::kNCHW};
  float a = 0, b = 0;
  EXPECT_THROW(yt::upsample2x_forward_cpu(yt::FloatType::kFloat32, &a, &b, s), yolocu::Error);
}

// ---- CIoU -------------------------------------------------------------------------------------------
constexpr double kPi = 3.14159265358979323846;

// Independent CIoU (double), written from the paper's definition as ultralytics codes it; alpha is
// computed when *alpha is NaN and reused (frozen) otherwise.
double ciou_ref(const double* p, const double* t, double eps, double* alpha) {
  const double px1 = p[0] - p[2] / 2, px2 = p[0] + p[2] / 2, py1 = p[1] - p[3] / 2, py2 = p[1] + p[3] / 2;
  const double tx1 = t[0] - t[2] / 2, tx2 = t[0] + t[2] / 2, ty1 = t[1] - t[3] / 2, ty2 = t[1] + t[3] / 2;
  const double iw = std::max(0.0, std::min(px2, tx2) - std::max(px1, tx1));
  const double ih = std::max(0.0, std::min(py2, ty2) - std::max(py1, ty1));
  const double inter = iw * ih;
  const double iou = inter / (p[2] * p[3] + t[2] * t[3] - inter + eps);
  const double cw = std::max(px2, tx2) - std::min(px1, tx1), ch = std::max(py2, ty2) - std::min(py1, ty1);
  const double dx = t[0] - p[0], dy = t[1] - p[1];  // rho2 = squared centre distance
  const double v = 4 / (kPi * kPi) * std::pow(std::atan(t[2] / t[3]) - std::atan(p[2] / p[3]), 2);
  if (std::isnan(*alpha)) *alpha = v / (v - iou + 1 + eps);
  return iou - ((dx * dx + dy * dy) / (cw * cw + ch * ch + eps) + v * *alpha);
}

double lib_ciou(const double* p, const double* t, double eps) {
  yt::CiouLevel lv{p, t, 1};
  double out = 0;
  void* outs[] = {&out};
  yt::ciou_forward_cpu(yt::FloatType::kFloat64, &lv, 1, outs, eps);
  return out;
}

void lib_grad(const double* p, const double* t, double eps, double g, double* grad) {
  yt::CiouLevel lv{p, t, 1};
  const void* gs[] = {&g};
  void* outs[] = {grad};
  yt::ciou_backward_cpu(yt::FloatType::kFloat64, &lv, 1, gs, outs, eps);
}

// Central differences of g * ciou with alpha frozen at the unperturbed value.
void fd_grad(const double* p, const double* t, double eps, double g, double* grad, double step = 1e-6) {
  double alpha = NAN;
  ciou_ref(p, t, eps, &alpha);
  for (int k = 0; k < 4; ++k) {
    double a[4] = {p[0], p[1], p[2], p[3]}, b[4] = {p[0], p[1], p[2], p[3]};
    a[k] += step;
    b[k] -= step;
    grad[k] = g * (ciou_ref(a, t, eps, &alpha) - ciou_ref(b, t, eps, &alpha)) / (2 * step);
  }
}

TEST(training_CiouCpu, HandComputedCases) {
  const double eps = 1e-7;
  {  // identical boxes: iou = 8 / (8 + eps), no distance or aspect penalty
    const double p[4] = {5, 5, 2, 4};
    EXPECT_NEAR(lib_ciou(p, p, eps), 8.0 / (8.0 + eps), 1e-15);
  }
  {  // disjoint: inter 0, hull 12 x 2, centre distance 10
    const double p[4] = {0, 0, 2, 2}, t[4] = {10, 0, 2, 2};
    EXPECT_NEAR(lib_ciou(p, t, eps), -100.0 / (148.0 + eps), 1e-15);
  }
  {  // contained: 2x2 inside 4x4, same centre: iou = 4 / (16 + eps)
    const double p[4] = {0, 0, 2, 2}, t[4] = {0, 0, 4, 4};
    EXPECT_NEAR(lib_ciou(p, t, eps), 4.0 / (16.0 + eps), 1e-15);
  }
  {  // touching edges: inter 0, hull 4 x 2, centre distance 2
    const double p[4] = {0, 0, 2, 2}, t[4] = {2, 0, 2, 2};
    EXPECT_NEAR(lib_ciou(p, t, eps), -4.0 / (20.0 + eps), 1e-15);
  }
  {  // aspect only: 2x1 vs 1x2 at the same centre
    const double p[4] = {0, 0, 2, 1}, t[4] = {0, 0, 1, 2};
    const double iou = 1.0 / (3.0 + eps);
    const double v = 4 / (kPi * kPi) * std::pow(std::atan(0.5) - std::atan(2.0), 2);
    const double alpha = v / (v - iou + 1 + eps);
    EXPECT_NEAR(lib_ciou(p, t, eps), iou - (0.0 / (8 + eps) + v * alpha), 1e-15);
  }
}

TEST(training_CiouCpu, GradientMatchesFiniteDifferencesOnRandomBoxes) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> c(0, 4), s(0.3, 3), gd(-2, 2);
  int checked = 0;
  for (int it = 0; it < 2000; ++it) {
    const double p[4] = {c(rng), c(rng), s(rng), s(rng)}, t[4] = {c(rng), c(rng), s(rng), s(rng)};
    // Keep finite differences away from the clamp kink (edges touching).
    const double iwr = std::min(p[0] + p[2] / 2, t[0] + t[2] / 2) - std::max(p[0] - p[2] / 2, t[0] - t[2] / 2);
    const double ihr = std::min(p[1] + p[3] / 2, t[1] + t[3] / 2) - std::max(p[1] - p[3] / 2, t[1] - t[3] / 2);
    if (std::fabs(iwr) < 1e-3 || std::fabs(ihr) < 1e-3) continue;
    double alpha = NAN;
    ASSERT_NEAR(lib_ciou(p, t, 1e-7), ciou_ref(p, t, 1e-7, &alpha), 1e-12);
    const double g = gd(rng);
    double a[4], b[4];
    lib_grad(p, t, 1e-7, g, a);
    fd_grad(p, t, 1e-7, g, b);
    for (int k = 0; k < 4; ++k) ASSERT_NEAR(a[k], b[k], 1e-6 * (1 + std::fabs(b[k]))) << "it " << it << " k " << k;
    ++checked;
  }
  EXPECT_GT(checked, 1500);
}

TEST(training_CiouCpu, GradientAtTiesIsTheMeanOfOneSidedDerivatives) {
  // Identical boxes: every min/max is a tie. Same centre with different sizes: x/y ties only in the
  // centre terms. Shared left edge: x1 == X1.
  const double cases[][8] = {{5, 5, 2, 4, 5, 5, 2, 4}, {1, 1, 2, 3, 1, 1, 3, 2}, {1, 1, 2, 2, 1.5, 1, 3, 2},
                             {0, 0, 2, 2, 0, 0, 4, 4}, {0, 0, 2, 2, 10, 0, 2, 2}};
  for (const auto& cs : cases) {
    double a[4], b[4];
    lib_grad(cs, cs + 4, 1e-7, 1.0, a);
    fd_grad(cs, cs + 4, 1e-7, 1.0, b);
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(a[k], b[k], 1e-6) << "case " << cs[0] << "," << cs[4] << " k " << k;
  }
}

TEST(training_CiouCpu, TouchingBoxesPassTheGradientThroughClampAtZero) {
  // inter width is exactly 0: PyTorch's clamp(0) backward passes the gradient, which equals the
  // one-sided derivative towards overlap (x up, w up); y and h are ties (mean of both sides).
  const double p[4] = {0, 0, 2, 2}, t[4] = {2, 0, 2, 2};
  double a[4];
  lib_grad(p, t, 1e-7, 1.0, a);
  double alpha = NAN;
  const double f0 = ciou_ref(p, t, 1e-7, &alpha), h = 1e-7;
  for (int k : {0, 2}) {
    double q[4] = {p[0], p[1], p[2], p[3]};
    q[k] += h;
    EXPECT_NEAR(a[k], (ciou_ref(q, t, 1e-7, &alpha) - f0) / h, 1e-5) << k;
  }
  double b[4];
  fd_grad(p, t, 1e-7, 1.0, b);
  EXPECT_NEAR(a[1], b[1], 1e-6);
  EXPECT_NEAR(a[3], b[3], 1e-6);
}

TEST(training_CiouCpu, MultipleLevelsAndFloat32) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> c(0, 4), s(0.3f, 3);
  const int n[3] = {5, 0, 17};
  std::vector<float> pb[3], tb[3], out[3], g[3], gp[3];
  yt::CiouLevel lv[3];
  void* outs[3];
  const void* gs[3];
  void* gps[3];
  for (int l = 0; l < 3; ++l) {
    for (int i = 0; i < n[l]; ++i) {
      for (float v : {c(rng), c(rng), s(rng), s(rng)}) pb[l].push_back(v);
      for (float v : {c(rng), c(rng), s(rng), s(rng)}) tb[l].push_back(v);
    }
    out[l].assign(n[l], 0.f);
    g[l].assign(n[l], 0.5f);
    gp[l].assign(4 * n[l], 0.f);
    lv[l] = {pb[l].data(), tb[l].data(), n[l]};
    outs[l] = out[l].data();
    gs[l] = g[l].data();
    gps[l] = gp[l].data();
  }
  yt::ciou_forward_cpu(yt::FloatType::kFloat32, lv, 3, outs, 1e-7);
  yt::ciou_backward_cpu(yt::FloatType::kFloat32, lv, 3, gs, gps, 1e-7);
  for (int l = 0; l < 3; ++l)
    for (int i = 0; i < n[l]; ++i) {
      double p[4], t[4], gd[4], alpha = NAN;
      for (int k = 0; k < 4; ++k) p[k] = pb[l][4 * i + k], t[k] = tb[l][4 * i + k];
      EXPECT_NEAR(out[l][i], ciou_ref(p, t, 1e-7, &alpha), 2e-6);
      lib_grad(p, t, 1e-7, 0.5, gd);
      for (int k = 0; k < 4; ++k) EXPECT_NEAR(gp[l][4 * i + k], gd[k], 1e-5 * (1 + std::fabs(gd[k])));
    }
  EXPECT_THROW(yt::ciou_forward_cpu(yt::FloatType::kFloat16, lv, 3, outs, 1e-7), yolocu::Error);
}

// ---- EMA / SGD ------------------------------------------------------------------------------------
std::vector<std::vector<float>> random_lists(const std::vector<int64_t>& numel, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<std::vector<float>> r;
  for (int64_t n : numel) {
    r.emplace_back(n);
    for (auto& v : r.back()) v = nd(rng);
  }
  return r;
}

TEST(training_MultiTensorCpu, EmaMatchesUltralyticsLoop) {
  const std::vector<int64_t> numel = {1, 7, 300, 4096 + 5};
  auto ema = random_lists(numel, 1), model = random_lists(numel, 2);
  auto expect = ema;
  std::vector<float*> e;
  std::vector<const float*> m;
  for (size_t i = 0; i < numel.size(); ++i) e.push_back(ema[i].data()), m.push_back(model[i].data());
  for (int step = 1; step <= 3; ++step) {
    const double d = 0.9999 * (1 - std::exp(-step / 2000.0));
    yt::ema_update_cpu(e.data(), m.data(), numel.data(), static_cast<int>(numel.size()), d);
    for (size_t t = 0; t < numel.size(); ++t)
      for (int64_t i = 0; i < numel[t]; ++i) {
        float v = expect[t][i];
        v = v * static_cast<float>(d);                           // v *= d
        const float scaled = static_cast<float>(1 - d) * model[t][i];  // (1 - d) * m
        v = v + scaled;                                          // v += ...
        expect[t][i] = v;
      }
  }
  EXPECT_EQ(ema, expect);
}

TEST(training_MultiTensorCpu, SgdMatchesTorchAlgorithmOverWarmupSteps) {
  // Three YOLOv5 groups: biases (no decay), weights (decay), BN weights (no decay), Nesterov.
  const std::vector<int64_t> numel = {16, 300, 16, 9};
  const std::vector<int> group = {0, 1, 2, 1};
  auto p = random_lists(numel, 4), buf = random_lists(numel, 5);
  auto pe = p;
  std::vector<std::vector<double>> be(numel.size());
  for (size_t t = 0; t < numel.size(); ++t) be[t].assign(numel[t], 0.0);
  std::vector<float*> pp, bp;
  for (size_t t = 0; t < numel.size(); ++t) pp.push_back(p[t].data()), bp.push_back(buf[t].data());
  for (int step = 0; step < 5; ++step) {
    auto grad = random_lists(numel, 100 + step);
    std::vector<const float*> gp;
    for (auto& g : grad) gp.push_back(g.data());
    const double mom = 0.8 + 0.03 * step;  // warm-up ramps momentum and lr
    yt::SgdGroup groups[3] = {{0.1 - 0.01 * step, mom, 0, 0, true},
                              {0.001 * (step + 1), mom, 0, 5e-4, true},
                              {0.001 * (step + 1), mom, 0, 0, true}};
    yt::sgd_step_cpu(pp.data(), gp.data(), bp.data(), numel.data(), group.data(), static_cast<int>(numel.size()),
                     groups, 3, step == 0);
    // torch.optim.SGD in double: d_p = g + wd p; buf = first ? d_p : mu buf + d_p; d_p += mu buf; p -= lr d_p
    for (size_t t = 0; t < numel.size(); ++t) {
      const yt::SgdGroup& s = groups[group[t]];
      for (int64_t i = 0; i < numel[t]; ++i) {
        double d_p = double(grad[t][i]) + s.weight_decay * pe[t][i];
        be[t][i] = step == 0 ? d_p : s.momentum * be[t][i] + d_p;
        d_p += s.momentum * be[t][i];
        pe[t][i] = static_cast<float>(pe[t][i] - s.lr * d_p);
      }
    }
  }
  for (size_t t = 0; t < numel.size(); ++t)
    for (int64_t i = 0; i < numel[t]; ++i) {
      EXPECT_NEAR(p[t][i], pe[t][i], 2e-6 * (1 + std::fabs(pe[t][i])));
      EXPECT_NEAR(buf[t][i], be[t][i], 2e-5 * (1 + std::fabs(be[t][i])));
    }
}

TEST(training_MultiTensorCpu, SgdWithoutMomentumOrNesterov) {
  std::vector<float> p = {1.f, -2.f}, g = {0.5f, 0.25f}, b = {7.f, 7.f};
  float* pp[] = {p.data()};
  const float* gp[] = {g.data()};
  float* bp[] = {b.data()};
  const int64_t n[] = {2};
  yt::SgdGroup plain{0.1, 0.0, 0.0, 0.01, false};
  yt::sgd_step_cpu(pp, gp, bp, n, nullptr, 1, &plain, 1, false);
  EXPECT_FLOAT_EQ(p[0], 1.f - 0.1f * (0.5f + 0.01f * 1.f));
  EXPECT_FLOAT_EQ(p[1], -2.f - 0.1f * (0.25f + 0.01f * -2.f));
  EXPECT_EQ(b[0], 7.f);  // no momentum: buffer untouched
  std::vector<float> q = {1.f}, h = {2.f}, c = {3.f};
  float* qp[] = {q.data()};
  const float* hp[] = {h.data()};
  float* cp[] = {c.data()};
  const int64_t one[] = {1};
  yt::SgdGroup heavy{0.5, 0.9, 0.1, 0.0, false};  // classic momentum with dampening
  yt::sgd_step_cpu(qp, hp, cp, one, nullptr, 1, &heavy, 1, false);
  EXPECT_FLOAT_EQ(c[0], 0.9f * 3.f + 0.9f * 2.f);
  EXPECT_FLOAT_EQ(q[0], 1.f - 0.5f * c[0]);
}

}  // namespace

// The own:dw tactic family (own_dwconv.cpp, own_dwconv_kernel.cu): depthwise convolutions
// (group == c == k).
// - What it offers (host-only: runs without a GPU): candidates for depthwise layers only, ids that
//   re-create their tactic through make_tactic, nothing while TacticLimits::own_depthwise is off,
//   the vector width chosen for channels, pitch and alignment.
// - Every candidate against a direct convolution in double on the host: 3x3 stride 1 and 2, 5x5,
//   7x7, a 3x5 filter with dilation 2, odd image sizes, channels not a multiple of 8 (12, 7) and
//   more than one channel block (256), batch 1 and 5, bias, SiLU and residual on and off, a
//   pitched output (the channels between slices stay untouched); fp16 and fp32.
//   Tolerance: both sides see the same inputs (fp16-rounded for fp16); the kernel accumulates in
//   fp32 and rounds once: fp16 rel L2 <= 2e-3, |d| <= 1e-2 * max(1, |ref|) (a rounding is 2^-11);
//   fp32 rel L2 <= 1e-5, |d| <= 1e-4 * max(1, |ref|) (as the tuner's check).
// - Every candidate through the tuner's own check (cuDNN's implicit GEMM + epilogue as reference,
//   check_verdict's bounds), and the tuner choosing among the candidates of all families.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "conv_tactic_test_util.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/own_dwconv_kernel.hpp"
#include "engine/cuda/tactics/tune_select.hpp"
#include "engine/cuda/tactics/tuner.hpp"
#include "test_util.hpp"

namespace yolocu::engine {
namespace {

struct DwShape {
  int n, c, h, w, r, s, str, pad_h, pad_w, dil;
  bool bias, silu, residual;
  int yp;  // output pitch (0: packed)
};

ConvProblem dw_problem(const DwShape& d, bool half) {
  ConvProblem pb;
  pb.n = d.n;
  pb.c = pb.k = pb.group = d.c;
  pb.h = d.h;
  pb.w = d.w;
  pb.r = d.r;
  pb.s = d.s;
  pb.pad_h = d.pad_h;
  pb.pad_w = d.pad_w;
  pb.str_h = pb.str_w = d.str;
  pb.dil_h = pb.dil_w = d.dil;
  pb.p = (d.h + 2 * d.pad_h - d.dil * (d.r - 1) - 1) / d.str + 1;
  pb.q = (d.w + 2 * d.pad_w - d.dil * (d.s - 1) - 1) / d.str + 1;
  pb.half = half;
  pb.bias = d.bias;
  pb.silu = d.silu;
  pb.residual = d.residual;
  pb.yp = d.yp;
  return pb;
}

using conv_test::Cudnn;
using conv_test::DeviceBuf;
using conv_test::download;
using conv_test::random_values;

// A layer's inputs on the host: x NHWC, w [c][r][s], bias [c], residual NHWC [n, p, q, c].
struct DwData {
  std::vector<float> x, w, bias, res;
};
DwData make_data(const ConvProblem& pb) {
  DwData d;
  d.x = random_values(size_t(pb.n) * pb.h * pb.w * pb.c, 11, -1.f, 1.f, pb.half);
  d.w = random_values(size_t(pb.c) * pb.r * pb.s, 12, -0.5f, 0.5f, pb.half);
  d.bias = random_values(size_t(pb.c), 13, -0.3f, 0.3f, false);
  d.res = random_values(size_t(pb.n) * pb.p * pb.q * pb.c, 14, -1.f, 1.f, pb.half);
  return d;
}

// The fused layer in double, packed [n, p, q, c].
std::vector<double> reference(const ConvProblem& pb, const DwData& d) {
  std::vector<double> y(size_t(pb.n) * pb.p * pb.q * pb.c);
  for (int n = 0; n < pb.n; ++n)
    for (int oy = 0; oy < pb.p; ++oy)
      for (int ox = 0; ox < pb.q; ++ox)
        for (int c = 0; c < pb.c; ++c) {
          double acc = 0;
          for (int i = 0; i < pb.r; ++i)
            for (int k = 0; k < pb.s; ++k) {
              const int iy = oy * pb.str_h - pb.pad_h + i * pb.dil_h, ix = ox * pb.str_w - pb.pad_w + k * pb.dil_w;
              if (iy < 0 || iy >= pb.h || ix < 0 || ix >= pb.w) continue;
              acc += double(d.x[((size_t(n) * pb.h + iy) * pb.w + ix) * pb.c + c]) *
                     double(d.w[(size_t(c) * pb.r + i) * pb.s + k]);
            }
          if (pb.bias) acc += d.bias[size_t(c)];
          if (pb.silu) acc = acc / (1.0 + std::exp(-acc));
          const size_t o = ((size_t(n) * pb.p + oy) * pb.q + ox) * pb.c + c;
          if (pb.residual) acc += d.res[o];
          y[o] = acc;
        }
  return y;
}

// Runs `t` on the problem's data and compares it with reference().
void expect_matches(const ConvProblem& pb, const ConvTactic& t) {
  const DwData d = make_data(pb);
  const int yp = pb.y_pitch();
  const size_t pixels = size_t(pb.n) * pb.p * pb.q, ny = pixels * yp;
  DeviceBuf dx(d.x, pb.half), dw(d.w, pb.half), db(d.bias, false), dr(d.res, pb.half);
  DeviceBuf dy(std::vector<float>(ny, -7.f), pb.half);
  ConvBuffers b;
  b.x = dx.p;
  b.w = dw.p;
  b.bias = pb.bias ? static_cast<const float*>(db.p) : nullptr;
  b.residual = pb.residual ? dr.p : nullptr;
  b.y = dy.p;
  t.run(nullptr, b, nullptr);
  const std::string what = t.id() + " " + pb.signature() + " n" + std::to_string(pb.n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  const std::vector<float> y = download(dy.p, ny, pb.half);
  const std::vector<double> ref = reference(pb, d);
  conv_test::expect_close(y, yp, ref, pb.c, pixels, pb.half, what);
}

const DwShape kShapes[] = {
    // n, c, h, w, r, s, str, pad_h, pad_w, dil, bias, silu, residual, yp
    {1, 64, 20, 20, 3, 3, 1, 1, 1, 1, true, true, false, 0},     // YOLO11's head DWConv, 20x20 level
    {5, 80, 13, 17, 3, 3, 1, 1, 1, 1, true, true, false, 0},     // its 80-channel one, odd sizes
    {5, 64, 19, 21, 3, 3, 2, 1, 1, 1, true, true, false, 0},     // stride 2 (SCDown-like)
    {1, 128, 9, 9, 3, 3, 1, 1, 1, 1, true, false, true, 0},      // the attention's positional conv + residual
    {1, 12, 9, 11, 5, 5, 1, 2, 2, 1, true, false, true, 0},      // 5x5, 12 channels (vectors of 2 / 4)
    {5, 7, 10, 10, 3, 3, 1, 1, 1, 1, false, true, true, 0},      // 7 channels (one per thread), no bias
    {1, 256, 10, 10, 7, 7, 1, 3, 3, 1, true, true, false, 0},    // 7x7, two channel blocks
    {2, 24, 15, 16, 3, 5, 2, 1, 2, 2, true, true, false, 0},     // 3x5, stride 2, dilation 2
    {1, 40, 3, 2, 3, 3, 1, 1, 1, 1, true, true, true, 0},        // fewer pixels than one thread column
    {2, 64, 11, 13, 3, 3, 1, 1, 1, 1, true, true, false, 96},    // a copy-free Concat's slice
    {1, 6, 8, 8, 3, 3, 2, 0, 0, 1, true, false, false, 10},      // no padding, pitch 10 (vectors of 2)
};

TEST(OwnDwConv, OffersWhatItCanRun) {
  TacticLimits on, off;
  off.own_depthwise = false;
  for (bool half : {true, false}) {
    const ConvProblem pb = dw_problem(kShapes[0], half);
    const std::vector<TacticPtr> cands = own_dwconv_candidates(pb, on);
    ASSERT_EQ(cands.size(), 4u) << pb.signature();  // three tiles and the 3x3 stride-1 window
    for (const TacticPtr& t : cands) {
      EXPECT_EQ(t->id().rfind("own:dw-", 0), 0u) << t->id();
      EXPECT_EQ(family_of(t->id()), TacticFamily::kOwn) << t->id();
      EXPECT_EQ(t->workspace(), 0u);
      EXPECT_EQ(t->kernels(), 1);
      const TacticPtr again = make_tactic(nullptr, pb, t->id(), on);
      ASSERT_TRUE(again) << t->id();
      EXPECT_EQ(again->id(), t->id());
      EXPECT_FALSE(make_tactic(nullptr, pb, t->id(), off)) << "a cached own:dw id while the family is off";
    }
    EXPECT_TRUE(own_dwconv_candidates(pb, off).empty());
    EXPECT_FALSE(make_tactic(nullptr, pb, "own:dw-q3r3", on));
    ConvProblem s2 = pb;  // stride 2: no window tile
    s2.str_h = s2.str_w = 2;
    s2.p = s2.q = 10;
    EXPECT_EQ(own_dwconv_candidates(s2, on).size(), 3u);
    EXPECT_FALSE(make_tactic(nullptr, s2, "own:dw-q4r4w", on));
    EXPECT_TRUE(make_tactic(nullptr, s2, "own:dw-q4r4", on));
  }
  auto refused = [&](const char* what, void (*change)(ConvProblem&)) {
    ConvProblem p = dw_problem(kShapes[0], true);
    change(p);
    EXPECT_FALSE(own_dwconv_shape_ok(p)) << what;
    EXPECT_TRUE(own_dwconv_candidates(p, on).empty()) << what;
    EXPECT_FALSE(make_tactic(nullptr, p, "own:dw-q1r8", on)) << what;
  };
  refused("groups 1", [](ConvProblem& p) { p.group = 1; });
  refused("groups of 2 channels", [](ConvProblem& p) { p.group = p.c / 2; });
  refused("two outputs per channel", [](ConvProblem& p) { p.k = 2 * p.c; });
  refused("a padded output", [](ConvProblem& p) { p.k = p.c + 8; });
  refused("an 11x11 filter", [](ConvProblem& p) { p.r = p.s = 11; });
  refused("a pitch below c", [](ConvProblem& p) { p.yp = p.c / 2; });
  refused("stride 0", [](ConvProblem& p) { p.str_w = 0; });
  refused("a channel view as input", [](ConvProblem& p) { p.xp = p.c + 16; });
  refused("a channel view as residual", [](ConvProblem& p) {
    p.residual = true;
    p.rp = p.k + 16;
  });
}

TEST(OwnDwConv, VectorWidth) {
  DwConvArgs a;
  a.n = 1; a.c = 64; a.h = a.w_ = a.p = a.q = 8; a.r = a.s = 3; a.pad_h = a.pad_w = 1;
  EXPECT_EQ(dwconv_vector(a), 8);
  a.y_pitch = 66;  // a pitch of 66: pairs
  EXPECT_EQ(dwconv_vector(a), 2);
  a.y_pitch = 0;
  a.c = 12;
  EXPECT_EQ(dwconv_vector(a), 2);
  a.c = 7;
  EXPECT_EQ(dwconv_vector(a), 1);
  a.half = false;
  a.c = 12;
  EXPECT_EQ(dwconv_vector(a), 4);
  a.c = 64;
  alignas(16) static char buf[64];
  a.x = buf + 8;  // 8-byte aligned input: pairs of floats
  EXPECT_EQ(dwconv_vector(a), 2);
  a.x = buf;
  a.residual = buf + 4;
  EXPECT_EQ(dwconv_vector(a), 1);
  EXPECT_EQ(dwconv_unsupported(a), "");
  a.r = 10;
  EXPECT_NE(dwconv_unsupported(a), "");
}

TEST(OwnDwConv, MatchesDirectConvolution) {
  YOLOCU_REQUIRE_GPU();
  int ran = 0;
  for (bool half : {true, false})
    for (const DwShape& s : kShapes) {
      const ConvProblem pb = dw_problem(s, half);
      const std::vector<TacticPtr> cands = own_dwconv_candidates(pb, TacticLimits{});
      const bool window = s.r == 3 && s.s == 3 && s.str == 1 && s.dil == 1;
      EXPECT_EQ(cands.size(), window ? 4u : 3u) << pb.signature();
      for (const TacticPtr& t : cands) {
        expect_matches(pb, *t);
        ++ran;
      }
    }
  std::printf("[ own:dw ] %d (shape, dtype, tile) cases\n", ran);
}

// The tuner's check for one candidate on this problem's data (conv_test::tuner_check).
CheckVerdict tuner_check(cudnnHandle_t cudnn, const ConvProblem& pb, const ConvTactic& t) {
  const DwData d = make_data(pb);
  DeviceBuf dx(d.x, pb.half), dw(d.w, pb.half), db(d.bias, false), dr(d.res, pb.half);
  ConvBuffers b;
  b.x = dx.p;
  b.w = dw.p;
  b.bias = pb.bias ? static_cast<const float*>(db.p) : nullptr;
  b.residual = pb.residual ? dr.p : nullptr;
  return conv_test::tuner_check(cudnn, pb, t, b);
}

TEST(OwnDwConv, PassesTheTunersCheck) {
  YOLOCU_REQUIRE_GPU();
  Cudnn cudnn;
  ASSERT_TRUE(cudnn.h);
  int checked = 0;
  for (bool half : {true, false})
    for (const DwShape& s : {kShapes[1], kShapes[2], kShapes[9], kShapes[4], kShapes[5]}) {
      const ConvProblem pb = dw_problem(s, half);
      for (const TacticPtr& t : own_dwconv_candidates(pb, TacticLimits{})) {
        CheckVerdict v;
        try {
          v = tuner_check(cudnn.h, pb, *t);
        } catch (const Error& e) {
          // (cuDNN's implicit GEMM may refuse the odd channel counts: the direct convolution
          // above covers them)
          std::printf("[ own:dw ] no cuDNN reference for %s: %s\n", pb.signature().c_str(), e.what());
          break;
        }
        EXPECT_TRUE(v.ok) << t->id() << " " << pb.signature() << " n" << pb.n << ": rel L2 " << v.rel_l2
                          << ", max |d| " << v.max_diff;
        ++checked;
      }
    }
  // the 3x3 layers with channels a multiple of 8 (YOLO11's) are always checked: 3 shapes x 3 or 4
  // tiles x 2 dtypes
  EXPECT_GE(checked, 22);
}

// The tuner on a YOLO11-sized depthwise layer (batch 8, 40x40, 64 channels): every family's
// candidates checked and timed, the four own:dw ones among them (each passing the check), and
// without the family the choice is another family's.
TEST(OwnDwConv, TunerChoosesAmongThem) {
  YOLOCU_REQUIRE_GPU();
  Cudnn cudnn;
  ASSERT_TRUE(cudnn.h);
  const ConvProblem pb = dw_problem({8, 64, 40, 40, 3, 3, 1, 1, 1, 1, true, true, false, 0}, true);
  const DwData d = make_data(pb);
  const size_t es = 2, ny = size_t(pb.n) * pb.p * pb.q * pb.k;
  TacticLimits lim;
  lim.workspace = size_t{64} << 20;
  DeviceBuf dx(d.x, true), dw(d.w, true), db(d.bias, false), dy(ny * es), dref(ny * es), ws(lim.workspace);
  ConvBuffers b;
  b.x = dx.p;
  b.w = dw.p;
  b.bias = static_cast<const float*>(db.p);
  b.y = dy.p;
  b.ws = ws.p;
  b.ws_bytes = lim.workspace;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (bool with_dw : {true, false}) {
    forget_process_tactics();
    lim.own_depthwise = with_dw;
    Tuner tuner(cudnn.h, lim, nullptr, 0, stream);
    const TunedLayer out = tuner.choose(pb, b, dref.p);
    ASSERT_TRUE(out.tactic);
    const TuneBreakdown& bd = tuner.stats().breakdown;
    std::printf("[ own:dw ] %s: %d candidates, %d rejected, chosen %s (%.1f us)\n",
                with_dw ? "with the family" : "without it", out.candidates, out.rejected, out.tactic->id().c_str(),
                out.us);
    EXPECT_EQ(bd.built[static_cast<int>(TacticFamily::kOwn)], with_dw ? 4 : 0);
    EXPECT_GT(out.us, 0);
    const bool dw_won = out.tactic->id().rfind("own:dw-", 0) == 0;
    if (!with_dw) {
      EXPECT_FALSE(dw_won) << out.tactic->id();
    } else {
      // The check passes for each of them (a rejected one would show here), and the chosen
      // tactic runs.
      for (const TacticPtr& t : own_dwconv_candidates(pb, lim)) EXPECT_TRUE(tuner_check(cudnn.h, pb, *t).ok) << t->id();
      out.tactic->run(cudnn.h, b, stream);
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace yolocu::engine

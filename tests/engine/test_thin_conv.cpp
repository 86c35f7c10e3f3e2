// The own:thin tactic family (thin_conv.cpp, thin_conv_kernel.cu): 3x3 convolutions of 8 to 32
// input channels.
// - What it refuses (host-only: runs without a GPU): other filter sizes, dilation, groups, fp32,
//   channel counts outside {8, 16, 32} / {8, 16, 32, 64}, stride 3, pitches that are not whole
//   16-byte chunks, and everything while TacticLimits::own_thin is off.
// - Every candidate against a direct convolution in double on the host: YOLO11's and YOLOv8's
//   bottleneck layers (16 -> 8 reading a Split view, 8 -> 16 with the residual), the 16 -> 32
//   stride-2 layer, 32 -> 64 into a copy-free Concat's slice, pitched input and residual with
//   stride 2 and no bias, no padding, a 1x1 image, odd sizes (partial tiles), batches of 1 to 3.
//   Tolerance: both sides see the same fp16 inputs; the kernel multiplies in fp16 x fp16 -> fp32,
//   sums in fp32 and rounds once: rel L2 <= 2e-3, |d| <= 1e-2 * max(1, |ref|) (as the depthwise
//   family's test); the channels of a pitched output outside the layer stay untouched.
// - Every candidate through the tuner's check (cuDNN as the reference), its id re-creating it
//   through make_tactic, and the tuner choosing among the candidates of all families.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "conv_tactic_test_util.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/thin_conv_kernel.hpp"
#include "engine/cuda/tactics/tuner.hpp"
#include "test_util.hpp"

namespace yolocu::engine {
namespace {

using conv_test::Cudnn;
using conv_test::DeviceBuf;
using conv_test::download;
using conv_test::random_values;

struct Shape {
  int n, c, k, h, w, str, pad;
  bool bias, silu, residual;
  int xp, yp, rp;  // pixel pitches (0: packed)
};

ConvProblem problem(const Shape& d) {
  ConvProblem pb;
  pb.n = d.n;
  pb.c = d.c;
  pb.k = d.k;
  pb.h = d.h;
  pb.w = d.w;
  pb.r = pb.s = 3;
  pb.pad_h = pb.pad_w = d.pad;
  pb.str_h = pb.str_w = d.str;
  pb.p = (d.h + 2 * d.pad - 3) / d.str + 1;
  pb.q = (d.w + 2 * d.pad - 3) / d.str + 1;
  pb.half = true;
  pb.bias = d.bias;
  pb.silu = d.silu;
  pb.residual = d.residual;
  pb.xp = d.xp;
  pb.yp = d.yp;
  pb.rp = d.rp;
  return pb;
}

// x [n, h, w, x_pitch], w [k, 3, 3, c], bias [k], residual [n, p, q, r_pitch] (fp16-rounded).
struct Data {
  std::vector<float> x, w, bias, res;
};
Data make_data(const ConvProblem& pb) {
  Data d;
  d.x = random_values(size_t(pb.n) * pb.h * pb.w * pb.x_pitch(), 21, -1.f, 1.f, true);
  d.w = random_values(size_t(pb.k) * 9 * pb.c, 22, -0.25f, 0.25f, true);
  d.bias = random_values(size_t(pb.k), 23, -0.3f, 0.3f, false);
  d.res = random_values(size_t(pb.n) * pb.p * pb.q * pb.r_pitch(), 24, -1.f, 1.f, true);
  return d;
}

// The fused layer in double, packed [n, p, q, k].
std::vector<double> reference(const ConvProblem& pb, const Data& d) {
  std::vector<double> y(size_t(pb.n) * pb.p * pb.q * pb.k);
  for (int n = 0; n < pb.n; ++n)
    for (int oy = 0; oy < pb.p; ++oy)
      for (int ox = 0; ox < pb.q; ++ox) {
        const size_t px = (size_t(n) * pb.p + oy) * pb.q + ox;
        for (int k = 0; k < pb.k; ++k) {
          double acc = 0;
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              const int iy = oy * pb.str_h - pb.pad_h + i, ix = ox * pb.str_w - pb.pad_w + j;
              if (iy < 0 || iy >= pb.h || ix < 0 || ix >= pb.w) continue;
              const float* xv = &d.x[((size_t(n) * pb.h + iy) * pb.w + ix) * pb.x_pitch()];
              const float* wv = &d.w[((size_t(k) * 3 + i) * 3 + j) * pb.c];
              for (int c = 0; c < pb.c; ++c) acc += double(xv[c]) * double(wv[c]);
            }
          if (pb.bias) acc += d.bias[size_t(k)];
          if (pb.silu) acc = acc / (1.0 + std::exp(-acc));
          if (pb.residual) acc += d.res[px * pb.r_pitch() + k];
          y[px * pb.k + k] = acc;
        }
      }
  return y;
}

void expect_matches(const ConvProblem& pb, const ConvTactic& t) {
  const Data d = make_data(pb);
  const int yp = pb.y_pitch();
  const size_t pixels = size_t(pb.n) * pb.p * pb.q, ny = pixels * yp;
  DeviceBuf dx(d.x, true), dw(d.w, true), db(d.bias, false), dr(d.res, true);
  DeviceBuf dy(std::vector<float>(ny, -7.f), true);
  ConvBuffers b;
  b.x = dx.p;
  b.w = dw.p;
  b.bias = pb.bias ? static_cast<const float*>(db.p) : nullptr;
  b.residual = pb.residual ? dr.p : nullptr;
  b.y = dy.p;
  t.run(nullptr, b, nullptr);
  const std::string what = t.id() + " " + pb.signature() + " n" + std::to_string(pb.n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  const std::vector<float> y = download(dy.p, ny, true);
  const std::vector<double> ref = reference(pb, d);
  conv_test::expect_close(y, yp, ref, pb.k, pixels, pb.half, what);
}

const Shape kShapes[] = {
    // n, c, k, h, w, str, pad, bias, silu, residual, xp, yp, rp
    {2, 16, 8, 21, 37, 1, 1, true, true, false, 32, 0, 0},   // C3k2 m.0 cv1 reading a Split view
    {1, 8, 16, 19, 23, 1, 1, true, true, true, 0, 0, 0},     // its cv2 with the shortcut
    {3, 16, 32, 33, 45, 2, 1, true, true, false, 0, 0, 0},   // 16 -> 32 stride 2, odd input
    {1, 32, 64, 10, 70, 1, 1, true, false, false, 0, 96, 0},  // into a copy-free Concat's slice
    {2, 32, 32, 17, 9, 2, 1, false, true, true, 40, 0, 48},  // pitched x and residual, no bias
    {1, 16, 16, 5, 3, 1, 0, true, true, false, 0, 0, 0},     // no padding
    {1, 8, 8, 1, 1, 1, 1, true, true, false, 0, 0, 0},       // a 1x1 image
    {2, 16, 16, 40, 40, 1, 1, true, true, true, 0, 24, 0},   // YOLOv8's C2f bottleneck, pitched y
};

TEST(ThinConv, RefusesWhatItCannotRun) {
  const ConvProblem ok = problem(kShapes[0]);
  const auto refused = [&](ConvProblem pb, const char* what) {
    EXPECT_FALSE(thin_conv_shape_ok(pb)) << what;
    EXPECT_TRUE(thin_conv_candidates(pb, TacticLimits{}).empty()) << what;
  };
  ConvProblem pb = ok;
  pb.r = pb.s = 5;
  refused(pb, "5x5");
  pb = ok;
  pb.dil_h = pb.dil_w = 2;
  refused(pb, "dilation 2");
  pb = ok;
  pb.group = 2;
  refused(pb, "groups");
  pb = ok;
  pb.half = false;
  refused(pb, "fp32");
  pb = ok;
  pb.c = 24;
  pb.xp = 0;
  refused(pb, "24 input channels");
  pb = ok;
  pb.k = 48;
  refused(pb, "48 output channels");
  pb = ok;
  pb.str_h = pb.str_w = 3;
  refused(pb, "stride 3");
  pb = ok;
  pb.str_w = 2;
  refused(pb, "different strides");
  pb = ok;
  pb.xp = 20;
  refused(pb, "an input pitch of 20");
  TacticLimits off;
  off.own_thin = false;
  EXPECT_TRUE(thin_conv_candidates(ok, off).empty());
  EXPECT_EQ(make_thin_conv(ok, "own:thin-tw32", off), nullptr);
}

TEST(ThinConv, MatchesDirectConvolution) {
  YOLOCU_REQUIRE_GPU();
  int ran = 0;
  for (const Shape& s : kShapes) {
    const ConvProblem pb = problem(s);
    const std::vector<TacticPtr> cands = thin_conv_candidates(pb, TacticLimits{});
    ASSERT_FALSE(cands.empty()) << pb.signature();
    for (const TacticPtr& t : cands) {
      expect_matches(pb, *t);
      TacticPtr again = make_tactic(nullptr, pb, t->id(), TacticLimits{});
      ASSERT_TRUE(again) << t->id();
      EXPECT_EQ(again->id(), t->id());
      ++ran;
    }
  }
  std::printf("[ own:thin ] %d (shape, tile) cases\n", ran);
  EXPECT_GE(ran, 16);
}

TEST(ThinConv, PassesTheTunersCheck) {
  YOLOCU_REQUIRE_GPU();
  Cudnn cudnn;
  ASSERT_TRUE(cudnn.h);
  int checked = 0;
  for (const Shape& s : {kShapes[1], kShapes[2], kShapes[3], kShapes[5]}) {  // packed inputs: cuDNN's reference reads them
    const ConvProblem pb = problem(s);
    const Data d = make_data(pb);
    DeviceBuf dx(d.x, true), dw(d.w, true), db(d.bias, false), dr(d.res, true);
    ConvBuffers b;
    b.x = dx.p;
    b.w = dw.p;
    b.bias = pb.bias ? static_cast<const float*>(db.p) : nullptr;
    b.residual = pb.residual ? dr.p : nullptr;
    for (const TacticPtr& t : thin_conv_candidates(pb, TacticLimits{})) {
      const CheckVerdict v = conv_test::tuner_check(cudnn.h, pb, *t, b);
      EXPECT_TRUE(v.ok) << t->id() << " " << pb.signature() << ": rel L2 " << v.rel_l2 << ", max |d| " << v.max_diff;
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);
}

// The tuner on YOLO11n's 16 -> 8 bottleneck layer at batch 8 (160x160): every family's candidates
// checked and timed, the thin ones among them; without the family the choice is another family's.
TEST(ThinConv, TunerChoosesAmongThem) {
  YOLOCU_REQUIRE_GPU();
  Cudnn cudnn;
  ASSERT_TRUE(cudnn.h);
  const ConvProblem pb = problem({8, 16, 8, 160, 160, 1, 1, true, true, false, 0, 0, 0});
  const Data d = make_data(pb);
  const size_t ny = size_t(pb.n) * pb.p * pb.q * pb.k;
  TacticLimits lim;
  lim.workspace = size_t{64} << 20;
  DeviceBuf dx(d.x, true), dw(d.w, true), db(d.bias, false), dy(ny * 2), dref(ny * 2), ws(lim.workspace);
  ConvBuffers b;
  b.x = dx.p;
  b.w = dw.p;
  b.bias = static_cast<const float*>(db.p);
  b.y = dy.p;
  b.ws = ws.p;
  b.ws_bytes = lim.workspace;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (bool with_thin : {true, false}) {
    forget_process_tactics();
    lim.own_thin = with_thin;
    Tuner tuner(cudnn.h, lim, nullptr, 0, stream);
    const TunedLayer out = tuner.choose(pb, b, dref.p);
    ASSERT_TRUE(out.tactic);
    std::printf("[ own:thin ] %s: %d candidates, %d rejected, chosen %s (%.1f us)\n",
                with_thin ? "with the family" : "without it", out.candidates, out.rejected, out.tactic->id().c_str(),
                out.us);
    EXPECT_GT(out.us, 0);
    if (!with_thin) {
      EXPECT_EQ(out.tactic->id().rfind("own:thin-", 0), std::string::npos) << out.tactic->id();
    }
    out.tactic->run(cudnn.h, b, stream);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace yolocu::engine

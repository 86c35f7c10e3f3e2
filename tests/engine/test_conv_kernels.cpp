// The convolution kernels yolocu instantiates itself, each against a direct convolution on the host:
// - the own family (own_conv_kernel.cu) on the shapes it claims (own_conv_supports): strides 1 and
//   2, 1x1 / 3x3 / 6x6 filters, 16..64 output channels, odd image sizes (a partial last block),
//   bias, SiLU, residual;
// - the cutlass family (cutlass_conv.cu), every tile shape a problem admits, on YOLO-like layers;
// both with a pitched output too (a copy-free Concat's channel slice: the channels between slices
// stay untouched).
// Tolerance: both sides see the same fp16 inputs; the kernel accumulates in fp32 (another order
// than the host's double) and rounds once to fp16 (rel. 2^-11), so rel L2 <= 2e-3 and
// |d| <= 1e-2 * max(1, |ref|) are loose for a correct kernel and far below a wrong tap or channel.
// (The cutlass family reads the bias in fp16: 2^-11 of |bias| <= 0.15, inside the same bounds.)
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/own_conv_kernel.hpp"
#include "test_util.hpp"

namespace yolocu::engine {
namespace {

struct Shape {
  int n, c, h, w, k, r, str, pad;
  bool bias, silu, residual;
};

std::vector<__half> random_half(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<__half> v(n);
  for (auto& x : v) x = __float2half_rn(u(rng));
  return v;
}

template <typename T>
T* to_device(const std::vector<T>& v) {
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, v.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(d);
}

// Runs one fused convolution through `launch` (a tactic's run on these buffers) and compares it with
// a direct convolution on the host. y_pitch > k: the output is a channel slice of a wider buffer,
// and the channels between slices must stay untouched.
using Launch = std::function<void(const ConvProblem&, const ConvBuffers&)>;
ConvProblem problem_of(const Shape& sh, int y_pitch) {
  ConvProblem pb;
  pb.n = sh.n; pb.c = sh.c; pb.h = sh.h; pb.w = sh.w; pb.k = sh.k; pb.r = pb.s = sh.r;
  pb.p = (sh.h + 2 * sh.pad - sh.r) / sh.str + 1;
  pb.q = (sh.w + 2 * sh.pad - sh.r) / sh.str + 1;
  pb.pad_h = pb.pad_w = sh.pad; pb.str_h = pb.str_w = sh.str; pb.half = true;
  pb.bias = sh.bias; pb.silu = sh.silu; pb.residual = sh.residual; pb.yp = y_pitch;
  return pb;
}

void run_case(const Shape& sh, const std::string& label, const Launch& launch, int y_pitch = 0) {
  const ConvProblem pb = problem_of(sh, y_pitch);
  const int p = pb.p, q = pb.q;
  const auto x = random_half(size_t(sh.n) * sh.h * sh.w * sh.c, 1, -1.f, 1.f);
  const auto w = random_half(size_t(sh.k) * sh.r * sh.r * sh.c, 2, -0.2f, 0.2f);
  std::vector<float> bias(size_t(sh.k));
  for (int i = 0; i < sh.k; ++i) bias[size_t(i)] = 0.05f * float(i % 7) - 0.15f;
  std::vector<__half> bias_half(bias.size());
  for (size_t i = 0; i < bias.size(); ++i) bias_half[i] = __float2half_rn(bias[i]);
  const size_t ny = size_t(sh.n) * p * q * sh.k;
  const auto res = random_half(ny, 3, -1.f, 1.f);
  const int yp = y_pitch > 0 ? y_pitch : sh.k;
  const size_t ny_stored = size_t(sh.n) * p * q * yp;

  __half* dx = to_device(x);
  __half* dw = to_device(w);
  float* db = to_device(bias);
  __half* dbh = to_device(bias_half);
  __half* dr = to_device(res);
  __half* dy = to_device(std::vector<__half>(ny_stored, __float2half_rn(-7.f)));
  ConvBuffers b;
  b.x = dx; b.w = dw; b.bias = sh.bias ? db : nullptr; b.bias_act = sh.bias ? dbh : nullptr;
  b.residual = sh.residual ? dr : nullptr; b.y = dy;
  launch(pb, b);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << label;
  std::vector<__half> y(ny_stored);
  ASSERT_EQ(cudaMemcpy(y.data(), dy, ny_stored * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t touched = 0;  // stored channels beyond k (other producers' slices) written by the kernel
  for (size_t i = 0; i < ny_stored; ++i)
    if (int(i % size_t(yp)) >= sh.k && __half2float(y[i]) != -7.f) ++touched;
  EXPECT_EQ(touched, 0u) << label << " pitch " << yp;
  for (void* d : {static_cast<void*>(dx), static_cast<void*>(dw), static_cast<void*>(db), static_cast<void*>(dbh),
                  static_cast<void*>(dr), static_cast<void*>(dy)})
    cudaFree(d);

  double sq = 0, sq_ref = 0, max_d = 0, max_ref = 0;
  for (int n = 0; n < sh.n; ++n)
    for (int oy = 0; oy < p; ++oy)
      for (int ox = 0; ox < q; ++ox)
        for (int k = 0; k < sh.k; ++k) {
          double acc = 0;
          for (int r = 0; r < sh.r; ++r)
            for (int s = 0; s < sh.r; ++s) {
              const int iy = oy * sh.str - sh.pad + r, ix = ox * sh.str - sh.pad + s;
              if (iy < 0 || iy >= sh.h || ix < 0 || ix >= sh.w) continue;
              for (int c = 0; c < sh.c; ++c)
                acc += double(__half2float(x[((size_t(n) * sh.h + iy) * sh.w + ix) * sh.c + c])) *
                       double(__half2float(w[((size_t(k) * sh.r + r) * sh.r + s) * sh.c + c]));
            }
          if (sh.bias) acc += bias[size_t(k)];
          if (sh.silu) acc = acc / (1.0 + std::exp(-acc));
          const size_t pix = (size_t(n) * p + oy) * q + ox, o = pix * sh.k + k;
          if (sh.residual) acc += double(__half2float(res[o]));
          const double d = std::fabs(double(__half2float(y[pix * yp + k])) - acc);
          sq += d * d;
          sq_ref += acc * acc;
          max_d = std::max(max_d, d);
          max_ref = std::max(max_ref, std::fabs(acc));
        }
  const double rel = std::sqrt(sq / std::max(sq_ref, 1e-30));
  const std::string what = label + " n" + std::to_string(sh.n) + " c" + std::to_string(sh.c) + " " +
                           std::to_string(sh.h) + "x" + std::to_string(sh.w) + " k" + std::to_string(sh.k) + " r" +
                           std::to_string(sh.r) + " s" + std::to_string(sh.str) + " pitch" + std::to_string(yp);
  EXPECT_LE(rel, 2e-3) << what;
  EXPECT_LE(max_d, 1e-2 * std::max(1.0, max_ref)) << what;
}

// The own family's candidate with block height bm.
void run_own(const Shape& sh, int bm, int y_pitch = 0) {
  const std::string id = "own:igemm-bm" + std::to_string(bm);
  run_case(sh, id, [&](const ConvProblem& pb, const ConvBuffers& b) {
    const TacticPtr t = make_own_conv(pb, id);
    ASSERT_TRUE(t) << id << " refuses " << pb.signature();
    t->run(nullptr, b, nullptr);
  }, y_pitch);
}

TEST(OwnConv, MatchesDirectConvolution) {
  YOLOCU_REQUIRE_GPU();
  const Shape shapes[] = {
      {2, 16, 37, 41, 16, 3, 1, 1, true, true, false},   // the space-to-depth stem of yolov5n
      {2, 16, 37, 41, 32, 3, 1, 1, true, true, false},   // ... of yolov5s
      {2, 16, 38, 40, 32, 3, 2, 1, true, true, false},   // 16 -> 32, 3x3 stride 2
      {3, 32, 19, 23, 48, 1, 1, 0, true, false, true},   // 1x1 with residual, no activation
      {1, 8, 30, 30, 64, 6, 2, 2, false, true, false},   // 6x6 stride 2, 8 channels (reduction 288)
      {1, 16, 5, 7, 16, 3, 1, 1, true, true, true},      // fewer pixels than one block
  };
  for (const Shape& s : shapes)
    for (int bm : {64, 128}) run_own(s, bm);
  // Pitched outputs: the slice of a 48- / 96-channel Concat (residual still packed).
  run_own({2, 16, 37, 41, 32, 3, 1, 1, true, true, false}, 64, 48);
  run_own({3, 32, 19, 23, 48, 1, 1, 0, true, false, true}, 128, 96);
}

TEST(OwnConv, RefusesWhatItCannotRun) {
  OwnConvArgs a;
  a.n = 1; a.c = 16; a.h = a.w_ = 8; a.k = 16; a.r = a.s = 3; a.p = a.q = 8; a.pad_h = a.pad_w = 1;
  EXPECT_TRUE(own_conv_supports(a));
  OwnConvArgs b = a;
  b.c = 12;  // not a multiple of 8 channels
  EXPECT_FALSE(own_conv_supports(b));
  b = a;
  b.k = 24;  // not a multiple of 16 outputs
  EXPECT_FALSE(own_conv_supports(b));
  b = a;
  b.k = 128;  // more than 64 outputs
  EXPECT_FALSE(own_conv_supports(b));
  b = a;
  b.c = 64;  // reduction 576 > 320
  EXPECT_FALSE(own_conv_supports(b));
  b = a;
  b.y_pitch = 12;  // a pitch below k
  EXPECT_FALSE(own_conv_supports(b));
  b.y_pitch = 20;  // not a multiple of 8 (16-byte pixel rows)
  EXPECT_FALSE(own_conv_supports(b));
  b.y_pitch = 24;
  EXPECT_TRUE(own_conv_supports(b));
  ConvProblem pb;
  pb.n = 1; pb.c = 16; pb.h = pb.w = 8; pb.k = 16; pb.r = pb.s = 3; pb.p = pb.q = 8; pb.pad_h = pb.pad_w = 1;
  pb.half = false;  // fp32 engines keep FMA-only tactics
  EXPECT_TRUE(own_conv_candidates(pb).empty());
  pb.group = 2;
  pb.half = true;
  EXPECT_TRUE(own_conv_candidates(pb).empty());
}

// The cutlass family on YOLO-like layers: the space-to-depth stem, 3x3 stride 2, a 1x1 without
// activation (a Detect head's kind), a late layer at batch 1; packed and pitched outputs.
TEST(CutlassConv, MatchesDirectConvolution) {
  YOLOCU_REQUIRE_GPU();
  if (!cutlass_conv_available()) GTEST_SKIP() << "built without CUTLASS";
  TacticLimits lim;
  lim.cutlass = true;
  const Shape shapes[] = {
      {2, 16, 37, 41, 32, 3, 1, 1, true, true, false},
      {2, 32, 38, 40, 64, 3, 2, 1, true, true, false},
      {3, 64, 19, 23, 48, 1, 1, 0, true, false, false},
      {1, 128, 20, 20, 256, 3, 1, 1, true, true, false},
  };
  int ran = 0;
  for (const Shape& s : shapes)
    for (int pitch : {0, s.k + 32}) {
      const ConvProblem pb = problem_of(s, pitch);
      const std::vector<TacticPtr> cands = cutlass_conv_candidates(pb, lim);
      EXPECT_FALSE(cands.empty()) << pb.signature();
      for (const TacticPtr& c : cands) {
        const std::string id = c->id();
        run_case(s, id, [&](const ConvProblem& p, const ConvBuffers& b) {
          const TacticPtr t = make_cutlass_conv(p, id, lim);
          ASSERT_TRUE(t) << id << " refuses " << p.signature();
          t->run(nullptr, b, nullptr);
        }, pitch);
        ++ran;
      }
    }
  std::printf("[ cutlass ] %d (shape, tile) cases\n", ran);
  EXPECT_GE(ran, 8);
}

// What the cutlass family offers (host-only: no GPU needed): nothing while TacticLimits::cutlass is
// off or for what its instantiations do not cover; ids re-create their tactic.
TEST(CutlassConv, OffersWhatItCanRun) {
  if (!cutlass_conv_available()) GTEST_SKIP() << "built without CUTLASS";
  const ConvProblem pb = problem_of({8, 64, 80, 80, 128, 3, 2, 1, true, true, false}, 0);
  TacticLimits off, on;
  on.cutlass = true;
  EXPECT_TRUE(cutlass_conv_candidates(pb, off).empty());
  const std::vector<TacticPtr> cands = cutlass_conv_candidates(pb, on);
  ASSERT_FALSE(cands.empty());
  for (const TacticPtr& c : cands) {
    EXPECT_EQ(c->id().rfind("cutlass:", 0), 0u) << c->id();
    EXPECT_EQ(c->workspace(), 0u);
    EXPECT_EQ(c->kernels(), 1);
    const TacticPtr again = make_cutlass_conv(pb, c->id(), on);
    ASSERT_TRUE(again) << c->id();
    EXPECT_EQ(again->id(), c->id());
    EXPECT_FALSE(make_cutlass_conv(pb, c->id(), off)) << "a cached cutlass id while the family is off";
  }
  EXPECT_FALSE(make_cutlass_conv(pb, "cutlass:tb1x1x1-s1", on));
  auto refused = [&](const char* what, const std::function<void(ConvProblem&)>& change) {
    ConvProblem p = pb;
    change(p);
    EXPECT_FALSE(cutlass_conv_shape_ok(p)) << what;
    EXPECT_TRUE(cutlass_conv_candidates(p, on).empty()) << what;
  };
  refused("fp32", [](ConvProblem& p) { p.half = false; });
  refused("groups", [](ConvProblem& p) { p.group = 2; });
  refused("residual", [](ConvProblem& p) { p.residual = true; });
  refused("no bias", [](ConvProblem& p) { p.bias = false; });
  refused("12 input channels", [](ConvProblem& p) { p.c = 12; });
  refused("pitch 132", [](ConvProblem& p) { p.yp = 132; });
  ConvProblem pitched = pb;
  pitched.yp = 192;  // a copy-free Concat's slice
  EXPECT_FALSE(cutlass_conv_candidates(pitched, on).empty());
}

}  // namespace
}  // namespace yolocu::engine

// The INT8 convolution (conv_int8_kernel.hpp) and the fp16 <-> int8 boundary kernels
// (int8_convert.hpp) against a host reference: plain loops accumulating int8 x int8 products in
// int32, then int8_math.hpp's epilogue.
// What must match, on every instantiated tile, on YOLO-like shapes (1x1, 3x3 stride 1 and 2, the
// 6x6 stride-2 stem, C 16..256, batch 1 and 4, 20..80 pixels, odd sizes leaving partial tiles):
//   - int32 output: the accumulators bit-exact (integer sums are exact in any order);
//   - int8 and fp16 outputs: exactly equal, the float epilogue being one definition for both sides
//     (int8_math.hpp spells out every rounding step);
//   - the same outputs against an independent epilogue in double precision (std::exp, double
//     division): int8 within 1 LSB (the float and the double value may round to either side of a
//     .5 boundary) on at most 1% of the outputs, fp16 within 2^-9 relative + 1e-3 absolute; this
//     is what catches a wrong formula in int8_math.hpp itself.
// Split-K gives the same results. Output channels between k and the pitch are never written;
// refused shapes are named. The same checks run Hopper's kernels (conv_int8_sm90.hpp: 1x1 layers on
// CUTLASS's persistent GEMM, any filter on its im2col mainloop in yolocu's persistent kernel, the
// epilogue fused) on the shapes they take.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/cuda/int8/conv_int8_kernel.hpp"
#include "engine/cuda/int8/conv_int8_sm90.hpp"
#include "engine/cuda/int8/int8_convert.hpp"
#include "engine/cuda/int8/int8_math.hpp"
#include "test_util.hpp"
#include "yolocu/error.hpp"

namespace yolocu::engine {
namespace {

struct Shape {
  int n, c, h, w, k, r, stride, pad;
  bool bias, silu;
  Int8Residual res;
  Int8Out out;
  int y_pitch = 0;
  int split_k = 1;
  int p() const { return (h + 2 * pad - r) / stride + 1; }
  int q() const { return (w + 2 * pad - r) / stride + 1; }
  std::string name() const {
    const char* outs[] = {"int8", "fp16", "int32"};
    const char* ress[] = {"", " +res int8", " +res fp16"};
    return "n" + std::to_string(n) + " c" + std::to_string(c) + " " + std::to_string(h) + "x" + std::to_string(w) +
           " k" + std::to_string(k) + " " + std::to_string(r) + "x" + std::to_string(r) + " s" + std::to_string(stride) +
           (bias ? " bias" : "") + (silu ? " silu" : "") + ress[static_cast<int>(res)] + " -> " +
           outs[static_cast<int>(out)] + (y_pitch ? " pitch " + std::to_string(y_pitch) : "") +
           (split_k > 1 ? " split-k " + std::to_string(split_k) : "");
  }
};

// Device buffer, freed on scope exit.
struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 16)), cudaSuccess); }
  template <typename T>
  Dev(const std::vector<T>& h) : Dev(h.size() * sizeof(T)) {
    EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

// Everything one problem reads, random from a fixed seed; x and w over the whole int8 range.
struct Data {
  std::vector<int8_t> x, w, res8;
  std::vector<__half> res16;
  std::vector<float> scale, bias;
  float res_scale = 0.05f, y_scale = 1.f;
};

Data make_data(const Shape& sh, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> i8(-128, 127);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Data d;
  d.x.resize(static_cast<size_t>(sh.n) * sh.h * sh.w * sh.c);
  d.w.resize(static_cast<size_t>(sh.k) * sh.r * sh.r * sh.c);
  for (auto& v : d.x) v = static_cast<int8_t>(i8(rng));
  for (auto& v : d.w) v = static_cast<int8_t>(i8(rng));
  const float x_scale = 0.02f;
  for (int k = 0; k < sh.k; ++k) {
    // per-channel weight scales sized so that the pre-activation values are O(1)
    const float w_scale = (0.5f + u(rng)) / (64.f * std::sqrt(static_cast<float>(sh.r * sh.r * sh.c)));
    d.scale.push_back(x_scale * w_scale);
    d.bias.push_back(4.f * u(rng) - 2.f);
  }
  const size_t ny = static_cast<size_t>(sh.n) * sh.p() * sh.q() * sh.k;
  if (sh.res == Int8Residual::kInt8) {
    d.res8.resize(ny);
    for (auto& v : d.res8) v = static_cast<int8_t>(i8(rng));
  } else if (sh.res == Int8Residual::kHalf) {
    d.res16.resize(ny);
    for (auto& v : d.res16) v = __float2half_rn(4.f * u(rng) - 2.f);
  }
  return d;
}

// The int32 accumulators, [n, p, q, k].
std::vector<int32_t> host_acc(const Shape& sh, const Data& d) {
  const int p = sh.p(), q = sh.q();
  std::vector<int32_t> acc(static_cast<size_t>(sh.n) * p * q * sh.k);
  size_t o = 0;
  for (int n = 0; n < sh.n; ++n)
    for (int oy = 0; oy < p; ++oy)
      for (int ox = 0; ox < q; ++ox)
        for (int k = 0; k < sh.k; ++k, ++o) {
          int32_t a = 0;
          for (int ky = 0; ky < sh.r; ++ky)
            for (int kx = 0; kx < sh.r; ++kx) {
              const int iy = oy * sh.stride - sh.pad + ky, ix = ox * sh.stride - sh.pad + kx;
              if (iy < 0 || iy >= sh.h || ix < 0 || ix >= sh.w) continue;
              const int8_t* xp = &d.x[((static_cast<size_t>(n) * sh.h + iy) * sh.w + ix) * sh.c];
              const int8_t* wp = &d.w[((static_cast<size_t>(k) * sh.r + ky) * sh.r + kx) * sh.c];
              for (int c = 0; c < sh.c; ++c) a += int32_t{xp[c]} * int32_t{wp[c]};
            }
          acc[o] = a;
        }
  return acc;
}

// The float value before the output conversion: int8_math.hpp's (exact) or double precision.
float epilogue_f32(const Shape& sh, const Data& d, size_t o, int32_t acc) {
  const size_t k = o % static_cast<size_t>(sh.k);
  float v = int8::conv_value(acc, d.scale[k], sh.bias ? d.bias[k] : 0.f, sh.silu);
  if (sh.res == Int8Residual::kInt8) v = int8::add_residual_i8(v, d.res8[o], d.res_scale);
  if (sh.res == Int8Residual::kHalf) v = int8::add_residual_f32(v, __half2float(d.res16[o]));
  return v;
}
double epilogue_f64(const Shape& sh, const Data& d, size_t o, int32_t acc) {
  const size_t k = o % static_cast<size_t>(sh.k);
  double v = static_cast<double>(acc) * d.scale[k] + (sh.bias ? d.bias[k] : 0.0);
  if (sh.silu) v = v / (1.0 + std::exp(-v));
  if (sh.res == Int8Residual::kInt8) v += static_cast<double>(d.res8[o]) * d.res_scale;
  if (sh.res == Int8Residual::kHalf) v += static_cast<double>(__half2float(d.res16[o]));
  return v;
}

struct GpuOut {
  std::vector<uint8_t> bytes;  // [n, p, q, pitch] elements of the output type
  size_t elem = 1;
};

constexpr uint8_t kFill = 0xA5;  // the output buffer's bytes before the launch

// One kernel under test: its name and its launch on the default stream.
struct Runner {
  std::string id;
  std::function<void(const Int8ConvArgs&)> run;
};
std::vector<Runner> mma_tiles() {
  std::vector<Runner> r;
  for (int t = 0; t < static_cast<int>(int8_conv_tiles().size()); ++t)
    r.push_back({int8_tile_id(int8_conv_tiles()[static_cast<size_t>(t)]),
                 [t](const Int8ConvArgs& a) { int8_conv_run(a, t, nullptr); }});
  return r;
}
std::vector<Runner> sm90_kernels() {
  std::vector<Runner> r;
  for (int k = 0; k < static_cast<int>(int8_sm90_kernels().size()); ++k)
    r.push_back({int8_sm90_kernels()[static_cast<size_t>(k)], [k](const Int8ConvArgs& a) { int8_sm90_run(a, k, nullptr); }});
  return r;
}
// Hopper's im2col kernels alone (the sm90 kernels whose id says so).
std::vector<Runner> im2col_kernels() {
  std::vector<Runner> r;
  for (Runner& k : sm90_kernels())
    if (k.id.find("im2col") != std::string::npos) r.push_back(std::move(k));
  return r;
}

// A second output for run_gpu (Int8ConvArgs::y2): its form, scale and pitch; what it got.
struct SecondOut {
  Int8Out out = Int8Out::kHalf;
  float scale = 1.f;
  int pitch = 0;
  GpuOut got;
};

GpuOut run_gpu(const Shape& sh, const Data& d, const Runner& runner, SecondOut* second = nullptr) {
  Int8ConvArgs a;
  a.n = sh.n, a.c = sh.c, a.h = sh.h, a.w_ = sh.w, a.k = sh.k, a.r = a.s = sh.r, a.p = sh.p(), a.q = sh.q();
  a.pad_h = a.pad_w = sh.pad, a.str_h = a.str_w = sh.stride, a.silu = sh.silu;
  a.residual_type = sh.res, a.out = sh.out, a.residual_scale = d.res_scale, a.y_scale = d.y_scale;
  a.y_pitch = sh.y_pitch, a.split_k = sh.split_k;
  a.workspace_bytes = int8_conv_workspace(a);
  Dev ws(a.workspace_bytes);
  a.workspace = ws.p;
  GpuOut g;
  g.elem = sh.out == Int8Out::kInt32 ? 4 : sh.out == Int8Out::kHalf ? 2 : 1;
  const size_t pitch = static_cast<size_t>(sh.y_pitch ? sh.y_pitch : sh.k);
  g.bytes.assign(static_cast<size_t>(sh.n) * a.p * a.q * pitch * g.elem, kFill);
  Dev x(d.x), w(d.w), scale(d.scale), bias(d.bias), y(g.bytes);
  Dev res(sh.res == Int8Residual::kInt8 ? d.res8.size() : d.res16.size() * 2);
  const void* res_host = sh.res == Int8Residual::kInt8 ? static_cast<const void*>(d.res8.data()) : d.res16.data();
  const size_t res_bytes = sh.res == Int8Residual::kInt8 ? d.res8.size() : d.res16.size() * 2;
  if (res_bytes > 0) {
    EXPECT_EQ(cudaMemcpy(res.p, res_host, res_bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  a.x = static_cast<const int8_t*>(x.p), a.w = static_cast<const int8_t*>(w.p);
  a.scale = static_cast<const float*>(scale.p), a.bias = sh.bias ? static_cast<const float*>(bias.p) : nullptr;
  a.residual = sh.res == Int8Residual::kNone ? nullptr : res.p, a.y = y.p;
  std::vector<uint8_t> second_bytes;
  if (second) {
    second->got.elem = second->out == Int8Out::kHalf ? 2 : 1;
    const size_t pitch2 = static_cast<size_t>(second->pitch ? second->pitch : sh.k);
    second_bytes.assign(static_cast<size_t>(sh.n) * a.p * a.q * pitch2 * second->got.elem, kFill);
  }
  Dev y2(second_bytes);
  if (second) a.y2 = y2.p, a.out2 = second->out, a.y2_scale = second->scale, a.y2_pitch = second->pitch;
  runner.run(a);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(g.bytes.data(), y.p, g.bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  if (second) {
    EXPECT_EQ(cudaMemcpy(second_bytes.data(), y2.p, second_bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    second->got.bytes = std::move(second_bytes);
  }
  return g;
}

// Calls f(o, e) for every output o (pixels * k, the host's order) of `g`, pixels `pitch` elements
// apart (0: k), with its bytes e; returns how many channels beyond k were written (they keep kFill).
template <class F>
size_t for_each_output(const Shape& sh, const GpuOut& g, int pitch, size_t pixels, F f) {
  const size_t pp = static_cast<size_t>(pitch ? pitch : sh.k);
  size_t touched = 0;
  for (size_t pix = 0; pix < pixels; ++pix)
    for (size_t ch = 0; ch < pp; ++ch) {
      const uint8_t* e = &g.bytes[(pix * pp + ch) * g.elem];
      if (ch >= static_cast<size_t>(sh.k)) {
        touched += std::any_of(e, e + g.elem, [](uint8_t b) { return b != kFill; });
        continue;
      }
      f(pix * sh.k + ch, e);
    }
  return touched;
}

// Outputs of `g` (form `out`, int8 at `scale`, pixels `pitch` apart) that differ from the host's
// epilogue, and channels beyond k that were written.
std::pair<size_t, size_t> count_differences(const Shape& sh, const Data& d, const std::vector<int32_t>& acc,
                                            const GpuOut& g, Int8Out out, float scale, int pitch) {
  size_t bad = 0;
  const size_t touched = for_each_output(sh, g, pitch, acc.size() / sh.k, [&](size_t o, const uint8_t* e) {
    const float v = epilogue_f32(sh, d, o, acc[o]);
    if (out == Int8Out::kInt8) {
      bad += static_cast<int8_t>(e[0]) != int8::quantize(v, scale);
    } else {
      const __half want = __float2half_rn(v);
      bad += std::memcmp(e, &want, 2) != 0;
    }
  });
  return {bad, touched};
}

// y_scale for int8 outputs: about 3% of the values saturate.
float pick_y_scale(const Shape& sh, const Data& d, const std::vector<int32_t>& acc) {
  std::vector<float> mags;
  for (size_t o = 0; o < acc.size(); o += 7) mags.push_back(std::fabs(epilogue_f32(sh, d, o, acc[o])));
  std::sort(mags.begin(), mags.end());
  return std::max(mags[mags.size() * 97 / 100] / 127.f, 1e-3f);
}

// Runs every kernel of `runners` on `d` and compares with the host's accumulators `acc` of the same problem.
void check_data(const Shape& sh, Data& d, const std::vector<int32_t>& acc, const std::vector<Runner>& runners) {
  if (sh.out == Int8Out::kInt8) d.y_scale = pick_y_scale(sh, d, acc);
  for (const Runner& runner : runners) {
    const std::string what = sh.name() + " on " + runner.id;
    const GpuOut g = run_gpu(sh, d, runner);
    size_t exact_bad = 0, off_by_one = 0, far = 0, saturated = 0;
    const size_t touched = for_each_output(sh, g, sh.y_pitch, acc.size() / sh.k, [&](size_t o, const uint8_t* e) {
      if (sh.out == Int8Out::kInt32) {
        int32_t got;
        std::memcpy(&got, e, 4);
        exact_bad += got != acc[o];
        return;
      }
      const float v = epilogue_f32(sh, d, o, acc[o]);
      const double v64 = epilogue_f64(sh, d, o, acc[o]);
      if (sh.out == Int8Out::kInt8) {
        const int got = static_cast<int8_t>(e[0]);
        exact_bad += got != int8::quantize(v, d.y_scale);
        const double ideal = std::min(127.0, std::max(-128.0, std::nearbyint(v64 / d.y_scale)));
        saturated += std::fabs(ideal) >= 127;
        const double dq = std::fabs(got - ideal);
        off_by_one += dq == 1, far += dq > 1;
      } else {
        __half got;
        std::memcpy(&got, e, 2);
        const __half want = __float2half_rn(v);
        exact_bad += std::memcmp(&got, &want, 2) != 0;
        far += std::fabs(__half2float(got) - v64) > std::fabs(v64) / 512 + 1e-3;
      }
    });
    EXPECT_EQ(exact_bad, 0u) << what << ": outputs differing from the host reference";
    EXPECT_EQ(far, 0u) << what << ": outputs beyond the double-precision epilogue's tolerance";
    EXPECT_LE(off_by_one, acc.size() / 100) << what << ": int8 outputs 1 LSB from the double-precision epilogue";
    EXPECT_EQ(touched, 0u) << what << ": channels beyond k written";
    if (sh.out == Int8Out::kInt8) {
      EXPECT_GT(saturated, 0u) << what << ": the test meant some outputs to saturate";
    }
    std::printf("      %s: %zu outputs, %zu differ from the host; vs double: %zu off by 1 LSB, %zu further\n",
                what.c_str(), acc.size(), exact_bad, off_by_one, far);
  }
}

void check_shape(const Shape& sh, uint32_t seed, const std::vector<Runner>& runners = mma_tiles()) {
  Data d = make_data(sh, seed);
  check_data(sh, d, host_acc(sh, d), runners);
}

TEST(ConvInt8, PointwiseLayers) {
  YOLOCU_REQUIRE_GPU();
  check_shape({1, 32, 40, 40, 64, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8}, 1);
  check_shape({4, 256, 20, 20, 128, 1, 1, 0, false, false, Int8Residual::kNone, Int8Out::kInt32}, 2);
  check_shape({2, 48, 31, 29, 24, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8, 40}, 3);
  check_shape({1, 128, 20, 20, 256, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kHalf}, 4);
}

TEST(ConvInt8, ThreeByThreeStrideOne) {
  YOLOCU_REQUIRE_GPU();
  check_shape({4, 64, 20, 20, 64, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kInt8}, 5);
  check_shape({1, 16, 23, 27, 32, 3, 1, 1, true, true, Int8Residual::kHalf, Int8Out::kHalf}, 6);
  check_shape({1, 256, 20, 20, 256, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kInt8}, 7);
  check_shape({1, 32, 80, 80, 32, 3, 1, 1, false, false, Int8Residual::kNone, Int8Out::kInt32}, 8);
}

TEST(ConvInt8, StrideTwoAndStem) {
  YOLOCU_REQUIRE_GPU();
  check_shape({1, 32, 80, 80, 64, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kHalf}, 9);
  check_shape({4, 128, 40, 40, 256, 3, 2, 1, false, false, Int8Residual::kNone, Int8Out::kInt32}, 10);
  check_shape({4, 64, 41, 39, 128, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kInt8}, 11);
  check_shape({1, 16, 64, 64, 32, 6, 2, 2, true, true, Int8Residual::kNone, Int8Out::kInt8}, 12);  // v5 stem
}

// Split-K (slices of the reduction, then a second launch): the same exact results, also with more
// slices asked for than the reduction has steps.
TEST(ConvInt8, SplitK) {
  YOLOCU_REQUIRE_GPU();
  check_shape({1, 256, 20, 20, 256, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kInt8, 0, 4}, 13);
  check_shape({1, 128, 20, 20, 64, 1, 1, 0, true, true, Int8Residual::kHalf, Int8Out::kHalf, 72, 3}, 14);
  check_shape({2, 64, 10, 10, 32, 3, 2, 1, false, false, Int8Residual::kNone, Int8Out::kInt32, 0, 5}, 15);
  check_shape({1, 16, 12, 12, 16, 1, 1, 0, true, false, Int8Residual::kNone, Int8Out::kInt8, 0, 8}, 16);
}

// Small problems with every feature at once (partial tiles, pitch, residual, split-K): what
// compute-sanitizer's racecheck and initcheck run (scripts/gpu/parts/int8.sh).
TEST(ConvInt8, SmallEveryFeature) {
  YOLOCU_REQUIRE_GPU();
  check_shape({1, 32, 9, 11, 40, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kInt8, 48}, 17);
  check_shape({1, 48, 7, 6, 24, 3, 2, 1, true, true, Int8Residual::kHalf, Int8Out::kHalf, 32, 2}, 18);
}

TEST(ConvInt8, RefusesWhatItCannotRun) {
  Int8ConvArgs a;
  a.n = 1, a.c = 24, a.h = a.w_ = 8, a.k = 16, a.p = a.q = 8;
  EXPECT_NE(int8_conv_unsupported(a).find("multiple of 16"), std::string::npos);
  a.c = 32, a.k = 12;
  EXPECT_NE(int8_conv_unsupported(a).find("multiple of 8"), std::string::npos);
  a.k = 16, a.p = 7;
  EXPECT_NE(int8_conv_unsupported(a).find("does not match"), std::string::npos);
  a.p = 8, a.y_pitch = 20;
  EXPECT_NE(int8_conv_unsupported(a).find("pitch"), std::string::npos);
  a.y_pitch = 0;
  EXPECT_NE(int8_conv_unsupported(a).find("required"), std::string::npos);
  alignas(16) static int8_t buf[64];
  static float scale[16];
  a.x = buf, a.w = buf, a.scale = scale, a.y = buf, a.y_scale = 0.f;
  EXPECT_NE(int8_conv_unsupported(a).find("y_scale"), std::string::npos);
  a.y_scale = 1.f, a.residual_type = Int8Residual::kInt8;
  EXPECT_NE(int8_conv_unsupported(a).find("residual"), std::string::npos);
  a.residual_type = Int8Residual::kNone;
  EXPECT_EQ(int8_conv_unsupported(a), "");
  a.split_k = 65;
  EXPECT_NE(int8_conv_unsupported(a).find("split_k"), std::string::npos);
  a.split_k = 2;
  EXPECT_EQ(int8_conv_workspace(a), size_t{2} * 64 * 16 * 4);
  EXPECT_NE(int8_conv_unsupported(a).find("workspace"), std::string::npos);
  a.split_k = 1;
  EXPECT_EQ(int8_conv_workspace(a), 0u);
  a.c = 24;
  EXPECT_THROW(int8_conv_run(a, 0, nullptr), Error);
  EXPECT_THROW(int8_conv_run(a, 99, nullptr), Error);
}

// One layer with a second output on each runner: both outputs exactly the host's epilogue in
// their own forms, channels beyond k untouched.
struct SecondCase {
  Shape sh;
  Int8Out out2;
  float scale2;  // times the first output's int8 scale (int8 second outputs)
  int pitch2;
};
void check_second_output(const SecondCase& c, const std::vector<Runner>& runners) {
  Data d = make_data(c.sh, 11);
  const std::vector<int32_t> acc = host_acc(c.sh, d);
  const float s1 = pick_y_scale(c.sh, d, acc);
  if (c.sh.out == Int8Out::kInt8) d.y_scale = s1;
  for (const Runner& runner : runners) {
    const std::string what = c.sh.name() + " + second output on " + runner.id;
    SecondOut second;
    second.out = c.out2, second.scale = s1 * c.scale2, second.pitch = c.pitch2;
    const GpuOut g = run_gpu(c.sh, d, runner, &second);
    const auto first = count_differences(c.sh, d, acc, g, c.sh.out, d.y_scale, c.sh.y_pitch);
    const auto other = count_differences(c.sh, d, acc, second.got, c.out2, second.scale, c.pitch2);
    EXPECT_EQ(first.first, 0u) << what << ": first output";
    EXPECT_EQ(other.first, 0u) << what << ": second output";
    EXPECT_EQ(first.second + other.second, 0u) << what << ": channels beyond k written";
  }
}

// A second output of the same values (Int8ConvArgs::y2, for a layer whose readers need two forms):
// both outputs exactly the host's epilogue in their own forms on every tile, split-K included (int8
// beside fp16, fp16 beside int8, int8 at two scales, pitched), channels beyond k untouched; refused
// beside int32 sums, misaligned or with a bad scale (Hopper's kernels: ConvInt8Sm90.SecondOutput).
TEST(ConvInt8, SecondOutput) {
  YOLOCU_REQUIRE_GPU();
  const SecondCase cases[] = {
      {{1, 32, 20, 20, 64, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8}, Int8Out::kHalf, 0, 0},
      {{2, 64, 13, 17, 40, 3, 1, 1, true, true, Int8Residual::kInt8, Int8Out::kHalf}, Int8Out::kInt8, 1, 48},
      {{1, 48, 20, 20, 32, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kInt8, 0, 4}, Int8Out::kInt8, 2.5f, 0},
  };
  for (const SecondCase& c : cases) check_second_output(c, mma_tiles());
}

// What a second output is refused for, named (host checks: no GPU needed).
TEST(ConvInt8, SecondOutputRefusals) {
  Int8ConvArgs a;
  a.n = 1, a.c = 16, a.h = a.w_ = 8, a.k = 16, a.p = a.q = 8;
  alignas(16) static int8_t buf[64], y[4096], y2[4096];
  alignas(16) static float fbuf[16];
  a.x = buf, a.w = buf, a.scale = fbuf, a.y = y, a.y2 = y2;
  a.out = Int8Out::kInt32;
  EXPECT_NE(int8_conv_unsupported(a).find("int32"), std::string::npos);
  a.out = Int8Out::kInt8, a.out2 = Int8Out::kInt8, a.y2_scale = 0.f;
  EXPECT_NE(int8_conv_unsupported(a).find("y2_scale"), std::string::npos);
  a.y2_scale = 1.f, a.y2 = y2 + 1;
  EXPECT_NE(int8_conv_unsupported(a).find("y2 misaligned"), std::string::npos);
  a.y2 = y2, a.y2_pitch = 12;
  EXPECT_NE(int8_conv_unsupported(a).find("y2_pitch 12"), std::string::npos);
  a.y2_pitch = 0;
  EXPECT_EQ(int8_conv_unsupported(a), "");
  for (int k = 0; k < static_cast<int>(int8_sm90_kernels().size()); ++k)
    EXPECT_NE(int8_sm90_unsupported(a, k).find("second output"), std::string::npos) << int8_sm90_kernels()[static_cast<size_t>(k)];
}

TEST(ConvInt8, PadsWeightChannelsWithZeros) {
  const std::vector<int8_t> w = {1, 2, 3, 4, 5, 6};  // k 2, 1x1, c 3
  const std::vector<int8_t> p = int8_pad_krsc(w.data(), 2, 1, 1, 3, 16);
  ASSERT_EQ(p.size(), 32u);
  EXPECT_EQ(std::vector<int8_t>(p.begin(), p.begin() + 3), std::vector<int8_t>({1, 2, 3}));
  EXPECT_EQ(std::vector<int8_t>(p.begin() + 16, p.begin() + 19), std::vector<int8_t>({4, 5, 6}));
  EXPECT_EQ(std::count(p.begin(), p.end(), 0), 26);
  EXPECT_EQ(int8_padded_channels(3), 16);
  EXPECT_EQ(int8_padded_channels(32), 32);
  EXPECT_THROW(int8_pad_krsc(w.data(), 2, 1, 1, 3, 2), Error);
}

// Why the sm90 tests cannot run here (no kernels in this build, not a Hopper GPU), or "".
std::string sm90_skip_reason() {
  if (int8_sm90_kernels().empty()) return "this build has no sm90 INT8 kernels (CUTLASS 3.5+ not found)";
  Int8ConvArgs probe;
  probe.n = probe.h = probe.w_ = probe.p = probe.q = 1, probe.c = probe.k = 16;
  alignas(16) static int8_t buf[16];
  alignas(16) static float scale[16];
  probe.x = probe.w = buf, probe.y = buf, probe.scale = scale;
  const std::string why = int8_sm90_unsupported(probe, 0);
  if (why.find("sm_90") != std::string::npos) return why;
  EXPECT_EQ(why, "") << "a 1x1 probe the sm90 kernels should take";
  return {};
}

// Hopper's 1x1 path: bias and SiLU on or off, int8 and fp16 outputs, pitched outputs, pixel counts
// that leave partial tiles (31 x 29), and a yolov5s-sized layer; exactly the host's results.
TEST(ConvInt8Sm90, PointwiseLayers) {
  YOLOCU_REQUIRE_GPU();
  const std::string why = sm90_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::vector<Runner> k = sm90_kernels();
  check_shape({1, 32, 40, 40, 64, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8}, 21, k);
  check_shape({2, 48, 31, 29, 32, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8, 48}, 22, k);
  check_shape({4, 256, 20, 20, 128, 1, 1, 0, false, false, Int8Residual::kNone, Int8Out::kHalf}, 23, k);
  check_shape({1, 128, 20, 20, 256, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kHalf, 264}, 24, k);
  check_shape({2, 64, 80, 80, 64, 1, 1, 0, true, false, Int8Residual::kNone, Int8Out::kInt8}, 25, k);
}

// Hopper's im2col path: 3x3 stride 1 and 2 with padding, partial tiles, an fp16 residual, pitched
// outputs, the 6x6 stride-2 stem; exactly the host's results. (PointwiseLayers runs it on 1x1.)
TEST(ConvInt8Sm90, Im2colLayers) {
  YOLOCU_REQUIRE_GPU();
  const std::string why = sm90_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::vector<Runner> k = im2col_kernels();
  ASSERT_FALSE(k.empty());
  check_shape({4, 64, 20, 20, 64, 3, 1, 1, true, true, Int8Residual::kHalf, Int8Out::kInt8}, 31, k);
  check_shape({1, 16, 23, 27, 32, 3, 1, 1, true, true, Int8Residual::kHalf, Int8Out::kHalf}, 32, k);
  check_shape({1, 32, 80, 80, 64, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kHalf}, 33, k);
  check_shape({4, 64, 41, 39, 128, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kInt8}, 34, k);
  check_shape({2, 128, 20, 20, 128, 3, 1, 1, true, true, Int8Residual::kNone, Int8Out::kInt8, 256}, 35, k);
  check_shape({1, 256, 20, 20, 256, 3, 1, 1, false, false, Int8Residual::kNone, Int8Out::kHalf}, 36, k);
  check_shape({1, 16, 64, 64, 32, 6, 2, 2, true, true, Int8Residual::kNone, Int8Out::kInt8}, 37, k);
}

// Both forms from one launch (int8 through the epilogue's output, fp16 through CUTLASS's auxiliary
// store), in either order, with and without the fp16 residual, pitched: exactly the host's results,
// as the mma.sync kernel's two outputs.
TEST(ConvInt8Sm90, SecondOutput) {
  YOLOCU_REQUIRE_GPU();
  const std::string why = sm90_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  std::vector<Runner> pointwise;  // every sm90 kernel but the resident-row ones, which write one output
  for (Runner& k : sm90_kernels())
    if (k.id.back() != 'r') pointwise.push_back(std::move(k));
  check_second_output({{1, 32, 20, 20, 64, 1, 1, 0, true, true, Int8Residual::kNone, Int8Out::kInt8}, Int8Out::kHalf, 0, 0},
                      pointwise);
  check_second_output({{2, 64, 13, 17, 48, 3, 1, 1, true, true, Int8Residual::kHalf, Int8Out::kHalf}, Int8Out::kInt8, 1, 64},
                      im2col_kernels());
  check_second_output({{1, 48, 20, 20, 32, 3, 2, 1, true, true, Int8Residual::kNone, Int8Out::kInt8, 48}, Int8Out::kHalf, 1, 40},
                      im2col_kernels());
}

TEST(ConvInt8Sm90, RefusesWhatItCannotRun) {
  Int8ConvArgs a;
  alignas(16) static int8_t buf[64];
  alignas(16) static float scale[64];
  a.n = 1, a.c = 32, a.h = a.w_ = 8, a.k = 32, a.p = a.q = 8, a.x = a.w = buf, a.y = buf, a.scale = scale;
  if (int8_sm90_kernels().empty()) {
    EXPECT_NE(int8_sm90_unsupported(a, 0).find("CUTLASS"), std::string::npos);
    EXPECT_THROW(int8_sm90_run(a, 0, nullptr), Error);
    return;
  }
  const int kernels = static_cast<int>(int8_sm90_kernels().size());
  EXPECT_NE(int8_sm90_unsupported(a, kernels).find("no kernel"), std::string::npos);
  int im2col = 0;  // the first im2col kernel
  while (im2col < kernels && int8_sm90_kernels()[static_cast<size_t>(im2col)].find("im2col") == std::string::npos) ++im2col;
  ASSERT_LT(im2col, kernels) << "no im2col kernel listed";
  a.r = a.s = 3, a.pad_h = a.pad_w = 1, a.residual = buf, a.residual_type = Int8Residual::kInt8, a.silu = true;
  EXPECT_NE(int8_sm90_unsupported(a, im2col).find("int8 residual"), std::string::npos);
  a.residual_type = Int8Residual::kHalf, a.silu = false;
  EXPECT_NE(int8_sm90_unsupported(a, im2col).find("after SiLU"), std::string::npos);
  a.residual_type = Int8Residual::kNone, a.residual = nullptr;
  a.pad_h = a.pad_w = 300, a.p = a.q = 606;  // beyond TMA im2col's padding
  EXPECT_NE(int8_sm90_unsupported(a, im2col).find("cannot run this problem"), std::string::npos);
  a.p = a.q = 8, a.r = a.s = 1, a.pad_h = a.pad_w = 0;
  a.r = a.s = 3, a.pad_h = a.pad_w = 1;
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("1x1"), std::string::npos);
  a.r = a.s = 1, a.pad_h = a.pad_w = 0, a.residual_type = Int8Residual::kInt8, a.residual = buf;
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("residual"), std::string::npos);
  a.residual_type = Int8Residual::kNone, a.residual = nullptr, a.out = Int8Out::kInt32;
  EXPECT_NE(int8_sm90_unsupported(a, 1).find("int8 or fp16"), std::string::npos);
  a.out = Int8Out::kInt8, a.k = 24;
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("multiples of 16"), std::string::npos);
  a.k = 32, a.y_pitch = 40;
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("multiples of 16"), std::string::npos);
  a.y_pitch = 0, a.c = 24;  // what the mma.sync kernel refuses, this path refuses too
  EXPECT_NE(int8_sm90_unsupported(a, 0).find("multiple of 16"), std::string::npos);
  EXPECT_THROW(int8_sm90_run(a, 0, nullptr), Error);
}

// fp16 -> int8 of a packed tensor (the engine's Quantize steps): 16 values a thread, and a tail of
// values one by one (pixels * channels not a multiple of 16), each equal to the host's quantisation.
TEST(Int8Convert, QuantisePacked) {
  YOLOCU_REQUIRE_GPU();
  const int pixels = 1001, c = 12;  // 12012 values: 750 groups of 16 and 12 more
  const float scale = 0.37f;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-60.f, 60.f);
  std::vector<__half> x(static_cast<size_t>(pixels) * c);
  for (auto& v : x) v = __float2half_rn(u(rng));
  Dev dx(x), dq(x.size());
  int8_quantize_run(dx.p, c, c, static_cast<int8_t*>(dq.p), c, pixels, scale, nullptr);
  std::vector<int8_t> q(x.size());
  ASSERT_EQ(cudaMemcpy(q.data(), dq.p, q.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) bad += q[i] != int8::quantize(__half2float(x[i]), scale);
  EXPECT_EQ(bad, 0u);
}

// fp16 -> int8 from a pitched 20-channel slice into 32 channels (zeros past 20): random values and
// hand-computed edge cases (ties to even, saturation, infinities, NaN); int8 -> fp16 of every int8
// value into a pitched buffer (channels past c untouched), 4 channels per thread and 1.
TEST(Int8Convert, QuantiseAndDequantise) {
  YOLOCU_REQUIRE_GPU();
  const int pixels = 997, x_pitch = 24, c_src = 20, c_dst = 32;
  const float scale = 0.5f;
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-80.f, 80.f);
  std::vector<__half> x(static_cast<size_t>(pixels) * x_pitch);
  for (auto& v : x) v = __float2half_rn(u(rng));
  // (value, expected int8) with scale 0.5: v / 0.5 = 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<float, int>> edge = {{0.25f, 0}, {0.75f, 2}, {1.25f, 2}, {-0.25f, 0}, {-0.75f, -2},
                                                   {63.5f, 127}, {63.75f, 127}, {-64.f, -128}, {-64.25f, -128},
                                                   {1000.f, 127}, {-1000.f, -128}, {inf, 127}, {-inf, -128},
                                                   {std::nanf(""), 0}, {0.f, 0}, {10.25f, 20}};
  for (size_t i = 0; i < edge.size(); ++i) x[i] = __float2half_rn(edge[i].first);
  Dev dx(x), dq(static_cast<size_t>(pixels) * c_dst);
  int8_quantize_run(dx.p, x_pitch, c_src, static_cast<int8_t*>(dq.p), c_dst, pixels, scale, nullptr);
  std::vector<int8_t> q(static_cast<size_t>(pixels) * c_dst);
  ASSERT_EQ(cudaMemcpy(q.data(), dq.p, q.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  size_t bad = 0;
  for (int p = 0; p < pixels; ++p)
    for (int c = 0; c < c_dst; ++c) {
      const int8_t got = q[static_cast<size_t>(p) * c_dst + c];
      const float v = __half2float(x[static_cast<size_t>(p) * x_pitch + c]);
      const int8_t want = c < c_src ? int8::quantize(v, scale) : int8_t{0};
      bad += got != want;
      // (the independent rule; NaN, which it cannot order, is the edge list's case: 0)
      if (c < c_src && !std::isnan(v)) bad += std::fabs(got - std::min(127.0, std::max(-128.0, std::nearbyint(v / 0.5)))) > 0;
    }
  EXPECT_EQ(bad, 0u);
  for (size_t i = 0; i < edge.size(); ++i) EXPECT_EQ(q[i], edge[i].second) << "quantize(" << edge[i].first << ")";

  std::vector<int8_t> all(static_cast<size_t>(256) * 32);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int8_t>(static_cast<int>(i % 256) - 128);
  const float dscale = 0.0371f;
  std::vector<__half> y(static_cast<size_t>(256) * 40, __float2half_rn(-7.f));
  Dev dall(all), dy(y);
  int8_dequantize_run(static_cast<const int8_t*>(dall.p), 32, dy.p, 40, 256, dscale, nullptr);
  ASSERT_EQ(cudaMemcpy(y.data(), dy.p, y.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  bad = 0;
  for (size_t p = 0; p < 256; ++p)
    for (size_t c = 0; c < 40; ++c) {
      const float got = __half2float(y[p * 40 + c]);
      if (c >= 32) {
        bad += got != -7.f;
        continue;
      }
      const int8_t v = all[p * 32 + c];
      bad += got != __half2float(__float2half_rn(int8::dequantize(v, dscale)));
      bad += std::fabs(got - v * static_cast<double>(dscale)) > std::fabs(v * dscale) / 1024 + 1e-7;
    }
  EXPECT_EQ(bad, 0u);
  // 6 channels into a pitch of 7: one channel per thread
  std::vector<__half> y7(static_cast<size_t>(50) * 7, __float2half_rn(-7.f));
  Dev dy7(y7);
  int8_dequantize_run(static_cast<const int8_t*>(dall.p), 6, dy7.p, 7, 50, dscale, nullptr);
  ASSERT_EQ(cudaMemcpy(y7.data(), dy7.p, y7.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  bad = 0;
  for (size_t p = 0; p < 50; ++p) {
    for (size_t c = 0; c < 6; ++c)
      bad += __half2float(y7[p * 7 + c]) != __half2float(__float2half_rn(int8::dequantize(all[p * 6 + c], dscale)));
    bad += __half2float(y7[p * 7 + 6]) != -7.f;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_THROW(int8_quantize_run(dx.p, x_pitch, c_src, static_cast<int8_t*>(dq.p), 18, pixels, scale, nullptr), Error);
  EXPECT_THROW(int8_quantize_run(dx.p, x_pitch, c_src, static_cast<int8_t*>(dq.p), c_dst, pixels, 0.f, nullptr), Error);
  EXPECT_THROW(int8_dequantize_run(static_cast<const int8_t*>(dall.p), 32, dy.p, 16, 256, dscale, nullptr), Error);
}

// The 3-channel stem as the INT8 path runs it: the fp16 image quantised on the GPU into 16
// channels (zeros past 3), the weights padded by int8_pad_krsc; the accumulators and outputs equal
// the host's convolution over the 3 real channels.
TEST(ConvInt8, PaddedStemFromFp16) {
  YOLOCU_REQUIRE_GPU();
  Shape sh3{2, 3, 64, 48, 32, 6, 2, 2, true, true, Int8Residual::kNone, Int8Out::kInt8};
  Data d = make_data(sh3, 31);
  std::mt19937 rng(32);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<__half> img(d.x.size());
  for (auto& v : img) v = __float2half_rn(u(rng));
  const float x_scale = 1.f / 127;
  for (size_t i = 0; i < img.size(); ++i) d.x[i] = int8::quantize(__half2float(img[i]), x_scale);
  const std::vector<int32_t> acc = host_acc(sh3, d);

  Shape sh16 = sh3;
  sh16.c = int8_padded_channels(3);
  const int64_t pixels = int64_t{sh3.n} * sh3.h * sh3.w;
  Dev dimg(img), dx(static_cast<size_t>(pixels) * sh16.c);
  int8_quantize_run(dimg.p, 3, 3, static_cast<int8_t*>(dx.p), sh16.c, pixels, x_scale, nullptr);
  Data d16 = d;
  d16.x.resize(static_cast<size_t>(pixels) * sh16.c);
  ASSERT_EQ(cudaMemcpy(d16.x.data(), dx.p, d16.x.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(d16.x, int8_pad_krsc(d.x.data(), static_cast<int>(pixels), 1, 1, 3, sh16.c));
  d16.w = int8_pad_krsc(d.w.data(), sh3.k, sh3.r, sh3.r, 3, sh16.c);
  check_data(sh16, d16, acc, mma_tiles());
  sh16.out = Int8Out::kInt32;
  check_data(sh16, d16, acc, mma_tiles());
}

}  // namespace
}  // namespace yolocu::engine

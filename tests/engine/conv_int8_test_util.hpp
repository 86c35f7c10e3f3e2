// What the INT8 convolution tests share (test_conv_int8.cpp: the mma.sync kernel and the fp16 <->
// int8 kernels; test_conv_int8_sm90.cpp: Hopper's kernels): a layer's shape and random data, the
// host reference (plain loops accumulating int8 x int8 products in int32, then int8_math.hpp's
// epilogue, and an independent double-precision epilogue), the kernels as runners, one launch on
// the GPU, and the checks of check_data / check_second_output (the file comments of the tests say
// what must match).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/cuda/int8/conv_int8_kernel.hpp"
#include "engine/cuda/int8/conv_int8_sm90.hpp"
#include "engine/cuda/int8/int8_math.hpp"

namespace yolocu::engine::int8_test {

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

inline Data make_data(const Shape& sh, uint32_t seed) {
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
inline std::vector<int32_t> host_acc(const Shape& sh, const Data& d) {
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
// silu_scale: the SiLU's value times this (1 -+ kSiluSlack: the bounds of the device's SiLU).
inline float epilogue_f32(const Shape& sh, const Data& d, size_t o, int32_t acc, float silu_scale = 1.f) {
  const size_t k = o % static_cast<size_t>(sh.k);
  float v = int8::conv_value(acc, d.scale[k], sh.bias ? d.bias[k] : 0.f, sh.silu);
  if (sh.silu && silu_scale != 1.f) v = int8::mul_rn(v, silu_scale);
  if (sh.res == Int8Residual::kInt8) v = int8::add_residual_i8(v, d.res8[o], d.res_scale);
  if (sh.res == Int8Residual::kHalf) v = int8::add_residual_f32(v, __half2float(d.res16[o]));
  return v;
}
inline double epilogue_f64(const Shape& sh, const Data& d, size_t o, int32_t acc) {
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
inline std::vector<Runner> mma_tiles() {
  std::vector<Runner> r;
  for (int t = 0; t < static_cast<int>(int8_conv_tiles().size()); ++t)
    r.push_back({int8_tile_id(int8_conv_tiles()[static_cast<size_t>(t)]),
                 [t](const Int8ConvArgs& a) { int8_conv_run(a, t, nullptr); }});
  return r;
}
inline std::vector<Runner> sm90_kernels() {
  std::vector<Runner> r;
  for (int k = 0; k < static_cast<int>(int8_sm90_kernels().size()); ++k)
    r.push_back({int8_sm90_kernels()[static_cast<size_t>(k)], [k](const Int8ConvArgs& a) { int8_sm90_run(a, k, nullptr); }});
  return r;
}
// Hopper's im2col kernels alone (the sm90 kernels whose id says so).
inline std::vector<Runner> im2col_kernels() {
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

inline GpuOut run_gpu(const Shape& sh, const Data& d, const Runner& runner, SecondOut* second = nullptr) {
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
inline size_t for_each_output(const Shape& sh, const GpuOut& g, int pitch, size_t pixels, F f) {
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

// How far the device's SiLU may be from the host's in these checks: twice what test_int8_math_cuda
// allows, for the roundings of the bounds' own arithmetic.
constexpr float kSiluSlack = 2 * int8::kSiluDeviceTolerance;

// How output element e (form `out`, int8 at `scale` or fp16) of output o compares with what the
// kernels must write: the host reference's (int8: requantised as int8_math.hpp's requantize), or
// for a SiLU layer a value between the host's with its SiLU moved by -+kSiluSlack (the device's
// SiLU is the hardware's approximation, int8_math.hpp; the bounds differ from the reference only
// where its value lies that close to a rounding boundary).
enum class HostMatch { kExact, kWithinSilu, kDiffers };
inline HostMatch compare_to_host(const Shape& sh, const Data& d, size_t o, int32_t acc, Int8Out out, float scale,
                                 const uint8_t* e) {
  const float v = epilogue_f32(sh, d, o, acc);
  if (out == Int8Out::kInt8) {
    const int8::Scale sc = int8::make_scale(scale);
    const int got = static_cast<int8_t>(e[0]);
    if (got == int8::requantize(v, sc)) return HostMatch::kExact;
    if (!sh.silu) return HostMatch::kDiffers;
    const int a = int8::requantize(epilogue_f32(sh, d, o, acc, 1.f - kSiluSlack), sc);
    const int b = int8::requantize(epilogue_f32(sh, d, o, acc, 1.f + kSiluSlack), sc);
    return got >= std::min(a, b) && got <= std::max(a, b) ? HostMatch::kWithinSilu : HostMatch::kDiffers;
  }
  __half got;
  std::memcpy(&got, e, 2);
  const __half want = __float2half_rn(v);
  if (std::memcmp(&got, &want, 2) == 0) return HostMatch::kExact;
  if (!sh.silu) return HostMatch::kDiffers;
  const float g = __half2float(got);
  const float a = __half2float(__float2half_rn(epilogue_f32(sh, d, o, acc, 1.f - kSiluSlack)));
  const float b = __half2float(__float2half_rn(epilogue_f32(sh, d, o, acc, 1.f + kSiluSlack)));
  return g >= std::min(a, b) && g <= std::max(a, b) ? HostMatch::kWithinSilu : HostMatch::kDiffers;  // (NaN differs)
}

// Outputs of `g` (form `out`, int8 at `scale`, pixels `pitch` apart) that compare_to_host refuses,
// and channels beyond k that were written.
inline std::pair<size_t, size_t> count_differences(const Shape& sh, const Data& d, const std::vector<int32_t>& acc,
                                            const GpuOut& g, Int8Out out, float scale, int pitch) {
  size_t bad = 0;
  const size_t touched = for_each_output(sh, g, pitch, acc.size() / sh.k, [&](size_t o, const uint8_t* e) {
    bad += compare_to_host(sh, d, o, acc[o], out, scale, e) == HostMatch::kDiffers;
  });
  return {bad, touched};
}

// y_scale for int8 outputs: about 3% of the values saturate.
inline float pick_y_scale(const Shape& sh, const Data& d, const std::vector<int32_t>& acc) {
  std::vector<float> mags;
  for (size_t o = 0; o < acc.size(); o += 7) mags.push_back(std::fabs(epilogue_f32(sh, d, o, acc[o])));
  std::sort(mags.begin(), mags.end());
  return std::max(mags[mags.size() * 97 / 100] / 127.f, 1e-3f);
}

// Runs every kernel of `runners` on `d` and compares with the host's accumulators `acc` of the same problem.
inline void check_data(const Shape& sh, Data& d, const std::vector<int32_t>& acc, const std::vector<Runner>& runners) {
  if (sh.out == Int8Out::kInt8) d.y_scale = pick_y_scale(sh, d, acc);
  for (const Runner& runner : runners) {
    const std::string what = sh.name() + " on " + runner.id;
    const GpuOut g = run_gpu(sh, d, runner);
    size_t exact_bad = 0, moved = 0, off_by_one = 0, far = 0, saturated = 0;
    const size_t touched = for_each_output(sh, g, sh.y_pitch, acc.size() / sh.k, [&](size_t o, const uint8_t* e) {
      if (sh.out == Int8Out::kInt32) {
        int32_t got;
        std::memcpy(&got, e, 4);
        exact_bad += got != acc[o];
        return;
      }
      const double v64 = epilogue_f64(sh, d, o, acc[o]);
      const HostMatch m = compare_to_host(sh, d, o, acc[o], sh.out, d.y_scale, e);
      exact_bad += m == HostMatch::kDiffers;
      moved += m == HostMatch::kWithinSilu;  // (where the device's SiLU rounded the other way)
      if (sh.out == Int8Out::kInt8) {
        const int got = static_cast<int8_t>(e[0]);
        const double ideal = std::min(127.0, std::max(-128.0, std::nearbyint(v64 / d.y_scale)));
        saturated += std::fabs(ideal) >= 127;
        const double dq = std::fabs(got - ideal);
        off_by_one += dq == 1, far += dq > 1;
      } else {
        __half got;
        std::memcpy(&got, e, 2);
        far += std::fabs(__half2float(got) - v64) > std::fabs(v64) / 512 + 1e-3;
      }
    });
    EXPECT_EQ(exact_bad, 0u) << what << ": outputs differing from the host reference (beyond SiLU's tolerance)";
    EXPECT_EQ(far, 0u) << what << ": outputs beyond the double-precision epilogue's tolerance";
    EXPECT_LE(off_by_one, acc.size() / 100) << what << ": int8 outputs 1 LSB from the double-precision epilogue";
    EXPECT_EQ(touched, 0u) << what << ": channels beyond k written";
    EXPECT_LE(moved, acc.size() / 200) << what << ": outputs the device's SiLU rounds the other way";
    if (sh.out == Int8Out::kInt8) {
      EXPECT_GT(saturated, 0u) << what << ": the test meant some outputs to saturate";
    }
    std::printf("      %s: %zu outputs, %zu differ from the host (%zu more within SiLU's tolerance); "
                "vs double: %zu off by 1 LSB, %zu further\n",
                what.c_str(), acc.size(), exact_bad, moved, off_by_one, far);
  }
}

inline void check_shape(const Shape& sh, uint32_t seed, const std::vector<Runner>& runners = mma_tiles()) {
  Data d = make_data(sh, seed);
  check_data(sh, d, host_acc(sh, d), runners);
}


// One layer with a second output on each runner: both outputs exactly the host's epilogue in
// their own forms, channels beyond k untouched.
struct SecondCase {
  Shape sh;
  Int8Out out2;
  float scale2;  // times the first output's int8 scale (int8 second outputs)
  int pitch2;
};
inline void check_second_output(const SecondCase& c, const std::vector<Runner>& runners) {
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

}  // namespace yolocu::engine::int8_test

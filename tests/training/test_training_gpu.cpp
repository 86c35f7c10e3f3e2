// CUDA kernels of the training part against the CPU references (same inputs, same bits where the
// arithmetic is defined to be identical). Skips visibly without a CUDA device.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "yolocu/training/ciou.hpp"
#include "yolocu/training/multi_tensor.hpp"
#include "yolocu/training/upsample.hpp"

namespace yt = yolocu::training;

namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess)

// RAII device buffer for the tests.
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t n) { EXPECT_EQ(cudaMalloc(&p, n + 64), cudaSuccess); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  template <typename T = char>
  T* at(size_t byte_offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(p) + byte_offset);
  }
};

std::vector<uint8_t> random_bytes(size_t n_elem, int elem_size, uint32_t seed) {
  // Random finite values for any of the float types: build floats then narrow.
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<uint8_t> out(n_elem * elem_size);
  for (size_t i = 0; i < n_elem; ++i) {
    const float f = u(rng);
    if (elem_size == 4) {
      std::memcpy(&out[4 * i], &f, 4);
    } else if (elem_size == 8) {
      const double d = f;
      std::memcpy(&out[8 * i], &d, 8);
    } else {
      uint32_t b;
      std::memcpy(&b, &f, 4);
      const uint16_t h = static_cast<uint16_t>(b >> 16);  // bf16 (odd seeds)
      const uint16_t half = yolocu::float_to_half(f);  // half (even seeds)
      const uint16_t v = (seed & 1) ? h : half;
      std::memcpy(&out[2 * i], &v, 2);
    }
  }
  return out;
}

class training_UpsampleGpu
    : public ::testing::TestWithParam<std::tuple<yt::FloatType, yt::Layout, std::vector<int64_t>, int>> {};

TEST_P(training_UpsampleGpu, MatchesCpuBitwise) {
  YOLOCU_REQUIRE_GPU();
  const auto [type, layout, dims, misalign] = GetParam();
  const yt::Upsample2xShape s{dims[0], dims[1], dims[2], dims[3], layout};
  const int es = yt::float_type_size(type);
  const size_t n = static_cast<size_t>(s.input_numel());
  const size_t off = static_cast<size_t>(misalign) * es;  // shifts the pointers off 16-byte alignment
  const uint32_t seed = type == yt::FloatType::kBFloat16 ? 3u : 2u;
  const auto x = random_bytes(n, es, seed), dy = random_bytes(4 * n, es, seed + 10);
  std::vector<uint8_t> y_cpu(4 * n * es), dx_cpu(n * es), y_gpu(4 * n * es), dx_gpu(n * es);
  yt::upsample2x_forward_cpu(type, x.data(), y_cpu.data(), s);
  yt::upsample2x_backward_cpu(type, dy.data(), dx_cpu.data(), s);
  DevBuf dx_in(n * es), dy_out(4 * n * es), ddy(4 * n * es), ddx(n * es);
  CUDA_OK(cudaMemcpy(dx_in.at(off), x.data(), n * es, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(ddy.at(off), dy.data(), 4 * n * es, cudaMemcpyHostToDevice));
  yt::upsample2x_forward_cuda(type, dx_in.at(off), dy_out.at(off), s, nullptr);
  yt::upsample2x_backward_cuda(type, ddy.at(off), ddx.at(off), s, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(y_gpu.data(), dy_out.at(off), 4 * n * es, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(dx_gpu.data(), ddx.at(off), n * es, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(y_gpu == y_cpu) << "forward differs";
  EXPECT_TRUE(dx_gpu == dx_cpu) << "backward differs";
}

std::string upsample_case_name(
    const ::testing::TestParamInfo<std::tuple<yt::FloatType, yt::Layout, std::vector<int64_t>, int>>& param_info) {
  const auto& [type, layout, dims, misalign] = param_info.param;
  std::string name = std::string(yt::float_type_name(type)) + (layout == yt::Layout::kNCHW ? "_nchw" : "_nhwc");
  for (int64_t d : dims) name += "_" + std::to_string(d);
  return name + (misalign ? "_misaligned" : "_aligned");
}

const std::vector<int64_t> kYolo1 = {2, 16, 20, 20}, kYolo2 = {2, 8, 40, 40}, kRagged = {2, 3, 5, 7}, kNarrow = {2, 3, 4, 2},
                           kWide = {1, 2, 3, 24}, kCl = {2, 24, 4, 6};
INSTANTIATE_TEST_SUITE_P(
    All, training_UpsampleGpu,
    ::testing::Combine(::testing::Values(yt::FloatType::kFloat32, yt::FloatType::kFloat16, yt::FloatType::kBFloat16,
                                         yt::FloatType::kFloat64),
                       ::testing::Values(yt::Layout::kNCHW, yt::Layout::kNHWC),
                       ::testing::Values(kYolo1, kYolo2, kRagged, kNarrow, kWide, kCl), ::testing::Values(0, 1)),
    upsample_case_name);

TEST(training_CiouGpu, MatchesCpuOnThreeLevels) {
  YOLOCU_REQUIRE_GPU();
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> c(0, 4), s(0.2, 3);
  const int64_t n[3] = {1000, 0, 3001};
  for (yt::FloatType type : {yt::FloatType::kFloat64, yt::FloatType::kFloat32}) {
    const int es = yt::float_type_size(type);
    std::vector<std::vector<uint8_t>> pb(3), tb(3), g(3), out(3), gp(3), out_d(3), gp_d(3);
    std::vector<std::unique_ptr<DevBuf>> dp, dt, dg, dout, dgp;
    yt::CiouLevel lv[3], lvd[3];
    void *outs[3], *gps[3], *outs_d[3], *gps_d[3];
    const void *gs[3], *gs_d[3];
    auto put = [&](std::vector<uint8_t>& v, double x) {
      const size_t o = v.size();
      v.resize(o + es);
      if (es == 8) {
        std::memcpy(&v[o], &x, 8);
      } else {
        const float f = static_cast<float>(x);
        std::memcpy(&v[o], &f, 4);
      }
    };
    for (int l = 0; l < 3; ++l) {
      for (int64_t i = 0; i < n[l]; ++i) {
        const bool tie = i % 7 == 0;  // every 7th pair: identical boxes
        double p[4] = {c(rng), c(rng), s(rng), s(rng)}, t[4] = {c(rng), c(rng), s(rng), s(rng)};
        if (tie) std::memcpy(t, p, sizeof p);
        for (double v : p) put(pb[l], v);
        for (double v : t) put(tb[l], v);
        put(g[l], -0.01 * (1 + i % 3));
      }
      out[l].resize(n[l] * es);
      gp[l].resize(4 * n[l] * es);
      out_d[l].resize(n[l] * es);
      gp_d[l].resize(4 * n[l] * es);
      lv[l] = {pb[l].data(), tb[l].data(), n[l]};
      outs[l] = out[l].data();
      gps[l] = gp[l].data();
      gs[l] = g[l].data();
      dp.push_back(std::make_unique<DevBuf>(pb[l].size()));
      dt.push_back(std::make_unique<DevBuf>(tb[l].size()));
      dg.push_back(std::make_unique<DevBuf>(g[l].size()));
      dout.push_back(std::make_unique<DevBuf>(out[l].size()));
      dgp.push_back(std::make_unique<DevBuf>(gp[l].size()));
      CUDA_OK(cudaMemcpy(dp[l]->p, pb[l].data(), pb[l].size(), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(dt[l]->p, tb[l].data(), tb[l].size(), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(dg[l]->p, g[l].data(), g[l].size(), cudaMemcpyHostToDevice));
      lvd[l] = {dp[l]->p, dt[l]->p, n[l]};
      outs_d[l] = dout[l]->p;
      gps_d[l] = dgp[l]->p;
      gs_d[l] = dg[l]->p;
    }
    yt::ciou_forward_cpu(type, lv, 3, outs, 1e-7);
    yt::ciou_backward_cpu(type, lv, 3, gs, gps, 1e-7);
    yt::ciou_forward_cuda(type, lvd, 3, outs_d, 1e-7, nullptr);
    yt::ciou_backward_cuda(type, lvd, 3, gs_d, gps_d, 1e-7, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    for (int l = 0; l < 3; ++l) {
      CUDA_OK(cudaMemcpy(out_d[l].data(), dout[l]->p, out[l].size(), cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(gp_d[l].data(), dgp[l]->p, gp[l].size(), cudaMemcpyDeviceToHost));
      auto val = [&](const std::vector<uint8_t>& v, size_t i) {
        if (es == 8) {
          double d;
          std::memcpy(&d, &v[8 * i], 8);
          return d;
        }
        float f;
        std::memcpy(&f, &v[4 * i], 4);
        return double(f);
      };
      // atan on host (libm) and device (libdevice) may differ in the last ulp.
      const double tol = es == 8 ? 1e-14 : 1e-6;
      // Identical boxes in float32 can make iou round above 1 and alpha = 0/0 = NaN, exactly as in
      // PyTorch's bbox_iou; the kernel must then be NaN where the reference is.
      auto same = [](double a, double b, double t) { return (std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= t; };
      for (int64_t i = 0; i < n[l]; ++i)
        ASSERT_TRUE(same(val(out_d[l], i), val(out[l], i), tol)) << l << " " << i << ": " << val(out_d[l], i) << " vs " << val(out[l], i);
      for (int64_t i = 0; i < 4 * n[l]; ++i) {
        const double ref = val(gp[l], i);
        ASSERT_TRUE(same(val(gp_d[l], i), ref, tol * 10 * (1 + std::fabs(ref)))) << l << " " << i << ": " << val(gp_d[l], i) << " vs " << ref;
      }
    }
  }
}

TEST(training_MultiTensorGpu, EmaAndSgdMatchCpuBitwise) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<int64_t> numel = {1, 3, 256, 4096, 4097, 70000, 5};
  const std::vector<int> group = {0, 1, 2, 1, 1, 0, 2};
  const size_t k = numel.size();
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  auto fill = [&]() {
    std::vector<std::vector<float>> r;
    for (int64_t n : numel) {
      r.emplace_back(n);
      for (auto& v : r.back()) v = nd(rng);
    }
    return r;
  };
  auto a = fill(), b = fill(), c = fill();
  // Device copies; tensor 6 deliberately misaligned (scalar path).
  std::vector<std::unique_ptr<DevBuf>> da, db, dc;
  std::vector<void*> ptrs(3 * k);
  for (size_t t = 0; t < k; ++t) {
    const size_t off = t == 6 ? 4 : 0;
    da.push_back(std::make_unique<DevBuf>(numel[t] * 4));
    db.push_back(std::make_unique<DevBuf>(numel[t] * 4));
    dc.push_back(std::make_unique<DevBuf>(numel[t] * 4));
    ptrs[t] = da[t]->at(off);
    ptrs[k + t] = db[t]->at(off);
    ptrs[2 * k + t] = dc[t]->at(off);
    CUDA_OK(cudaMemcpy(ptrs[t], a[t].data(), numel[t] * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(ptrs[k + t], b[t].data(), numel[t] * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(ptrs[2 * k + t], c[t].data(), numel[t] * 4, cudaMemcpyHostToDevice));
  }
  std::vector<float*> pa, pc;
  std::vector<const float*> pb;
  for (size_t t = 0; t < k; ++t) pa.push_back(a[t].data()), pb.push_back(b[t].data()), pc.push_back(c[t].data());
  yt::MultiTensorTable sgd(3, numel, group), ema(2, numel);
  EXPECT_EQ(ema.total_elements(), 4 + 256 + 4096 + 4097 + 70000 + 5);
  sgd.set_pointers(ptrs.data(), nullptr);
  ema.set_pointers(ptrs.data(), nullptr);  // lists 0 and 1 (a <- ema of b)
  for (int step = 0; step < 3; ++step) {
    const yt::SgdGroup groups[3] = {{0.1, 0.9, 0, 0, true}, {0.01, 0.9, 0, 5e-4, true}, {0.01, 0.8, 0, 0, false}};
    yt::sgd_step_cpu(pa.data(), pb.data(), pc.data(), numel.data(), group.data(), static_cast<int>(k), groups, 3,
                     step == 0);
    yt::sgd_step_cuda(sgd, groups, 3, step == 0, nullptr);
    const double d = 0.9999 * (1 - std::exp(-(step + 1) / 2000.0));
    yt::ema_update_cpu(pc.data(), pb.data(), numel.data(), static_cast<int>(k), d);
    std::vector<void*> ema_ptrs(ptrs.begin() + 2 * k, ptrs.end());
    ema_ptrs.insert(ema_ptrs.end(), ptrs.begin() + k, ptrs.begin() + 2 * k);
    ema.set_pointers(ema_ptrs.data(), nullptr);  // c <- ema of b: exercises a pointer change
    yt::ema_update_cuda(ema, d, nullptr);
  }
  CUDA_OK(cudaDeviceSynchronize());
  for (size_t t = 0; t < k; ++t) {
    std::vector<float> ga(numel[t]), gc(numel[t]);
    CUDA_OK(cudaMemcpy(ga.data(), ptrs[t], numel[t] * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(gc.data(), ptrs[2 * k + t], numel[t] * 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(ga, a[t]) << "params of tensor " << t;
    EXPECT_EQ(gc, c[t]) << "buffers/EMA of tensor " << t;
  }
}

}  // namespace

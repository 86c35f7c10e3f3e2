// GPU letterbox parity: the exact mode must be bit-identical to the CPU reference
// letterbox_to_input() (itself tested against OpenCV), in float32 and float16, for batches of 1
// and 32 images of different sizes and pitches, and on repeated runs. The fast mode's largest
// difference is reported. Skips visibly without a CUDA device.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "yolocu/letterbox.hpp"
#include "yolocu/letterbox_cuda.hpp"

namespace yolocu {
namespace {

using test::DeviceBuffer;

struct HostImage {
  int w, h;
  size_t pitch;
  std::vector<uint8_t> bytes;  // h rows of `pitch` bytes
  ImageView view() const { return {bytes.data(), w, h, pitch}; }
};

HostImage random_image(std::mt19937& rng, int w, int h) {
  HostImage im{w, h, static_cast<size_t>(w) * 3 + (rng() % 3 == 0 ? 5 : 0), {}};
  im.bytes.resize(im.pitch * static_cast<size_t>(h));
  const bool smooth = rng() % 2 == 0;
  for (size_t i = 0; i < im.bytes.size(); ++i) {
    im.bytes[i] = smooth ? static_cast<uint8_t>((i * 7 / 3 + i / im.pitch * 5) & 255) : static_cast<uint8_t>(rng());
  }
  return im;
}

struct GpuRun {
  std::vector<float> f32;
  std::vector<uint16_t> f16;
};

// Letterboxes all images in ONE launch per dtype; returns the host copies of the outputs.
GpuRun run_gpu(const std::vector<HostImage>& images, int dst_w, int dst_h, LetterboxMode mode) {
  const int batch = static_cast<int>(images.size());
  std::vector<std::unique_ptr<DeviceBuffer>> srcs;
  std::vector<LetterboxCudaDesc> descs;
  for (const HostImage& im : images) {
    srcs.push_back(std::make_unique<DeviceBuffer>(im.bytes.size()));
    EXPECT_EQ(cudaMemcpy(srcs.back()->p, im.bytes.data(), im.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    const ImageView dv{static_cast<const uint8_t*>(srcs.back()->p), im.w, im.h, im.pitch};
    descs.push_back(make_letterbox_cuda_desc(dv, dst_w, dst_h));
  }
  DeviceBuffer d_descs(sizeof(LetterboxCudaDesc) * descs.size());
  EXPECT_EQ(cudaMemcpy(d_descs.p, descs.data(), sizeof(LetterboxCudaDesc) * descs.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const size_t n = static_cast<size_t>(batch) * 3 * dst_w * dst_h;
  DeviceBuffer out32(n * 4), out16(n * 2);
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
  const auto* dd = static_cast<const LetterboxCudaDesc*>(d_descs.p);
  letterbox_to_input_cuda(dd, batch, dst_w, dst_h, DType::kFloat32, mode, out32.p, s);
  letterbox_to_input_cuda(dd, batch, dst_w, dst_h, DType::kFloat16, mode, out16.p, s);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  GpuRun r;
  r.f32.resize(n);
  r.f16.resize(n);
  EXPECT_EQ(cudaMemcpy(r.f32.data(), out32.p, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(r.f16.data(), out16.p, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return r;
}

// Compares image i of a GPU batch with the CPU reference; returns "" or a description.
std::string check_exact(const HostImage& im, const GpuRun& g, size_t i, int dst_w, int dst_h) {
  const size_t n = static_cast<size_t>(3) * dst_w * dst_h;
  std::vector<float> f32(n);
  std::vector<uint16_t> f16(n);
  letterbox_to_input(im.view(), dst_w, dst_h, DType::kFloat32, f32.data());
  letterbox_to_input(im.view(), dst_w, dst_h, DType::kFloat16, f16.data());
  size_t bad32 = 0, bad16 = 0, first = 0;
  for (size_t k = 0; k < n; ++k) {
    if (std::memcmp(&f32[k], &g.f32[i * n + k], 4) != 0 && bad32++ == 0) first = k;
    bad16 += f16[k] != g.f16[i * n + k];
  }
  if (bad32 == 0 && bad16 == 0) return "";
  return std::to_string(im.w) + "x" + std::to_string(im.h) + ": " + std::to_string(bad32) +
         " float32 and " + std::to_string(bad16) + " float16 values differ (first at " +
         std::to_string(first) + ": cpu " + std::to_string(f32[first] * 255) + " gpu " +
         std::to_string(g.f32[i * n + first] * 255) + ")";
}

std::vector<HostImage> random_batch(std::mt19937& rng, int count) {
  std::vector<HostImage> v;
  std::uniform_real_distribution<double> logside(0.0, std::log(4000.0));
  while (static_cast<int>(v.size()) < count) {
    const int w = std::max(1, std::min(4000, static_cast<int>(std::exp(logside(rng)))));
    const int h = std::max(1, std::min(3000, static_cast<int>(std::exp(logside(rng)))));
    const LetterboxGeometry g = letterbox_geometry(w, h, 640, 384);
    if (g.new_w < 1 || g.new_h < 1) continue;
    v.push_back(random_image(rng, w, h));
  }
  // the special paths: 2x area, no resize, one side unchanged
  v[0] = random_image(rng, 1280, 768);
  if (v.size() > 2) v[1] = random_image(rng, 640, 300);
  if (v.size() > 3) v[2] = random_image(rng, 1, 384);
  return v;
}

TEST(LetterboxCuda, ExactMatchesCpuBatch1) {
  YOLOCU_REQUIRE_GPU();
  std::mt19937 rng(11);
  for (int i = 0; i < 40; ++i) {
    const std::vector<HostImage> one = random_batch(rng, 1);
    const GpuRun g = run_gpu(one, 640, 384, LetterboxMode::kExact);
    EXPECT_EQ(check_exact(one[0], g, 0, 640, 384), "");
  }
}

TEST(LetterboxCuda, ExactMatchesCpuBatch32AndIsDeterministic) {
  YOLOCU_REQUIRE_GPU();
  std::mt19937 rng(12);
  const std::vector<HostImage> batch = random_batch(rng, 32);
  const GpuRun g = run_gpu(batch, 640, 384, LetterboxMode::kExact);
  for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(check_exact(batch[i], g, i, 640, 384), "") << "image " << i;
  for (int rep = 0; rep < 3; ++rep) {
    const GpuRun again = run_gpu(batch, 640, 384, LetterboxMode::kExact);
    EXPECT_EQ(std::memcmp(again.f32.data(), g.f32.data(), g.f32.size() * 4), 0);
    EXPECT_EQ(std::memcmp(again.f16.data(), g.f16.data(), g.f16.size() * 2), 0);
  }
}

TEST(LetterboxCuda, ExactMatchesCpuOnRealImages) {
  YOLOCU_REQUIRE_GPU();
  std::vector<HostImage> images;
  for (const char* name : {"images/bus.jpg", "images/zidane.jpg"}) {
    YOLOCU_REQUIRE_DATA(path, name);
    const Image img = decode_image_file(path);
    images.push_back(HostImage{img.width(), img.height(), img.pitch_bytes(),
                               std::vector<uint8_t>(img.data(), img.data() + img.size_bytes())});
  }
  const GpuRun g = run_gpu(images, 640, 640, LetterboxMode::kExact);
  for (size_t i = 0; i < images.size(); ++i) EXPECT_EQ(check_exact(images[i], g, i, 640, 640), "");
}

TEST(LetterboxCuda, FastModeIsCloseAndReported) {
  YOLOCU_REQUIRE_GPU();
  std::mt19937 rng(13);
  const std::vector<HostImage> batch = random_batch(rng, 16);
  const GpuRun g = run_gpu(batch, 640, 384, LetterboxMode::kFast);
  const size_t n = static_cast<size_t>(3) * 640 * 384;
  double max_levels = 0;
  size_t differing = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    std::vector<float> ref(n);
    letterbox_to_input(batch[i].view(), 640, 384, DType::kFloat32, ref.data());
    for (size_t k = 0; k < n; ++k) {
      const double d = std::fabs(ref[k] - g.f32[i * n + k]) * 255.0;
      max_levels = std::max(max_levels, d);
      differing += d > 0.5;
    }
  }
  std::printf("fast mode vs exact: max difference %.3f levels of 255, %zu of %zu values differ\n",
              max_levels, differing, n * batch.size());
  RecordProperty("fast_max_levels", std::to_string(max_levels));
  // Float bilinear vs 11-bit weights on random noise: a few levels at most.
  EXPECT_LE(max_levels, 4.0);
}

TEST(LetterboxCuda, RejectsBadArguments) {
  YOLOCU_REQUIRE_GPU();
  EXPECT_THROW(make_letterbox_cuda_desc(ImageView{}, 640, 640), Error);
  EXPECT_THROW(letterbox_to_input_cuda(nullptr, 1, 640, 640, DType::kFloat32, LetterboxMode::kExact,
                                       nullptr, nullptr),
               Error);
  EXPECT_NO_THROW(letterbox_to_input_cuda(nullptr, 0, 640, 640, DType::kFloat32,
                                          LetterboxMode::kExact, nullptr, nullptr));
}

}  // namespace
}  // namespace yolocu

// GPU letterbox of DeviceImages (BGR, RGB, NV12 in one batch): kExact must be bit-identical to the
// CPU reference letterbox_to_input(nv12_to_bgr(image)) (RGB: the channels swapped first), in float32
// and float16, for odd sizes, pitches, full and limited range, and the copy / 2x area / linear
// resize paths. The descriptor checks run on the host (also without a GPU).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "test_util.hpp"
#include "yolocu/device_image.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "yolocu/letterbox.hpp"
#include "yolocu/letterbox_image_cuda.hpp"

namespace yolocu {
namespace {

using test::DeviceBuffer;

// A host picture in one of the formats: plane0 (+ plane1 for NV12), with row padding.
struct HostPicture {
  PixelFormat format;
  int w, h;
  size_t pitch0, pitch1;
  YuvRange range;
  std::vector<uint8_t> plane0, plane1;
  // The CPU reference input: BGR as the GPU must see it.
  Image bgr() const {
    if (format == PixelFormat::kNv12) return nv12_to_bgr(plane0.data(), pitch0, plane1.data(), pitch1, w, h, range);
    Image out(w, h);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c)
          out.row(y)[3 * x + c] = plane0[y * pitch0 + 3 * x + (format == PixelFormat::kRgb ? 2 - c : c)];
    return out;
  }
};

HostPicture random_picture(std::mt19937& rng, PixelFormat f, int w, int h) {
  HostPicture p{f, w, h, 0, 0, rng() % 2 ? YuvRange::kFull : YuvRange::kLimited, {}, {}};
  const bool nv12 = f == PixelFormat::kNv12;
  p.pitch0 = static_cast<size_t>(w) * (nv12 ? 1 : 3) + (rng() % 2 ? 64 : 0);
  p.plane0.resize(p.pitch0 * h);
  const bool smooth = rng() % 2 == 0;
  for (size_t i = 0; i < p.plane0.size(); ++i)
    p.plane0[i] = smooth ? static_cast<uint8_t>((i * 7 / 3 + i / p.pitch0 * 5) & 255) : static_cast<uint8_t>(rng());
  if (nv12) {
    p.pitch1 = 2 * static_cast<size_t>((w + 1) / 2) + (rng() % 2 ? 32 : 0);
    p.plane1.resize(p.pitch1 * ((h + 1) / 2));
    for (auto& b : p.plane1) b = static_cast<uint8_t>(rng());
  }
  return p;
}

struct GpuRun {
  std::vector<float> f32;
  std::vector<uint16_t> f16;
};

GpuRun run_gpu(const std::vector<HostPicture>& pics, int dst_w, int dst_h, LetterboxMode mode) {
  std::vector<std::unique_ptr<DeviceBuffer>> keep;
  std::vector<DeviceLetterboxDesc> descs;
  for (const HostPicture& p : pics) {
    keep.push_back(std::make_unique<DeviceBuffer>(p.plane0.size()));
    EXPECT_EQ(cudaMemcpy(keep.back()->p, p.plane0.data(), p.plane0.size(), cudaMemcpyHostToDevice), cudaSuccess);
    DeviceImage im;
    im.format = p.format;
    im.data = static_cast<const uint8_t*>(keep.back()->p);
    im.width = p.w;
    im.height = p.h;
    im.pitch_bytes = p.pitch0;
    im.range = p.range;
    if (p.format == PixelFormat::kNv12) {
      keep.push_back(std::make_unique<DeviceBuffer>(p.plane1.size()));
      EXPECT_EQ(cudaMemcpy(keep.back()->p, p.plane1.data(), p.plane1.size(), cudaMemcpyHostToDevice), cudaSuccess);
      im.chroma = static_cast<const uint8_t*>(keep.back()->p);
      im.chroma_pitch_bytes = p.pitch1;
    }
    descs.push_back(make_device_letterbox_desc(im, dst_w, dst_h));
  }
  DeviceBuffer d_descs(sizeof(DeviceLetterboxDesc) * descs.size());
  EXPECT_EQ(cudaMemcpy(d_descs.p, descs.data(), sizeof(DeviceLetterboxDesc) * descs.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  const size_t n = pics.size() * 3 * dst_w * dst_h;
  DeviceBuffer out32(n * 4), out16(n * 2);
  const auto* dd = static_cast<const DeviceLetterboxDesc*>(d_descs.p);
  const int batch = static_cast<int>(pics.size());
  letterbox_images_cuda(dd, batch, dst_w, dst_h, DType::kFloat32, mode, out32.p, nullptr);
  letterbox_images_cuda(dd, batch, dst_w, dst_h, DType::kFloat16, mode, out16.p, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  GpuRun r;
  r.f32.resize(n);
  r.f16.resize(n);
  EXPECT_EQ(cudaMemcpy(r.f32.data(), out32.p, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(r.f16.data(), out16.p, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return r;
}

std::string check_exact(const HostPicture& p, const GpuRun& g, size_t i, int dst_w, int dst_h) {
  const size_t n = static_cast<size_t>(3) * dst_w * dst_h;
  const Image bgr = p.bgr();
  std::vector<float> f32(n);
  std::vector<uint16_t> f16(n);
  letterbox_to_input(bgr.view(), dst_w, dst_h, DType::kFloat32, f32.data());
  letterbox_to_input(bgr.view(), dst_w, dst_h, DType::kFloat16, f16.data());
  size_t bad32 = 0, bad16 = 0, first = 0;
  for (size_t k = 0; k < n; ++k) {
    if (std::memcmp(&f32[k], &g.f32[i * n + k], 4) != 0 && bad32++ == 0) first = k;
    bad16 += f16[k] != g.f16[i * n + k];
  }
  if (bad32 == 0 && bad16 == 0) return "";
  return std::string(pixel_format_name(p.format)) + " " + std::to_string(p.w) + "x" + std::to_string(p.h) + ": " +
         std::to_string(bad32) + " float32 and " + std::to_string(bad16) + " float16 values differ (first at " +
         std::to_string(first) + ": cpu " + std::to_string(f32[first] * 255) + " gpu " +
         std::to_string(g.f32[i * n + first] * 255) + ")";
}

TEST(LetterboxImageCuda, ExactMatchesCpuForEveryFormatInOneBatch) {
  YOLOCU_REQUIRE_GPU();
  std::mt19937 rng(21);
  // 1080p video, the 2x area path (1280x768 -> 640x384), no resize (640x384), odd sizes, tiny ones
  const int sizes[][2] = {{1920, 1080}, {1280, 768}, {640, 384}, {641, 479}, {3, 5}, {1, 384}, {853, 480}, {1000, 1}};
  std::vector<HostPicture> batch;
  for (PixelFormat f : {PixelFormat::kNv12, PixelFormat::kBgr, PixelFormat::kRgb})
    for (const auto& s : sizes) batch.push_back(random_picture(rng, f, s[0], s[1]));
  std::shuffle(batch.begin(), batch.end(), rng);
  const GpuRun g = run_gpu(batch, 640, 384, LetterboxMode::kExact);
  for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(check_exact(batch[i], g, i, 640, 384), "") << "image " << i;
  const GpuRun again = run_gpu(batch, 640, 384, LetterboxMode::kExact);
  EXPECT_EQ(std::memcmp(again.f32.data(), g.f32.data(), g.f32.size() * 4), 0) << "not deterministic";
}

TEST(LetterboxImageCuda, Nv12ExactMatchesCpuAtSquareInput) {
  YOLOCU_REQUIRE_GPU();
  std::mt19937 rng(22);
  std::vector<HostPicture> batch;
  for (int i = 0; i < 12; ++i) batch.push_back(random_picture(rng, PixelFormat::kNv12, 64 + static_cast<int>(rng() % 2000), 2 + static_cast<int>(rng() % 1500)));
  const GpuRun g = run_gpu(batch, 640, 640, LetterboxMode::kExact);
  for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(check_exact(batch[i], g, i, 640, 640), "") << "image " << i;
}

TEST(LetterboxImageCuda, FastModeIsCloseAndReported) {
  YOLOCU_REQUIRE_GPU();
  std::mt19937 rng(23);
  std::vector<HostPicture> batch;
  for (int i = 0; i < 6; ++i) batch.push_back(random_picture(rng, PixelFormat::kNv12, 1920, 1080));
  const GpuRun g = run_gpu(batch, 640, 384, LetterboxMode::kFast);
  const size_t n = static_cast<size_t>(3) * 640 * 384;
  double max_levels = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    std::vector<float> ref(n);
    const Image bgr = batch[i].bgr();
    letterbox_to_input(bgr.view(), 640, 384, DType::kFloat32, ref.data());
    for (size_t k = 0; k < n; ++k) max_levels = std::max(max_levels, std::fabs(ref[k] - g.f32[i * n + k]) * 255.0);
  }
  std::printf("nv12 fast mode vs exact: max difference %.3f levels of 255\n", max_levels);
  EXPECT_LE(max_levels, 4.0);
}

// Host-side checks: these run without a GPU too.
TEST(LetterboxImageCuda, DescriptorChecksNameTheProblem) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(uintptr_t{4096});
  DeviceImage im;
  im.format = PixelFormat::kNv12;
  im.data = p;
  im.width = 1920;
  im.height = 1080;
  im.pitch_bytes = 2048;
  auto message = [&](const DeviceImage& d) {
    try {
      make_device_letterbox_desc(d, 640, 640);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(im).find("without a chroma plane"), std::string::npos) << message(im);
  im.chroma = p;
  LetterboxGeometry g;
  const DeviceLetterboxDesc d = make_device_letterbox_desc(im, 640, 640, &g);
  EXPECT_EQ(d.pitch1, 2048u);  // chroma pitch 0: the luma pitch
  EXPECT_EQ(d.new_w, 640);
  EXPECT_EQ(d.new_h, 360);
  EXPECT_EQ(g.top, 140);
  im.chroma_pitch_bytes = 1919;
  EXPECT_NE(message(im).find("chroma pitch 1919"), std::string::npos) << message(im);
  im.chroma_pitch_bytes = 0;
  im.pitch_bytes = 1000;
  EXPECT_NE(message(im).find("pitch 1000 bytes < width = 1920"), std::string::npos) << message(im);
  im.format = PixelFormat::kBgr;
  im.pitch_bytes = 1920 * 2;
  EXPECT_NE(message(im).find("< width * 3"), std::string::npos) << message(im);
  im.pitch_bytes = 1920 * 3;
  im.data = nullptr;
  EXPECT_NE(message(im).find("data is null"), std::string::npos) << message(im);
  EXPECT_THROW(letterbox_images_cuda(nullptr, 1, 640, 640, DType::kFloat32, LetterboxMode::kExact, nullptr, nullptr),
               Error);
  EXPECT_NO_THROW(letterbox_images_cuda(nullptr, 0, 640, 640, DType::kFloat32, LetterboxMode::kExact, nullptr, nullptr));
}

}  // namespace
}  // namespace yolocu

// detect_device() of DeviceImages on the GPU detector (label gpu; skips without a device): NV12,
// RGB and BGR device images give the same detections as detect() of the same pixels on the host
// (NV12: converted by nv12_to_bgr, the CPU reference), with the producer's stream waited for by
// an event (no host synchronisation by the caller), and host memory refused by name.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"

namespace yolocu {
namespace {

// BGR -> NV12 (BT.601 limited range, 2x2 chroma mean; any encoder will do: the reference is the
// decoded NV12 converted back by nv12_to_bgr).
void to_nv12(const Image& bgr, std::vector<uint8_t>& luma, std::vector<uint8_t>& chroma) {
  const int w = bgr.width(), h = bgr.height(), cw = (w + 1) / 2, ch = (h + 1) / 2;
  luma.assign(static_cast<size_t>(w) * h, 0);
  chroma.assign(static_cast<size_t>(2 * cw) * ch, 128);
  auto px = [&](int x, int y, int c) { return static_cast<double>(bgr.row(std::min(y, h - 1))[3 * std::min(x, w - 1) + c]); };
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      luma[static_cast<size_t>(y) * w + x] = static_cast<uint8_t>(
          std::lround(16 + 0.257 * px(x, y, 2) + 0.504 * px(x, y, 1) + 0.098 * px(x, y, 0)));
  for (int y = 0; y < ch; ++y)
    for (int x = 0; x < cw; ++x) {
      double u = 0, v = 0;
      for (int k = 0; k < 4; ++k) {
        const int sx = 2 * x + k % 2, sy = 2 * y + k / 2;
        u += 128 - 0.148 * px(sx, sy, 2) - 0.291 * px(sx, sy, 1) + 0.439 * px(sx, sy, 0);
        v += 128 + 0.439 * px(sx, sy, 2) - 0.368 * px(sx, sy, 1) - 0.071 * px(sx, sy, 0);
      }
      chroma[static_cast<size_t>(y) * 2 * cw + 2 * x] = static_cast<uint8_t>(std::clamp(std::lround(u / 4), 0L, 255L));
      chroma[static_cast<size_t>(y) * 2 * cw + 2 * x + 1] = static_cast<uint8_t>(std::clamp(std::lround(v / 4), 0L, 255L));
    }
}

bool equal(const Detections& a, const Detections& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].class_id != b[i].class_id || a[i].confidence != b[i].confidence || a[i].x1 != b[i].x1 ||
        a[i].y1 != b[i].y1 || a[i].x2 != b[i].x2 || a[i].y2 != b[i].y2)
      return false;
  return true;
}

TEST(DeviceImageCuda, Nv12RgbBgrEqualHostDetections) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  for (Precision prec : {Precision::kFloat32, Precision::kFloat16}) {
    DetectorOptions o;
    o.device = Device::kCuda;
    o.precision = prec;
    o.max_batch = 2;  // the three device images run as two batches
    auto det = Detector::create(model, o);
    for (const char* name : {"images/bus.jpg", "images/zidane.jpg"}) {
      YOLOCU_REQUIRE_DATA(img, name);
      const Image bgr = decode_image_file(img);
      std::vector<uint8_t> luma, chroma;
      to_nv12(bgr, luma, chroma);
      const int w = bgr.width(), h = bgr.height();
      const size_t cpitch = 2 * static_cast<size_t>((w + 1) / 2);
      const Image ref = nv12_to_bgr(luma.data(), static_cast<size_t>(w), chroma.data(), cpitch, w, h);
      // device copies: NV12 (pitched planes), RGB and BGR of `ref`, written on a producer stream
      cudaStream_t producer;
      ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
      uint8_t *d_luma, *d_chroma, *d_rgb, *d_bgr;
      size_t lp, cp, rp, bp;
      ASSERT_EQ(cudaMallocPitch(reinterpret_cast<void**>(&d_luma), &lp, static_cast<size_t>(w), static_cast<size_t>(h)), cudaSuccess);
      ASSERT_EQ(cudaMallocPitch(reinterpret_cast<void**>(&d_chroma), &cp, cpitch, static_cast<size_t>((h + 1) / 2)), cudaSuccess);
      ASSERT_EQ(cudaMallocPitch(reinterpret_cast<void**>(&d_rgb), &rp, ref.pitch_bytes(), static_cast<size_t>(h)), cudaSuccess);
      ASSERT_EQ(cudaMallocPitch(reinterpret_cast<void**>(&d_bgr), &bp, ref.pitch_bytes(), static_cast<size_t>(h)), cudaSuccess);
      Image rgb(w, h);
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          for (int c = 0; c < 3; ++c) rgb.row(y)[3 * x + c] = ref.row(y)[3 * x + 2 - c];
      ASSERT_EQ(cudaMemcpy2DAsync(d_luma, lp, luma.data(), static_cast<size_t>(w), static_cast<size_t>(w), static_cast<size_t>(h), cudaMemcpyHostToDevice, producer), cudaSuccess);
      ASSERT_EQ(cudaMemcpy2DAsync(d_chroma, cp, chroma.data(), cpitch, cpitch, static_cast<size_t>((h + 1) / 2), cudaMemcpyHostToDevice, producer), cudaSuccess);
      ASSERT_EQ(cudaMemcpy2DAsync(d_rgb, rp, rgb.data(), rgb.pitch_bytes(), rgb.pitch_bytes(), static_cast<size_t>(h), cudaMemcpyHostToDevice, producer), cudaSuccess);
      ASSERT_EQ(cudaMemcpy2DAsync(d_bgr, bp, ref.data(), ref.pitch_bytes(), ref.pitch_bytes(), static_cast<size_t>(h), cudaMemcpyHostToDevice, producer), cudaSuccess);
      DeviceImage nv12{PixelFormat::kNv12, d_luma, d_chroma, w, h, lp, cp, YuvRange::kLimited, producer};
      DeviceImage drgb{PixelFormat::kRgb, d_rgb, nullptr, w, h, rp, 0, YuvRange::kLimited, producer};
      DeviceImage dbgr{PixelFormat::kBgr, d_bgr, nullptr, w, h, bp, 0, YuvRange::kLimited, producer};
      // The host reference batched the same way (2 + 1): each batch size runs its own tuned
      // tactics, whose rounding differs (bit-for-bit equality holds only like for like).
      const std::vector<Detections> host = det->detect(std::vector<ImageView>{ref.view(), ref.view(), ref.view()});
      ASSERT_EQ(host.size(), 3u);
      EXPECT_FALSE(host[0].empty());
      // no host synchronisation: the detector waits for `producer` itself
      const std::vector<Detections> dev = det->detect_device({nv12, drgb, dbgr});
      ASSERT_EQ(dev.size(), 3u);
      for (size_t i = 0; i < dev.size(); ++i) EXPECT_TRUE(equal(dev[i], host[i])) << name << " image " << i;
      // host memory passed as a device image is refused, naming the plane
      DeviceImage wrong = nv12;
      wrong.chroma = chroma.data();
      try {
        det->detect_device({wrong});
        ADD_FAILURE() << "host chroma accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("chroma plane of image 0"), std::string::npos) << e.what();
      }
      EXPECT_TRUE(equal(det->detect_device({nv12}).at(0), host[2]));  // still usable
      cudaFree(d_luma);
      cudaFree(d_chroma);
      cudaFree(d_rgb);
      cudaFree(d_bgr);
      cudaStreamDestroy(producer);
    }
  }
}

}  // namespace
}  // namespace yolocu

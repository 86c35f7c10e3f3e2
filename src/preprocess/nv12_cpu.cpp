// NV12 -> BGR on the CPU: the reference for the GPU letterbox of NV12 frames (the arithmetic is
// yuv_math.hpp's, shared with the kernel), and for copies of device video frames to the host.
#include "core/check.hpp"
#include "preprocess/yuv_math.hpp"
#include "yolocu/device_image.hpp"

namespace yolocu {

const char* pixel_format_name(PixelFormat format) noexcept {
  switch (format) {
    case PixelFormat::kBgr: return "bgr";
    case PixelFormat::kRgb: return "rgb";
    case PixelFormat::kNv12: return "nv12";
  }
  return "unknown";
}

Image nv12_to_bgr(const uint8_t* luma, size_t luma_pitch, const uint8_t* chroma, size_t chroma_pitch, int width,
                  int height, YuvRange range) {
  YOLOCU_CHECK(luma != nullptr && chroma != nullptr, kInvalidArgument, "nv12_to_bgr: null plane");
  YOLOCU_CHECK(width > 0 && height > 0, kInvalidArgument, "nv12_to_bgr: size ", width, "x", height);
  YOLOCU_CHECK(luma_pitch >= static_cast<size_t>(width), kInvalidArgument, "nv12_to_bgr: luma pitch ", luma_pitch,
               " < width ", width);
  YOLOCU_CHECK(chroma_pitch >= 2 * static_cast<size_t>((width + 1) / 2), kInvalidArgument,
               "nv12_to_bgr: chroma pitch ", chroma_pitch, " < 2 * ((width + 1) / 2)");
  const detail::YuvCoeffs c = detail::sws_bt601_coeffs(range == YuvRange::kFull);
  Image out(width, height);
#pragma omp parallel for schedule(static) if (int64_t{width} * height > (int64_t{1} << 18))
  for (int y = 0; y < height; ++y) {
    uint8_t* row = out.row(y);
    for (int x = 0; x < width; ++x) {
      int32_t bgr[3];
      detail::nv12_pixel(luma, luma_pitch, chroma, chroma_pitch, x, y, c, bgr);
      row[3 * x] = static_cast<uint8_t>(bgr[0]);
      row[3 * x + 1] = static_cast<uint8_t>(bgr[1]);
      row[3 * x + 2] = static_cast<uint8_t>(bgr[2]);
    }
  }
  return out;
}

}  // namespace yolocu

// A build without FFmpeg: BMP images are refused (bmp_decode.cpp decodes them through libavcodec).
#include "core/check.hpp"
#include "preprocess/image_decode_formats.hpp"

namespace yolocu::detail {

Image decode_bmp(const uint8_t*, size_t, const DecodeLimits&, const std::string& name) {
  fail(ErrorCode::kUnsupported, name, ": BMP images are decoded by FFmpeg, and this yolocu was built without it ",
       "(YOLOCU_VIDEO=OFF, or libavcodec/libswscale not found)");
}

}  // namespace yolocu::detail

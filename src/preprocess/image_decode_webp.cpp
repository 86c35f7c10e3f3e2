// WebP through libwebp: WebPDecodeBGRInto, as OpenCV's imread decodes a WebP for IMREAD_COLOR
// (alpha dropped).
#include <webp/decode.h>

#include <cstring>

#include "core/check.hpp"
#include "preprocess/image_decode_formats.hpp"

namespace yolocu::detail {

void check_decode_limits(int w, int h, const DecodeLimits& limits, const std::string& name);

bool is_bmp(const uint8_t* d, size_t n) { return n >= 2 && d[0] == 'B' && d[1] == 'M'; }

bool is_webp(const uint8_t* d, size_t n) {
  return n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0;
}

Image decode_webp(const uint8_t* data, size_t size, const DecodeLimits& limits, const std::string& name) {
  WebPBitstreamFeatures f;
  const VP8StatusCode st = WebPGetFeatures(data, size, &f);
  YOLOCU_CHECK(st != VP8_STATUS_NOT_ENOUGH_DATA, kParse, name, ": WebP: truncated header");
  YOLOCU_CHECK(st == VP8_STATUS_OK, kParse, name, ": WebP: invalid header (libwebp status ", static_cast<int>(st), ")");
  YOLOCU_CHECK(!f.has_animation, kUnsupported, name, ": WebP: animated WebP is not supported (decode its frames)");
  check_decode_limits(f.width, f.height, limits, name);
  Image im(f.width, f.height);
  const uint8_t* out = WebPDecodeBGRInto(data, size, im.data(), im.size_bytes(), static_cast<int>(im.pitch_bytes()));
  YOLOCU_CHECK(out != nullptr, kParse, name, ": WebP: corrupt or truncated data");
  return im;
}

}  // namespace yolocu::detail

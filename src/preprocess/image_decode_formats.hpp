// The decoders of image_decode.cpp's other formats: WebP (libwebp), TIFF (libtiff) and BMP (FFmpeg), each to
// 8-bit BGR as cv2.imread gives it, with the same DecodeLimits as JPEG and PNG (the header's size
// checked before any pixel buffer is allocated). Internal to decode_image().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "yolocu/image.hpp"

namespace yolocu::detail {

bool is_webp(const uint8_t* data, size_t size);  // "RIFF" <size> "WEBP"
bool is_tiff(const uint8_t* data, size_t size);  // "II*\0" or "MM\0*"
bool is_bmp(const uint8_t* data, size_t size);   // "BM"

// kParse for a corrupt or truncated file, kOutOfMemory over `limits`, kUnsupported for what the
// library cannot decode; the message starts with `name`.
Image decode_webp(const uint8_t* data, size_t size, const DecodeLimits& limits, const std::string& name);
// The first page (directory); any photometric libtiff's RGBA interface reads (RGB, grey, palette,
// YCbCr, CMYK), alpha dropped.
Image decode_tiff(const uint8_t* data, size_t size, const DecodeLimits& limits, const std::string& name);
// FFmpeg's bmp decoder + libswscale (src/video/bmp_decode.cpp; kUnsupported in a build without FFmpeg).
Image decode_bmp(const uint8_t* data, size_t size, const DecodeLimits& limits, const std::string& name);

}  // namespace yolocu::detail

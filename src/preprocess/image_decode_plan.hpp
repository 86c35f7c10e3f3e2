// Internal: the JPEG header step the CPU decoder and the GPU (nvJPEG) decoder share, and the GPU
// decoder's routing decision. Host code only; built in every configuration, so that the decision
// is tested without a GPU (tests/preprocess/test_decode_plan.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "yolocu/image.hpp"

namespace yolocu::detail {

bool is_jpeg(const uint8_t* data, size_t size);  // FF D8 FF
bool is_png(const uint8_t* data, size_t size);   // the 8-byte PNG signature

// kParse for a zero size, kOutOfMemory (naming the DecodeLimits) for an image larger than the
// limits: the checks decode_image() makes, with its messages.
void check_decode_limits(int width, int height, const DecodeLimits& limits, const std::string& name);

// kOutOfMemory naming DecodeLimits::max_scans when `scans` is over it (decode_image()'s message).
void check_scan_limit(int scans, const DecodeLimits& limits, const std::string& name);
// The number of scans (SOS markers) of a JPEG, by walking its markers and entropy-coded data
// without decoding: what the progress monitor would count, for the GPU path's check before nvJPEG.
int count_jpeg_scans(const uint8_t* data, size_t size);

// A JPEG's header as libjpeg reads it (the same calls as decode_image()).
struct JpegHeader {
  int width = 0, height = 0;  // as coded, before the EXIF orientation
  int components = 0;         // 1 grey, 3 YCbCr / RGB, 4 CMYK / YCCK
  int orientation = 1;        // EXIF orientation of the first APP1 segment (1..8; 1 when absent)
  bool progressive = false;
};
// kParse "<name>: JPEG: <libjpeg's message>" exactly when decode_image() fails on the header.
JpegHeader read_jpeg_header(const uint8_t* data, size_t size, const std::string& name);

// True when the last two bytes are the EOI marker (FF D9). A file cut short lacks it; libjpeg then
// reports "Premature end of JPEG file", which decode_image() turns into kParse.
bool jpeg_ends_with_eoi(const uint8_t* data, size_t size);

// Where the GPU decoder sends one encoded image. nvJPEG decodes baseline and progressive JPEGs of
// 1 or 3 components; everything else goes to the CPU decoder (decode_image), which is exact and
// reports the errors: the GPU path never rejects a file the CPU path accepts, and gives the same
// error for a file the CPU path rejects.
enum class DecodeRoute {
  kGpu,             // nvJPEG
  kCpuNotJpeg,      // PNG (or anything else: the CPU decoder reports kUnsupported)
  kCpuOrientation,  // EXIF orientation 2..8: the CPU decoder applies it (nvJPEG does not)
  kCpuComponents,   // CMYK / YCCK (4 components) or another count
  kCpuTruncated,    // no EOI marker at the end: cut short (the CPU decoder reports it), or data after EOI
};
const char* decode_route_name(DecodeRoute route) noexcept;

struct DecodePlan {
  DecodeRoute route = DecodeRoute::kGpu;
  int width = 0, height = 0;  // of the decoded image (JPEG only; 0 for other formats)
  bool progressive = false;
};
// The routing decision for one image, from its header only (no pixel is decoded). Errors as
// decode_image(): kInvalidArgument (null data with a size), kParse (empty; a corrupt or truncated
// JPEG header), kOutOfMemory (a JPEG larger than `limits`, or progressive with more scans than
// max_scans, checked before anything is allocated).
DecodePlan plan_gpu_decode(const void* data, size_t size, const DecodeLimits& limits, const std::string& name);

}  // namespace yolocu::detail

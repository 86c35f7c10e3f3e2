// yolocu/image.hpp - 8-bit BGR images and the image decoder (JPEG, PNG, WebP, TIFF, BMP).
//
// Decoding matches OpenCV 4.6 `cv::imread(path, cv::IMREAD_COLOR)` pixel for pixel (same libjpeg /
// libpng, same conversions): 3-channel BGR; JPEG EXIF orientation applied; grey, grey+alpha, RGBA,
// palette and 16-bit PNG reduced to 8-bit BGR the way OpenCV does it (16-bit: high byte kept,
// alpha dropped without blending). The format is detected from the leading bytes, not the name.
// WebP through libwebp (WebPDecodeBGRInto, as OpenCV), TIFF through libtiff (first page, its RGBA
// interface, alpha dropped), BMP through FFmpeg's bmp decoder (builds with FFmpeg), all under the
// same DecodeLimits.
//
// Errors: kIo (file cannot be read), kParse (corrupt or truncated data, "<name>: ..."),
// kUnsupported (none of those formats), kOutOfMemory (over a DecodeLimits field, named in the
// message: a header larger than the pixel limits, checked before any pixel buffer is allocated;
// too many progressive scans; libjpeg's working memory). Nothing is printed. Unlike OpenCV, a JPEG whose data ends
// early is an error, not a partly grey image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace yolocu {

// A caller-owned interleaved 8-bit BGR image: row y starts at data + y * pitch_bytes, and holds
// width * 3 bytes (B, G, R per pixel). Host or device memory depending on the function it is
// passed to. Nothing is copied or freed by the view.
struct ImageView {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  size_t pitch_bytes = 0;
};

// An owning, contiguous 8-bit BGR host image (pitch = width * 3). Move-only.
class Image {
 public:
  Image() = default;
  // Allocates width x height x 3 bytes (uninitialised); kInvalidArgument on a negative size.
  Image(int width, int height);

  int width() const noexcept { return width_; }
  int height() const noexcept { return height_; }
  size_t pitch_bytes() const noexcept { return static_cast<size_t>(width_) * 3; }
  size_t size_bytes() const noexcept { return pitch_bytes() * static_cast<size_t>(height_); }
  bool empty() const noexcept { return width_ == 0 || height_ == 0; }
  uint8_t* data() noexcept { return data_.get(); }
  const uint8_t* data() const noexcept { return data_.get(); }
  uint8_t* row(int y) noexcept { return data_.get() + static_cast<size_t>(y) * pitch_bytes(); }
  const uint8_t* row(int y) const noexcept {
    return data_.get() + static_cast<size_t>(y) * pitch_bytes();
  }
  ImageView view() const noexcept { return {data_.get(), width_, height_, pitch_bytes()}; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  int width_ = 0, height_ = 0;
};

// What one image may cost the decoder, checked against the file header before any pixel buffer is
// allocated and while decoding. The defaults keep any input of up to 1 MB under 512 MB of memory
// and 2 s of CPU (docs/reliability.md) and still take 8K (7680x4320) and 48 MP photos. The pixel
// limits apply to the image as returned (after an EXIF rotation). The CPU decoder (decode_image),
// the GPU decoder (CudaJpegDecoder, before nvJPEG sees the image), the Detector and the Python
// package all take one DecodeLimits; a refusal is kOutOfMemory naming the image and the field.
struct DecodeLimits {
  static constexpr int64_t kDefaultMaxPixels = 50'000'000;
  static constexpr int kDefaultMaxScans = 100;
  static constexpr int64_t kDefaultMaxDecoderMemory = int64_t{256} << 20;

  int max_width = 16384;
  int max_height = 16384;
  int64_t max_pixels = kDefaultMaxPixels;  // width * height (CLI --max-pixels)
  // Progressive JPEG scans read before the refusal (libjpeg's progress monitor): each scan walks
  // the whole image, so a small file of many scans would cost minutes. Real files have <= ~20.
  int max_scans = kDefaultMaxScans;
  // libjpeg's own working memory (max_memory_to_use: a progressive JPEG's coefficient buffer, 2
  // bytes per sample) and the largest PNG ancillary chunk libpng may allocate, in bytes.
  int64_t max_decoder_memory = kDefaultMaxDecoderMemory;
};

// kInvalidArgument naming `what` (e.g. "DetectorOptions::decode_limits") and the field when a
// limit is <= 0. decode_image() and CudaJpegDecoder call it; front ends call it at option parsing.
void validate_decode_limits(const DecodeLimits& limits, const std::string& what);

// Decodes a JPEG or PNG file. Thread-safe (no shared state).
Image decode_image_file(const std::string& path, const DecodeLimits& limits = {});

// Decodes a JPEG or PNG held in memory; `name` prefixes error messages.
Image decode_image(const void* data, size_t size, const DecodeLimits& limits = {},
                   const std::string& name = "image");

// An encoded image held by the caller (the bytes of a JPEG or PNG file, a network payload), for
// Detector::detect_encoded() and CudaJpegDecoder: not copied, not owned, read during the call.
// `name` prefixes error messages (e.g. the file's path).
struct EncodedImage {
  const void* data = nullptr;
  size_t size = 0;
  std::string name = "image";
};

// Reads a whole file into memory, e.g. to make an EncodedImage of it: kIo naming the path when it
// cannot be opened or read (the same errors as decode_image_file()).
std::string read_file_bytes(const std::string& path);

}  // namespace yolocu

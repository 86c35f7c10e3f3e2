// yolocu/image.hpp - 8-bit BGR images and the JPEG / PNG decoder.
//
// Decoding matches OpenCV 4.6 `cv::imread(path, cv::IMREAD_COLOR)` pixel for pixel (same libjpeg /
// libpng, same conversions): 3-channel BGR; JPEG EXIF orientation applied; grey, grey+alpha, RGBA,
// palette and 16-bit PNG reduced to 8-bit BGR the way OpenCV does it (16-bit: high byte kept,
// alpha dropped without blending). The format is detected from the leading bytes, not the name.
//
// Errors: kIo (file cannot be read), kParse (corrupt or truncated data, "<name>: ..."),
// kUnsupported (neither JPEG nor PNG), kOutOfMemory (header larger than DecodeLimits; checked
// before any pixel buffer is allocated). Nothing is printed. Unlike OpenCV, a JPEG whose data ends
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

// Largest image the decoder accepts, checked against the file header before allocating. The
// limits apply to the image as returned (after an EXIF rotation).
struct DecodeLimits {
  int max_width = 16384;
  int max_height = 16384;
  int64_t max_pixels = int64_t{1} << 28;
};

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

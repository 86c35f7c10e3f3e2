// Helpers of the pre-processing tests that need no OpenCV (the GPU tests use them too): byte-level
// file helpers, a small PNG encoder (libpng) for the colour types that cv::imwrite cannot produce,
// EXIF insertion and a byte comparison. The OpenCV oracle is in cv_oracle.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "yolocu/image.hpp"

namespace yolocu::test {

std::vector<uint8_t> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

// Encodes a PNG with libpng. `pixels` holds rows of packed samples as PNG stores them (16-bit
// samples big-endian). palette: RGB triples; trns: alpha of palette entries.
std::vector<uint8_t> encode_png(int w, int h, int color_type, int bit_depth,
                                const std::vector<uint8_t>& pixels,
                                const std::vector<uint8_t>& palette = {},
                                const std::vector<uint8_t>& trns = {}, bool interlaced = false);
// encode_png() written to `path`.
void write_png(const std::string& path, int w, int h, int color_type, int bit_depth,
               const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& palette = {},
               const std::vector<uint8_t>& trns = {}, bool interlaced = false);
// A BGR image as an 8-bit RGB PNG (what cv::imencode(".png") writes for a CV_8UC3 image).
std::vector<uint8_t> encode_png_bgr(const Image& bgr);

// A JPEG with an APP1 Exif segment holding IFD0 = {Orientation = orientation} inserted right
// after SOI (little- or big-endian TIFF header).
std::vector<uint8_t> with_exif_orientation(const std::vector<uint8_t>& jpeg, int orientation,
                                           bool big_endian);

// Returns "" when equal, else a description of the first difference.
std::string compare_bytes(const uint8_t* expected, const uint8_t* actual, size_t n, int row_bytes);

}  // namespace yolocu::test

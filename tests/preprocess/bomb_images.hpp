// Image bombs built in memory: small files that declare huge images or cost many passes. Used by
// the measured bomb set (test_decode_bombs.cpp) and the limit tests of test_robustness.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace yolocu::test {

// A progressive JPEG of `width` x `height`, `components` components (1 grey, 3 colour at 4:4:4),
// one DC scan and `scans` - 1 AC scans of one bit of data each (libjpeg fills the rest with zeros,
// but still walks every block of the image): ~11 bytes per scan.
std::vector<uint8_t> progressive_scan_bomb(int width, int height, int components, int scans);

// A baseline JPEG header declaring `width` x `height` with (almost) no entropy data.
std::vector<uint8_t> baseline_size_bomb(int width, int height);

// A PNG of zeros, `width` x `height`, colour type `color_type` (PNG_COLOR_TYPE_*), `bit_depth`
// bits per sample, compressed at zlib level 9, built row by row.
std::vector<uint8_t> zero_png(int width, int height, int color_type, int bit_depth);

// A PNG whose IHDR declares `width` x `height` and whose data ends after the header.
std::vector<uint8_t> png_header_only(uint32_t width, uint32_t height);

}  // namespace yolocu::test

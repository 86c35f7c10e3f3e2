// JPEG test inputs of every kind the GPU decoder routes, written with libjpeg (no OpenCV, so that
// the GPU tests carry no OpenCV): baseline quality 95 4:2:0, progressive, restart markers and grey
// (the same bytes as cv::imencode(".jpg") with those parameters), chroma subsamplings and CMYK,
// plus byte-level damage (cut short, corrupt header, data after EOI).
#pragma once

#include <cstdint>
#include <vector>

#include "yolocu/image.hpp"

namespace yolocu::test {

// A BGR test picture with smooth gradients, hard colour edges and noise (w x h, deterministic:
// std::mt19937 with a fixed seed).
Image jpeg_test_pattern(int w, int h);

// Quality 95, 4:2:0 (cv::imencode's defaults); progressive (jpeg_simple_progression) when asked;
// restart markers every `restart_interval` MCUs when > 0.
std::vector<uint8_t> encode_jpeg(const Image& bgr, bool progressive = false, int restart_interval = 0);

// A one-component (grey) baseline JPEG, quality 95, of the BT.601 luma of `bgr` computed as
// OpenCV 4.6's cv::cvtColor(COLOR_BGR2GRAY) does (15-bit fixed point, rounded).
std::vector<uint8_t> encode_jpeg_grey(const Image& bgr);

// A baseline BGR JPEG with luma sampling factors h x v (1x1 4:4:4, 2x1 4:2:2, 2x2 4:2:0, 1x2
// 4:4:0).
std::vector<uint8_t> encode_jpeg_sampling(const Image& bgr, int h, int v);

// A 4-component (CMYK, Adobe-less) JPEG of w x h.
std::vector<uint8_t> cmyk_jpeg(int w, int h);

// The first `keep` bytes.
std::vector<uint8_t> cut(const std::vector<uint8_t>& bytes, size_t keep);

}  // namespace yolocu::test

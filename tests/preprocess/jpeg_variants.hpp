// JPEG test inputs of every kind the GPU decoder routes: written by OpenCV's encoder (baseline,
// progressive, grey, chroma subsamplings) or by libjpeg directly (CMYK, which cv::imwrite cannot
// produce), plus byte-level damage (cut short, corrupt header, data after EOI).
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace yolocu::test {

// A BGR test picture with smooth gradients, hard colour edges and noise (w x h, deterministic).
cv::Mat jpeg_test_pattern(int w, int h);

// cv::imencode(".jpg"): quality 95, 4:2:0 (OpenCV's default); restart markers every
// `restart_interval` MCUs when > 0.
std::vector<uint8_t> encode_jpeg(const cv::Mat& image, bool progressive = false, int restart_interval = 0);

// A baseline BGR JPEG with luma sampling factors h x v (1x1 4:4:4, 2x1 4:2:2, 2x2 4:2:0, 1x2
// 4:4:0), written with libjpeg (OpenCV 4.6 cannot choose the subsampling).
std::vector<uint8_t> encode_jpeg_sampling(const cv::Mat& bgr, int h, int v);

// A 4-component (CMYK, Adobe-less) JPEG of w x h written with libjpeg.
std::vector<uint8_t> cmyk_jpeg(int w, int h);

// The first `keep` bytes.
std::vector<uint8_t> cut(const std::vector<uint8_t>& bytes, size_t keep);

}  // namespace yolocu::test

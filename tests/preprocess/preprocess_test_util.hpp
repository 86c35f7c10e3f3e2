// Helpers of the pre-processing tests: the ultralytics letterbox written with OpenCV calls (the
// oracle), byte-level file helpers and a small PNG writer (libpng) for the colour types that
// cv::imwrite cannot produce.
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "yolocu/image.hpp"

namespace yolocu::test {

// The letterbox of ultralytics/yolov5 v7.0 (auto=False, scaleup=True) with OpenCV, independent of
// yolocu's geometry code: Python round() is emulated with std::nearbyint (half to even).
struct CvLetterbox {
  cv::Mat image;  // dst_h x dst_w, CV_8UC3
  int new_w = 0, new_h = 0, top = 0, bottom = 0, left = 0, right = 0;
};
CvLetterbox cv_letterbox(const cv::Mat& bgr, int dst_w, int dst_h);

inline ImageView view_of(const cv::Mat& m) {
  return {m.data, m.cols, m.rows, static_cast<size_t>(m.step[0])};
}

std::vector<uint8_t> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

// Writes a PNG with libpng. `pixels` holds rows of packed samples as PNG stores them (16-bit
// samples big-endian). palette: RGB triples; trns: alpha of palette entries.
void write_png(const std::string& path, int w, int h, int color_type, int bit_depth,
               const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& palette = {},
               const std::vector<uint8_t>& trns = {}, bool interlaced = false);

// A JPEG with an APP1 Exif segment holding IFD0 = {Orientation = orientation} inserted right
// after SOI (little- or big-endian TIFF header).
std::vector<uint8_t> with_exif_orientation(const std::vector<uint8_t>& jpeg, int orientation,
                                           bool big_endian);

// Returns "" when equal, else a description of the first difference.
std::string compare_mats(const cv::Mat& expected, const Image& actual);
std::string compare_bytes(const uint8_t* expected, const uint8_t* actual, size_t n, int row_bytes);

}  // namespace yolocu::test

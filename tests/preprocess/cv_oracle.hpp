// The OpenCV side of the pre-processing tests (CPU tests only; OpenCV 4.6 is their oracle): the
// ultralytics letterbox written with OpenCV calls, cv::Mat views and the cv::Mat comparison.
#pragma once

#include <opencv2/core.hpp>

#include <string>

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

// Returns "" when equal, else a description of the first difference.
std::string compare_mats(const cv::Mat& expected, const Image& actual);

}  // namespace yolocu::test

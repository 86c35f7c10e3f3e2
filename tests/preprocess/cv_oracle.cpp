#include "preprocess/cv_oracle.hpp"

#include <cmath>
#include <sstream>

#include <opencv2/imgproc.hpp>

#include "preprocess/preprocess_test_util.hpp"

namespace yolocu::test {

CvLetterbox cv_letterbox(const cv::Mat& bgr, int dst_w, int dst_h) {
  // letterbox(): shape = im.shape[:2]; r = min(new[0] / shape[0], new[1] / shape[1])
  const int h = bgr.rows, w = bgr.cols;
  const double r = std::min(static_cast<double>(dst_h) / h, static_cast<double>(dst_w) / w);
  CvLetterbox out;
  out.new_w = static_cast<int>(std::nearbyint(w * r));
  out.new_h = static_cast<int>(std::nearbyint(h * r));
  double dw = dst_w - out.new_w, dh = dst_h - out.new_h;
  dw /= 2;
  dh /= 2;
  cv::Mat im = bgr;
  if (w != out.new_w || h != out.new_h) {
    cv::resize(bgr, im, cv::Size(out.new_w, out.new_h), 0, 0, cv::INTER_LINEAR);
  }
  out.top = static_cast<int>(std::nearbyint(dh - 0.1));
  out.bottom = static_cast<int>(std::nearbyint(dh + 0.1));
  out.left = static_cast<int>(std::nearbyint(dw - 0.1));
  out.right = static_cast<int>(std::nearbyint(dw + 0.1));
  cv::copyMakeBorder(im, out.image, out.top, out.bottom, out.left, out.right, cv::BORDER_CONSTANT,
                     cv::Scalar(114, 114, 114));
  return out;
}

std::string compare_mats(const cv::Mat& expected, const Image& actual) {
  if (expected.empty()) return "OpenCV returned an empty image";
  if (expected.type() != CV_8UC3) return "OpenCV image is not CV_8UC3";
  if (expected.cols != actual.width() || expected.rows != actual.height()) {
    std::ostringstream os;
    os << "size differs: OpenCV " << expected.cols << "x" << expected.rows << ", yolocu "
       << actual.width() << "x" << actual.height();
    return os.str();
  }
  const cv::Mat e = expected.isContinuous() ? expected : expected.clone();
  return compare_bytes(e.data, actual.data(), actual.size_bytes(), actual.width() * 3);
}

}  // namespace yolocu::test

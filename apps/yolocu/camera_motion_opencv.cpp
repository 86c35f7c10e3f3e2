// sparseOptFlow camera motion with OpenCV, the steps of ultralytics' GMC.apply_sparseoptflow: the
// grey frame halved (bilinear), Shi-Tomasi corners (400, quality 0.01, no minimum distance, block 3),
// pyramidal Lucas-Kanade from the previous frame's corners (OpenCV's defaults), a RANSAC partial
// affine (rotation, uniform scale, translation) over the points tracked, its translation scaled
// back by 2. The first frame, too few points or a failed fit give the identity.
#include <opencv2/calib3d.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/video/tracking.hpp>
#include <vector>

#include "camera_motion.hpp"
#include "yolocu/error.hpp"

namespace yolocu::cli {
namespace {

class SparseOptFlow : public CameraMotion {
 public:
  Warp2x3 apply(const ImageView& bgr) override {
    constexpr int kDownscale = 2;
    const cv::Mat colour(bgr.height, bgr.width, CV_8UC3, const_cast<uint8_t*>(bgr.data), bgr.pitch_bytes);
    cv::Mat grey, frame;
    cv::cvtColor(colour, grey, cv::COLOR_BGR2GRAY);
    cv::resize(grey, frame, cv::Size(grey.cols / kDownscale, grey.rows / kDownscale));
    std::vector<cv::Point2f> corners;
    cv::goodFeaturesToTrack(frame, corners, 400, 0.01, 0, cv::noArray(), 3, false, 0.04);
    Warp2x3 warp = {1, 0, 0, 0, 1, 0};
    if (prev_frame_.empty() || prev_corners_.empty()) {
      prev_frame_ = frame;
      prev_corners_ = corners;
      return warp;
    }
    std::vector<cv::Point2f> moved;
    std::vector<unsigned char> status;
    std::vector<float> err;
    cv::calcOpticalFlowPyrLK(prev_frame_, frame, prev_corners_, moved, status, err);
    std::vector<cv::Point2f> from, to;
    for (size_t i = 0; i < status.size(); ++i)
      if (status[i]) {
        from.push_back(prev_corners_[i]);
        to.push_back(moved[i]);
      }
    if (from.size() > 4) {
      const cv::Mat h = cv::estimateAffinePartial2D(from, to, cv::noArray(), cv::RANSAC);
      if (!h.empty()) {
        for (int i = 0; i < 6; ++i) warp[static_cast<size_t>(i)] = h.at<double>(i / 3, i % 3);
        warp[2] *= kDownscale;
        warp[5] *= kDownscale;
      }
    }
    prev_frame_ = frame;
    prev_corners_ = corners;
    return warp;
  }

 private:
  cv::Mat prev_frame_;
  std::vector<cv::Point2f> prev_corners_;
};

}  // namespace

bool camera_motion_available(GmcMethod method) { return method == GmcMethod::kSparseOptFlow; }

std::unique_ptr<CameraMotion> make_camera_motion(GmcMethod method) {
  if (method != GmcMethod::kSparseOptFlow)
    throw Error(ErrorCode::kUnsupported,
                "gmc_method: only sparseOptFlow (and none) are built into yolocu track; orb, sift and ecc are not");
  return std::make_unique<SparseOptFlow>();
}

}  // namespace yolocu::cli

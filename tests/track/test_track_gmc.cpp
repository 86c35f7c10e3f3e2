// BoT-SORT as ultralytics ships it (botsort.yaml: gmc_method sparseOptFlow) on rendered frames of a
// panning camera: ultralytics estimates the camera motion with its GMC; here yolocu track's estimate
// (apps/yolocu/camera_motion_opencv.cpp, the same OpenCV calls) does, and hands the warp to a yolocu
// Tracker with gmc_method none, as yolocu track does. Same comparison as test_track_parity.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <opencv2/imgcodecs.hpp>

#include "../apps/yolocu/camera_motion.hpp"
#include "track/track_parity.hpp"
#include "yolocu/error.hpp"

namespace yolocu {
namespace {

TEST(TrackParity, BotSortWithSparseOptFlowMatchesUltralytics) {
  if (!test::track_refs_present()) {
    if (test::track_refs_required()) FAIL() << "YOLOCU_REQUIRE_TRACK: no references in " << test::track_refs_dir();
    GTEST_SKIP() << "no tracker references in " << test::track_refs_dir() << " (scripts/track/make_refs.sh makes them)";
  }
  TrackerConfig cfg = read_tracker_config(test::track_refs_dir() + "/botsort_sof.yaml");
  ASSERT_EQ(cfg.gmc_method, GmcMethod::kSparseOptFlow);
  EXPECT_THROW(Tracker{cfg}, Error);  // the library itself cannot estimate the flow
  cfg.gmc_method = GmcMethod::kNone;
  std::map<std::string, test::Tally> by_kind;
  for (test::RefSequence seq : test::read_track_refs("botsort_sof", "video_sequences.txt")) {
    const std::unique_ptr<cli::CameraMotion> gmc = cli::make_camera_motion(GmcMethod::kSparseOptFlow);
    for (size_t f = 0; f < seq.frames.size(); ++f) {
      char name[32];
      std::snprintf(name, sizeof name, "/%04zu.png", f + 1);
      const std::string path = test::track_refs_dir() + "/" + seq.name + name;
      const cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);  // as ultralytics' frames: BGR, made grey by the GMC
      ASSERT_FALSE(bgr.empty()) << "cannot read " << path;
      seq.frames[f].warp = gmc->apply(ImageView{bgr.data, bgr.cols, bgr.rows, bgr.step[0]});
    }
    test::add_tally(by_kind[seq.kind], test::compare_sequence(seq, cfg, "botsort+sparseOptFlow"));
  }
  test::expect_parity(by_kind, "botsort+sparseOptFlow");
}

}  // namespace
}  // namespace yolocu

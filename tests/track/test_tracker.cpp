// Hand-written tracker cases: ids start at 1 per tracker, the output layout (idx = input index),
// unconfirmed tracks, degenerate boxes, low-score second stage, the lost buffer, reset.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "yolocu/error.hpp"
#include "yolocu/track.hpp"

namespace yolocu {
namespace {

TrackInput box(float x, float y, float conf, float w = 40, float h = 80) { return {x, y, x + w, y + h, conf, 0}; }

TEST(Tracker, FirstFrameTracksAreConfirmedAtOnce) {
  Tracker t(TrackerConfig{});
  const auto out = t.update({box(10, 10, 0.9f), box(200, 10, 0.8f), box(400, 10, 0.05f)});
  ASSERT_EQ(out.size(), 2u);  // the 0.05 box is below track_low_thresh
  EXPECT_EQ(out[0].track_id, 1);
  EXPECT_EQ(out[0].idx, 0);
  EXPECT_EQ(out[1].track_id, 2);
  EXPECT_EQ(out[1].idx, 1);
  EXPECT_FLOAT_EQ(out[0].x1, 10);
  EXPECT_FLOAT_EQ(out[0].y2, 90);
  EXPECT_FLOAT_EQ(out[1].score, 0.8f);
}

TEST(Tracker, LaterTracksNeedASecondFrame) {
  Tracker t(TrackerConfig{});
  EXPECT_TRUE(t.update({}).empty());
  EXPECT_TRUE(t.update({box(10, 10, 0.9f)}).empty());  // new, unconfirmed
  const auto out = t.update({box(12, 10, 0.9f)});      // matched: confirmed
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].track_id, 1);
}

TEST(Tracker, DegenerateBoxesAreIgnored) {
  Tracker t(TrackerConfig{});
  const auto out = t.update({{10, 10, 10, 50, 0.9f, 0}, {10, 10, 50, 5, 0.9f, 0}, box(100, 100, 0.9f)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].idx, 2);
}

TEST(Tracker, LowScoreDetectionKeepsATrackAlive) {
  Tracker t(TrackerConfig{});
  t.update({box(10, 10, 0.9f)});
  const auto out = t.update({box(11, 10, 0.15f)});  // second stage: plain IoU with limit 0.5
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].track_id, 1);
  EXPECT_FLOAT_EQ(out[0].score, 0.15f);
}

TEST(Tracker, LostTrackReturnsWithinTheBufferOnly) {
  TrackerConfig c;
  c.track_buffer = 3;
  Tracker t(c);
  t.update({box(10, 10, 0.9f)});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(t.update({}).empty());
  // frame 5: seen 4 frames ago (> 3), but the lost pool is matched before stale tracks are dropped
  auto out = t.update({box(10, 10, 0.9f)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].track_id, 1);
  for (int i = 0; i < 6; ++i) t.update({});
  EXPECT_TRUE(t.update({box(10, 10, 0.9f)}).empty());  // removed: a new, unconfirmed track
  out = t.update({box(10, 10, 0.9f)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].track_id, 2);
}

TEST(Tracker, ResetRestartsIds) {
  Tracker t(TrackerConfig{});
  t.update({box(10, 10, 0.9f), box(300, 10, 0.9f)});
  t.reset();
  EXPECT_EQ(t.frame_id(), 0);
  const auto out = t.update({box(500, 10, 0.9f)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].track_id, 1);
}

TEST(Tracker, BotSortFollowsTheCameraWarp) {
  TrackerConfig c;
  c.type = TrackerType::kBotSort;
  Tracker t(c);
  t.update({box(100, 100, 0.9f)});
  const Warp2x3 shift = {1, 0, 60, 0, 1, 0};  // the camera moved: the object appears 60 px right
  const auto out = t.update({box(160, 100, 0.9f)}, &shift);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].track_id, 1);
  Tracker no_warp(c);
  no_warp.update({box(100, 100, 0.9f)});
  EXPECT_TRUE(no_warp.update({box(160, 100, 0.9f)}).empty());  // no overlap without the warp: a new track
}

// ultralytics compares its float32 score array with the thresholds in float, but one score (a
// numpy float32 scalar) with new_track_thresh in double: 0.7f is 0.69999998..., below 0.7.
TEST(Tracker, ThresholdsCompareAsUltralytics) {
  TrackerConfig c;
  c.track_high_thresh = 0.7;  // split in float: 0.7f >= float(0.7), a high detection
  c.new_track_thresh = 0.5;
  EXPECT_EQ(Tracker(c).update({box(10, 10, 0.7f)}).size(), 1u);
  c.track_high_thresh = 0.5;
  c.new_track_thresh = 0.7;  // in double: 0.69999998 < 0.7, no new track
  EXPECT_EQ(Tracker(c).update({box(10, 10, 0.7f)}).size(), 0u);
  EXPECT_EQ(Tracker(c).update({box(10, 10, 0.70000005f)}).size(), 1u);
}

TEST(Tracker, RefusesNonFiniteInputAndStaysUnchanged) {
  Tracker t(TrackerConfig{});
  t.update({box(10, 10, 0.9f)});
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const TrackInput bad : {TrackInput{nan, 0, 10, 10, 0.9f, 0}, TrackInput{0, 0, inf, 10, 0.9f, 0},
                               TrackInput{0, 0, 2e6f, 10, 0.9f, 0}, TrackInput{0, 0, 10, 10, nan, 0}}) {
    try {
      t.update({box(12, 10, 0.9f), bad});
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("detection 1"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(t.frame_id(), 1);
  const Warp2x3 bad_warp = {1, 0, std::nan(""), 0, 1, 0};
  EXPECT_THROW(t.update({}, &bad_warp), Error);
  const auto out = t.update({box(12, 10, 0.9f)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].track_id, 1);
}

// Random boxes of every size, including slivers and boxes much larger than the frame, never
// crash or throw: the sanitizer build runs this too.
TEST(Tracker, SurvivesHostileButValidDetections) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> coord(-1e6f, 1e6f), conf(0, 1), small(0, 1e-30f);
  for (TrackerType type : {TrackerType::kByteTrack, TrackerType::kBotSort}) {
    TrackerConfig c;
    c.type = type;
    Tracker t(c);
    for (int f = 0; f < 60; ++f) {
      std::vector<TrackInput> dets;
      for (int i = 0; i < 12; ++i) {
        const float x = coord(rng), y = coord(rng);
        const float w = i % 3 == 0 ? small(rng) : std::fabs(coord(rng)) / (1 + i);
        const float h = i % 4 == 0 ? small(rng) : std::fabs(coord(rng)) / (1 + i);
        dets.push_back({x, y, std::min(x + w, 1e6f), std::min(y + h, 1e6f), conf(rng), float(i % 3)});
      }
      const Warp2x3 warp = {1.001, 0.002, 5, -0.002, 0.999, -3};
      for (const TrackOutput& o : t.update(dets, f % 2 ? &warp : nullptr)) {
        EXPECT_GE(o.idx, 0);
        EXPECT_LT(o.idx, 12);
        EXPECT_GE(o.track_id, 1);
      }
    }
  }
}

}  // namespace
}  // namespace yolocu

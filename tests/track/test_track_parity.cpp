// Parity with ultralytics' BYTETracker and BOTSORT (gmc none; on the pan sequences BoT-SORT gets the
// true camera warp) on the generated sequences of scripts/track/make_refs.sh: each reference row (one
// tracked box of one frame) must come back with the same detection index, the same track id up to
// one relabelling fixed over the whole sequence, and a box within 1e-3 px. Every difference is
// printed with its frame, detection and ids.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "track/track_parity.hpp"

namespace yolocu {
namespace {

void run_parity(const std::string& tracker_name) {
  if (!test::track_refs_present()) {
    if (test::track_refs_required()) FAIL() << "YOLOCU_REQUIRE_TRACK: no references in " << test::track_refs_dir();
    GTEST_SKIP() << "no tracker references in " << test::track_refs_dir() << " (scripts/track/make_refs.sh makes them)";
  }
  const TrackerConfig cfg = read_tracker_config(test::track_refs_dir() + "/" + tracker_name + ".yaml");
  std::map<std::string, test::Tally> by_kind;
  for (const auto& seq : test::read_track_refs(tracker_name))
    test::add_tally(by_kind[seq.kind], test::compare_sequence(seq, cfg, tracker_name));
  test::expect_parity(by_kind, tracker_name);
}

TEST(TrackParity, ByteTrackMatchesUltralytics) { run_parity("bytetrack"); }
TEST(TrackParity, BotSortMatchesUltralytics) { run_parity("botsort"); }
// bytetrack.yaml with other values: no score fusion, stricter thresholds, a short buffer
TEST(TrackParity, TunedByteTrackMatchesUltralytics) { run_parity("bytetrack_tuned"); }

}  // namespace
}  // namespace yolocu

// Parity with ultralytics' BYTETracker and BOTSORT (gmc none; on the pan sequences BoT-SORT gets the
// true camera warp) on the generated sequences of scripts/track/make_refs.sh: each reference row (one
// tracked box of one frame) must come back with the same detection index, the same track id up to
// one relabelling fixed over the whole sequence, and a box within 1e-3 px. Every difference is
// printed with its frame, detection and ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "track/track_refs.hpp"

namespace yolocu {
namespace {

constexpr double kBoxTolerancePx = 1e-3;
constexpr double kMinAgreement = 0.995;

struct Tally {
  long pairs = 0, agree = 0, missing = 0, extra = 0, relabelled = 0, box_off = 0;
  double max_box_diff = 0;
};

// Runs one sequence; counts (frame, box) pairs of the union of both outputs.
Tally compare_sequence(const test::RefSequence& seq, const TrackerConfig& cfg, std::vector<std::string>& notes) {
  Tally t;
  Tracker tracker(cfg);
  std::map<int64_t, int64_t> ref_to_ours, ours_to_ref;  // the relabelling, fixed on first sight
  for (size_t f = 0; f < seq.frames.size(); ++f) {
    const test::RefFrame& fr = seq.frames[f];
    const auto ours = tracker.update(fr.dets, fr.warp ? &*fr.warp : nullptr);
    std::map<int, TrackOutput> by_idx;
    for (const auto& o : ours) by_idx[o.idx] = o;
    for (const auto& r : fr.out) {
      ++t.pairs;
      const auto it = by_idx.find(r.idx);
      char buf[256];
      if (it == by_idx.end()) {
        ++t.missing;
        std::snprintf(buf, sizeof buf, "frame %zu det %d: ultralytics tracks it as id %lld, yolocu outputs no track for it",
                      f + 1, r.idx, static_cast<long long>(r.track_id));
        notes.push_back(buf);
        continue;
      }
      const TrackOutput o = it->second;
      by_idx.erase(it);
      const double diff = std::max({std::fabs(o.x1 - r.x1), std::fabs(o.y1 - r.y1), std::fabs(o.x2 - r.x2), std::fabs(o.y2 - r.y2)});
      t.max_box_diff = std::max(t.max_box_diff, diff);
      const auto a = ref_to_ours.emplace(r.track_id, o.track_id).first;
      const auto b = ours_to_ref.emplace(o.track_id, r.track_id).first;
      const bool same_id = a->second == o.track_id && b->second == r.track_id;
      if (!same_id) {
        ++t.relabelled;
        std::snprintf(buf, sizeof buf, "frame %zu det %d: ultralytics id %lld (yolocu's %lld so far), yolocu id %lld",
                      f + 1, r.idx, static_cast<long long>(r.track_id), static_cast<long long>(a->second),
                      static_cast<long long>(o.track_id));
        notes.push_back(buf);
      }
      if (diff > kBoxTolerancePx) {
        ++t.box_off;
        std::snprintf(buf, sizeof buf, "frame %zu det %d: box differs by %.3g px", f + 1, r.idx, diff);
        notes.push_back(buf);
      }
      if (same_id && diff <= kBoxTolerancePx && o.score == r.score && o.cls == r.cls) ++t.agree;
    }
    for (const auto& [idx, o] : by_idx) {
      ++t.pairs;
      ++t.extra;
      char buf[160];
      std::snprintf(buf, sizeof buf, "frame %zu det %d: yolocu tracks it as id %lld, ultralytics outputs no track for it",
                    f + 1, idx, static_cast<long long>(o.track_id));
      notes.push_back(buf);
    }
  }
  return t;
}

void run_parity(const std::string& tracker_name) {
  if (!test::track_refs_present()) {
    if (test::track_refs_required()) FAIL() << "YOLOCU_REQUIRE_TRACK: no references in " << test::track_refs_dir();
    GTEST_SKIP() << "no tracker references in " << test::track_refs_dir() << " (scripts/track/make_refs.sh makes them)";
  }
  const TrackerConfig cfg = read_tracker_config(test::track_refs_dir() + "/" + tracker_name + ".yaml");
  std::map<std::string, Tally> by_kind;
  for (const auto& seq : test::read_track_refs(tracker_name)) {
    std::vector<std::string> notes;
    const Tally t = compare_sequence(seq, cfg, notes);
    Tally& k = by_kind[seq.kind];
    k.pairs += t.pairs, k.agree += t.agree, k.missing += t.missing, k.extra += t.extra;
    k.relabelled += t.relabelled, k.box_off += t.box_off, k.max_box_diff = std::max(k.max_box_diff, t.max_box_diff);
    for (size_t i = 0; i < notes.size() && i < 10; ++i) std::printf("  %s %s: %s\n", tracker_name.c_str(), seq.name.c_str(), notes[i].c_str());
    if (notes.size() > 10) std::printf("  %s %s: ... %zu differences in all\n", tracker_name.c_str(), seq.name.c_str(), notes.size());
  }
  ASSERT_FALSE(by_kind.empty());
  for (const auto& [kind, t] : by_kind) {
    const double rate = t.pairs ? double(t.agree) / double(t.pairs) : 1.0;
    std::printf("[parity] %-9s %-13s pairs %5ld  same id+box %6.2f%%  missing %ld extra %ld relabelled %ld box>1e-3 %ld  max box diff %.2g px\n",
                tracker_name.c_str(), kind.c_str(), t.pairs, 100.0 * rate, t.missing, t.extra, t.relabelled, t.box_off, t.max_box_diff);
    EXPECT_GE(rate, kMinAgreement) << tracker_name << " on " << kind;
  }
}

TEST(TrackParity, ByteTrackMatchesUltralytics) { run_parity("bytetrack"); }
TEST(TrackParity, BotSortMatchesUltralytics) { run_parity("botsort"); }
// bytetrack.yaml with other values: no score fusion, stricter thresholds, a short buffer
TEST(TrackParity, TunedByteTrackMatchesUltralytics) { run_parity("bytetrack_tuned"); }

}  // namespace
}  // namespace yolocu

// track_parity.hpp - compares yolocu's tracker with ultralytics' outputs on one reference
// sequence: each reference row (one tracked box of one frame) must come back with the same
// detection index, the same track id up to one relabelling fixed over the whole sequence (on first
// sight), a box within 1e-3 px and the same score and class. Every difference is described.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "track/track_refs.hpp"

namespace yolocu::test {

inline constexpr double kBoxTolerancePx = 1e-3;
inline constexpr double kMinAgreement = 0.995;

struct Tally {
  long pairs = 0, agree = 0, missing = 0, extra = 0, relabelled = 0, box_off = 0;
  double max_box_diff = 0;
};

// Runs one sequence; counts (frame, box) pairs of the union of both outputs.
inline Tally compare_sequence(const RefSequence& seq, const TrackerConfig& cfg, const std::string& label) {
  std::vector<std::string> notes;
  Tally t;
  Tracker tracker(cfg);
  std::map<int64_t, int64_t> ref_to_ours, ours_to_ref;  // the relabelling, fixed on first sight
  for (size_t f = 0; f < seq.frames.size(); ++f) {
    const RefFrame& fr = seq.frames[f];
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
  for (size_t i = 0; i < notes.size() && i < 10; ++i) std::printf("  %s %s: %s\n", label.c_str(), seq.name.c_str(), notes[i].c_str());
  if (notes.size() > 10) std::printf("  %s %s: ... %zu differences in all\n", label.c_str(), seq.name.c_str(), notes.size());
  return t;
}

inline void add_tally(Tally& k, const Tally& t) {
  k.pairs += t.pairs, k.agree += t.agree, k.missing += t.missing, k.extra += t.extra;
  k.relabelled += t.relabelled, k.box_off += t.box_off, k.max_box_diff = std::max(k.max_box_diff, t.max_box_diff);
}

// Prints one line per sequence kind and expects >= 99.5% agreement in each.
inline void expect_parity(const std::map<std::string, Tally>& by_kind, const std::string& label) {
  ASSERT_FALSE(by_kind.empty());
  for (const auto& [kind, t] : by_kind) {
    const double rate = t.pairs ? double(t.agree) / double(t.pairs) : 1.0;
    std::printf("[parity] %-9s %-13s pairs %5ld  same id+box %6.2f%%  missing %ld extra %ld relabelled %ld box>1e-3 %ld  max box diff %.2g px\n",
                label.c_str(), kind.c_str(), t.pairs, 100.0 * rate, t.missing, t.extra, t.relabelled, t.box_off, t.max_box_diff);
    EXPECT_GE(rate, kMinAgreement) << label << " on " << kind;
  }
}

}  // namespace yolocu::test

// yolocu/track_count.hpp - counting tracked objects that cross lines and enter or leave polygon
// zones, per class, over the outputs of one stream's Tracker (one TrackCounter per stream).
//
// Geometry (pixels of the frame, y pointing down): a track's position is its box centre. Between two
// frames in which a track is output, it moves along the segment from its last centre to its new one
// (frames where it was lost are skipped over).
//  - A line (2 points, A -> B) is crossed when that segment intersects the segment AB and the
//    centre changes side. "in" = onto the right-hand side of A -> B as drawn on the picture (for a
//    line drawn left to right: moving down; drawn top to bottom: moving left), "out" = the other
//    way. A centre exactly on the line counts as the left-hand side.
//  - A zone (3 or more points, a simple polygon) is entered ("in") when the centre goes from outside
//    to inside (even-odd rule; a centre on an edge may fall either way) and left ("out") the other
//    way. A track first seen inside a zone has not entered it. "inside" holds the tracks whose
//    centre is inside in the latest frame.
//  - Each track counts at most once per direction per line or zone (a box jittering on a line gives
//    one in and one out, not one a frame), under the class of the frame in which it crosses.
// A track not output for `forget_after` frames is forgotten (memory stays bounded on endless
// streams); when it comes back it is a new track for counting (first seen: no crossing).
// Host only, not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "yolocu/track.hpp"

namespace yolocu {

struct CountPoint {
  double x = 0, y = 0;
};

// 2 points: a counting line; 3 or more: a polygon zone.
struct CountRegion {
  std::vector<CountPoint> points;
  bool is_line() const { return points.size() == 2; }
};

// Parses "x1,y1,x2,y2[,x3,y3,...]" (the CLI's --count-line / --count-zone). kInvalidArgument for
// anything but an even count of finite numbers, or too few points (a line needs exactly 2, a zone
// at least 3).
CountRegion parse_count_region(const std::string& text, bool line);

// Cumulative counts of one region, keyed by class id.
struct RegionCounts {
  std::map<int, int64_t> in, out;
  std::map<int, int64_t> inside;  // zones only: tracks inside in the latest frame
};

struct CountEvent {
  int region = 0;
  int64_t track_id = 0;
  int class_id = 0;
  bool in = true;
};

class TrackCounter {
 public:
  // kInvalidArgument for a region with too few points, a non-finite point, a line of zero length
  // or a zone of zero area.
  explicit TrackCounter(std::vector<CountRegion> regions, int forget_after = 1000);

  // One frame's tracker output (rows of Tracker::update); returns the crossings of this frame in
  // the order of `tracks`, then regions. kInvalidArgument (nothing changed) for a non-finite box or
  // a class beyond +-1e9.
  std::vector<CountEvent> update(const std::vector<TrackOutput>& tracks);

  const std::vector<CountRegion>& regions() const { return regions_; }
  const std::vector<RegionCounts>& counts() const { return counts_; }

 private:
  struct Seen {
    double x = 0, y = 0;
    int64_t frame = 0;
  };
  bool crosses(size_t region, const Seen& from, double x, double y, bool* in) const;
  std::vector<CountRegion> regions_;
  std::vector<RegionCounts> counts_;
  std::map<int64_t, Seen> last_;
  std::set<std::tuple<int64_t, size_t, bool>> counted_;  // (track, region, in)
  int forget_after_;
  int64_t frame_ = 0;
};

}  // namespace yolocu

// Line and zone counting on generated straight-line trajectories whose crossings are known from
// their geometry (worked out by hand in the comments, not by the counter).
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <vector>

#include "yolocu/error.hpp"
#include "yolocu/track_count.hpp"

namespace yolocu {
namespace {

// A 20 x 20 box centred on (cx, cy).
TrackOutput at(int64_t id, double cx, double cy, int cls = 0) {
  TrackOutput t{};
  t.x1 = static_cast<float>(cx - 10), t.y1 = static_cast<float>(cy - 10);
  t.x2 = static_cast<float>(cx + 10), t.y2 = static_cast<float>(cy + 10);
  t.track_id = id, t.score = 0.9f, t.cls = static_cast<float>(cls), t.idx = 0;
  return t;
}

using PerClass = std::map<int, int64_t>;

// Horizontal line y = 100 from x = 0 to x = 200, drawn left to right: its right-hand side on the
// picture is below it (y > 100), so moving down is "in".
//  - track 1 (class 0): x = 50, y 40 -> 160 in steps of 20: crosses once, downward -> in.
//  - track 2 (class 2): x = 150, y 160 -> 40: crosses once, upward -> out.
//  - track 3 (class 0): x = 300, y 40 -> 160: passes beyond the segment's end (x > 200) -> nothing.
//  - track 4 (class 0): x = 100, y 90, 110, 90, 110, ... (jitter on the line): in once, out once.
//  - track 5 (class 0): x = 60, y 60 -> 80 then stops at 80 (never reaches the line) -> nothing.
TEST(TrackCount, LineCrossingsOfStraightPaths) {
  TrackCounter counter({parse_count_region("0,100,200,100", true)});
  std::vector<CountEvent> all;
  for (int f = 0; f <= 6; ++f) {
    const double down = 40 + 20 * f, up = 160 - 20 * f;
    const std::vector<TrackOutput> frame = {at(1, 50, down), at(2, 150, up, 2), at(3, 300, down),
                                            at(4, 100, f % 2 ? 110 : 90), at(5, 60, f < 1 ? 60 : 80)};
    for (const CountEvent& e : counter.update(frame)) all.push_back(e);
  }
  EXPECT_EQ(counter.counts()[0].in, (PerClass{{0, 2}}));   // tracks 1 and 4
  EXPECT_EQ(counter.counts()[0].out, (PerClass{{0, 1}, {2, 1}}));  // track 4, track 2
  ASSERT_EQ(all.size(), 4u);
  // frame 1: track 4 goes 90 -> 110 (in); frame 2 back (out). Track 1: y = 100 at f = 3 is on the
  // line (the left-hand side), 120 at f = 4: in at frame 4. Track 2: 100 at f = 3 counts as the
  // left-hand (upper) side already: out at frame 3.
  EXPECT_EQ(all[0].track_id, 4);
  EXPECT_TRUE(all[0].in);
  EXPECT_EQ(all[1].track_id, 4);
  EXPECT_FALSE(all[1].in);
  EXPECT_EQ(all[2].track_id, 2);
  EXPECT_FALSE(all[2].in);
  EXPECT_EQ(all[3].track_id, 1);
  EXPECT_TRUE(all[3].in);
}

// The same line drawn right to left (200,100 -> 0,100) swaps in and out; a diagonal line crossed by
// a track that is missing for frames in between still counts (the move from last seen to now).
TEST(TrackCount, DirectionFollowsTheLineAndGapsAreBridged) {
  TrackCounter counter({parse_count_region("200,100,0,100", true), parse_count_region("0,0,400,400", true)});
  // track 7 moves down at x = 50 (y 40 -> 160): out of line 0 (drawn right to left). It jumps from
  // (50, 40) to (50, 160) with frames missing in between: it also crosses the diagonal y = x at
  // (50, 50): from y < x (above the diagonal on the picture) to y > x. The diagonal runs from
  // (0, 0) to (400, 400), its right-hand side as drawn is the lower-left half (y > x): in.
  counter.update({at(7, 50, 40)});
  counter.update({});
  counter.update({});
  const std::vector<CountEvent> ev = counter.update({at(7, 50, 160)});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].region, 0);
  EXPECT_FALSE(ev[0].in);
  EXPECT_EQ(ev[1].region, 1);
  EXPECT_TRUE(ev[1].in);
}

// Zone: the square (100,100)-(300,300).
//  - track 1 (class 0) walks along y = 200 from x = 0 to 400 in steps of 50: outside at x = 0, 50,
//    inside at 150..250 (100 on the edge: the test steps over it), outside from 350: one in, one out.
//  - track 2 (class 1) starts inside at (200, 200) and walks right: leaves once -> out only.
//  - track 3 (class 0) walks along y = 50 (above the square): never inside.
TEST(TrackCount, ZoneEntriesExitsAndOccupancy) {
  TrackCounter counter({parse_count_region("100,100,300,100,300,300,100,300", false)});
  const double xs[] = {0, 50, 150, 200, 250, 350, 400};
  std::vector<int64_t> inside_per_frame;
  for (int f = 0; f < 7; ++f) {
    counter.update({at(1, xs[f], 200), at(2, 200 + 50 * f, 200, 1), at(3, xs[f], 50)});
    int64_t inside = 0;
    for (const auto& [cls, n] : counter.counts()[0].inside) inside += n;
    inside_per_frame.push_back(inside);
  }
  EXPECT_EQ(counter.counts()[0].in, (PerClass{{0, 1}}));
  EXPECT_EQ(counter.counts()[0].out, (PerClass{{0, 1}, {1, 1}}));
  // track 2 at x = 200, 250 (inside), 300 (on the right edge: even-odd puts it outside), so it
  // leaves at frame 2; track 1 is inside at frames 2..4.
  EXPECT_EQ(inside_per_frame, (std::vector<int64_t>{1, 1, 1, 1, 1, 0, 0}));
}

// A track forgotten after forget_after frames unseen is new when it comes back: no crossing.
TEST(TrackCount, ForgottenTracksStartAgain) {
  TrackCounter counter({parse_count_region("0,100,200,100", true)}, 10);
  counter.update({at(1, 50, 50)});
  for (int f = 0; f < 80; ++f) counter.update({});
  EXPECT_TRUE(counter.update({at(1, 50, 150)}).empty());
  EXPECT_TRUE(counter.counts()[0].in.empty());
}

TEST(TrackCount, BadRegionsAreRefused) {
  for (const char* bad : {"", "1,2,3", "1,2,3,x", "1,2,3,4,", "nan,1,2,3", "1,2,3,4,5,6"})
    EXPECT_THROW(parse_count_region(bad, true), Error) << bad;
  for (const char* bad : {"1,2,3,4", "0,0,1,1,2,2,3"}) EXPECT_THROW(parse_count_region(bad, false), Error) << bad;
  EXPECT_THROW(TrackCounter({parse_count_region("5,5,5,5", true)}), Error);             // zero length
  EXPECT_THROW(TrackCounter({parse_count_region("0,0,1,1,2,2", false)}), Error);        // zero area
  TrackCounter counter({parse_count_region("0,100,200,100", true)});
  TrackOutput bad = at(1, 50, 50);
  bad.x2 = std::numeric_limits<float>::infinity();
  EXPECT_THROW(counter.update({bad}), Error);
  bad = at(1, 50, 50, 0);
  bad.cls = 3e9f;
  EXPECT_THROW(counter.update({bad}), Error);
  // the largest ids are forgotten like any other (no overflow in the bookkeeping)
  counter.update({at(std::numeric_limits<int64_t>::max(), 50, 50)});
  for (int f = 0; f < 1100; ++f) counter.update({});
  EXPECT_TRUE(counter.update({at(std::numeric_limits<int64_t>::max(), 50, 150)}).empty());
}

}  // namespace
}  // namespace yolocu

// Line and zone counting over tracker outputs (yolocu/track_count.hpp).
#include "yolocu/track_count.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>

#include "core/check.hpp"
#include "yolocu/error.hpp"

namespace yolocu {
namespace {

// > 0: p lies on the right-hand side of a -> b as drawn (y down), < 0: left, 0: on the line.
double side(const CountPoint& a, const CountPoint& b, double px, double py) {
  return (b.x - a.x) * (py - a.y) - (b.y - a.y) * (px - a.x);
}

bool inside_polygon(const std::vector<CountPoint>& poly, double x, double y) {  // even-odd rule
  bool in = false;
  for (size_t i = 0, j = poly.size() - 1; i < poly.size(); j = i++) {
    const CountPoint& p = poly[i];
    const CountPoint& q = poly[j];
    if ((p.y > y) != (q.y > y) && x < (q.x - p.x) * (y - p.y) / (q.y - p.y) + p.x) in = !in;
  }
  return in;
}

double polygon_area(const std::vector<CountPoint>& poly) {
  double a = 0;
  for (size_t i = 0, j = poly.size() - 1; i < poly.size(); j = i++) a += poly[j].x * poly[i].y - poly[i].x * poly[j].y;
  return std::fabs(a) / 2;
}

}  // namespace

CountRegion parse_count_region(const std::string& text, bool line) {
  const std::string what = line ? "count line" : "count zone";
  std::vector<double> v;
  const char* p = text.c_str();
  while (*p) {
    while (*p == ' ') ++p;
    char* end = nullptr;
    errno = 0;
    const double d = std::strtod(p, &end);
    YOLOCU_CHECK(end != p && errno == 0 && std::isfinite(d), kInvalidArgument, what, " '", text,
                 "': expected comma-separated numbers x1,y1,x2,y2,...");
    v.push_back(d);
    p = end;
    while (*p == ' ') ++p;
    if (*p == ',') {
      ++p;
      YOLOCU_CHECK(*p, kInvalidArgument, what, " '", text, "': ends with a comma");
    } else {
      YOLOCU_CHECK(!*p, kInvalidArgument, what, " '", text, "': expected comma-separated numbers x1,y1,x2,y2,...");
    }
  }
  YOLOCU_CHECK(v.size() % 2 == 0, kInvalidArgument, what, " '", text, "': an odd count of numbers (x,y pairs expected)");
  CountRegion r;
  for (size_t i = 0; i + 1 < v.size(); i += 2) r.points.push_back({v[i], v[i + 1]});
  if (line)
    YOLOCU_CHECK(r.points.size() == 2, kInvalidArgument, what, " '", text, "': a line is exactly 2 points (4 numbers)");
  else
    YOLOCU_CHECK(r.points.size() >= 3, kInvalidArgument, what, " '", text, "': a zone needs at least 3 points (6 numbers)");
  return r;
}

TrackCounter::TrackCounter(std::vector<CountRegion> regions, int forget_after)
    : regions_(std::move(regions)), counts_(regions_.size()), forget_after_(forget_after) {
  YOLOCU_CHECK(forget_after > 0, kInvalidArgument, "TrackCounter: forget_after must be > 0");
  for (size_t i = 0; i < regions_.size(); ++i) {
    const std::vector<CountPoint>& pts = regions_[i].points;
    YOLOCU_CHECK(pts.size() >= 2, kInvalidArgument, "count region ", i, ": needs 2 points (a line) or 3 or more (a zone)");
    for (const CountPoint& q : pts)
      YOLOCU_CHECK(std::isfinite(q.x) && std::isfinite(q.y), kInvalidArgument, "count region ", i, ": a non-finite point");
    if (regions_[i].is_line())
      YOLOCU_CHECK(pts[0].x != pts[1].x || pts[0].y != pts[1].y, kInvalidArgument, "count line ", i,
                   ": both ends are the same point");
    else
      YOLOCU_CHECK(polygon_area(pts) > 0, kInvalidArgument, "count zone ", i, ": the polygon has no area");
  }
}

bool TrackCounter::crosses(size_t region, const Seen& from, double x, double y, bool* in) const {
  const std::vector<CountPoint>& pts = regions_[region].points;
  if (!regions_[region].is_line()) {
    const bool was = inside_polygon(pts, from.x, from.y), is = inside_polygon(pts, x, y);
    *in = is;
    return was != is;
  }
  const CountPoint &a = pts[0], &b = pts[1];
  const double s0 = side(a, b, from.x, from.y), s1 = side(a, b, x, y);
  if ((s0 > 0) == (s1 > 0)) return false;
  // where the move meets the line, as a position along A -> B (0..1 = on the segment)
  const double t = s0 / (s0 - s1);
  const double qx = from.x + t * (x - from.x), qy = from.y + t * (y - from.y);
  const double dx = b.x - a.x, dy = b.y - a.y;
  const double u = ((qx - a.x) * dx + (qy - a.y) * dy) / (dx * dx + dy * dy);
  *in = s1 > 0;
  return u >= 0 && u <= 1;
}

std::vector<CountEvent> TrackCounter::update(const std::vector<TrackOutput>& tracks) {
  for (const TrackOutput& t : tracks)
    YOLOCU_CHECK(std::isfinite(t.x1) && std::isfinite(t.y1) && std::isfinite(t.x2) && std::isfinite(t.y2) &&
                     std::fabs(t.cls) < 1e9f,
                 kInvalidArgument, "TrackCounter: track ", t.track_id, " has a non-finite box or a class out of range");
  ++frame_;
  std::vector<CountEvent> events;
  for (RegionCounts& c : counts_) c.inside.clear();
  for (const TrackOutput& t : tracks) {
    const double x = (static_cast<double>(t.x1) + t.x2) / 2, y = (static_cast<double>(t.y1) + t.y2) / 2;
    const int cls = static_cast<int>(t.cls);
    for (size_t r = 0; r < regions_.size(); ++r)
      if (!regions_[r].is_line() && inside_polygon(regions_[r].points, x, y)) counts_[r].inside[cls]++;
    auto it = last_.find(t.track_id);
    if (it != last_.end()) {
      for (size_t r = 0; r < regions_.size(); ++r) {
        bool in = false;
        if (!crosses(r, it->second, x, y, &in) || !counted_.insert(std::make_tuple(t.track_id, r, in)).second) continue;
        (in ? counts_[r].in : counts_[r].out)[cls]++;
        events.push_back({static_cast<int>(r), t.track_id, cls, in});
      }
    }
    last_[t.track_id] = {x, y, frame_};
  }
  if (frame_ % 64 == 0) {  // forget tracks not seen for a while
    for (auto it = last_.begin(); it != last_.end();) {
      if (frame_ - it->second.frame <= forget_after_) {
        ++it;
        continue;
      }
      counted_.erase(counted_.lower_bound(std::make_tuple(it->first, size_t{0}, false)),
                     counted_.upper_bound(std::make_tuple(it->first, std::numeric_limits<size_t>::max(), true)));
      it = last_.erase(it);
    }
  }
  return events;
}

}  // namespace yolocu

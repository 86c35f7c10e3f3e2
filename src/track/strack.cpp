// strack.cpp - see strack.hpp.
#include "track/strack.hpp"

#include <algorithm>
#include <cmath>

namespace yolocu::track {

TrackPtr make_detection(const TrackInput& d, int idx) {
  auto t = std::make_shared<STrack>();
  const float cx = (d.x1 + d.x2) / 2, cy = (d.y1 + d.y2) / 2;
  const float w = d.x2 - d.x1, h = d.y2 - d.y1;
  t->det_tlwh = {cx - w / 2, cy - h / 2, w, h};
  t->score = d.conf;
  t->cls = d.cls;
  t->idx = idx;
  return t;
}

std::array<double, 4> measurement(const std::array<float, 4>& tlwh, BoxLayout layout) {
  const float cx = tlwh[0] + tlwh[2] / 2, cy = tlwh[1] + tlwh[3] / 2;
  if (layout == BoxLayout::kXyah) return {cx, cy, tlwh[2] / tlwh[3], tlwh[3]};
  return {cx, cy, tlwh[2], tlwh[3]};
}

std::array<double, 4> xyxy(const STrack& t, BoxLayout layout) {
  if (!t.has_state) {
    const auto& b = t.det_tlwh;
    return {b[0], b[1], static_cast<float>(b[0] + b[2]), static_cast<float>(b[1] + b[3])};
  }
  const auto& m = t.kalman.mean;
  const double w = layout == BoxLayout::kXyah ? m[2] * m[3] : m[2];
  const double h = m[3];
  const double l = m[0] - w / 2, top = m[1] - h / 2;
  return {l, top, w + l, h + top};
}

std::vector<float> iou_distance(const TrackList& a, const TrackList& b, BoxLayout layout) {
  std::vector<std::array<float, 4>> ba, bb;
  ba.reserve(a.size());
  bb.reserve(b.size());
  for (const auto& t : a) {
    const auto d = xyxy(*t, layout);
    ba.push_back({float(d[0]), float(d[1]), float(d[2]), float(d[3])});
  }
  for (const auto& t : b) {
    const auto d = xyxy(*t, layout);
    bb.push_back({float(d[0]), float(d[1]), float(d[2]), float(d[3])});
  }
  std::vector<float> cost(a.size() * b.size());
  for (size_t i = 0; i < ba.size(); ++i) {
    const auto& p = ba[i];
    const float area_a = (p[2] - p[0]) * (p[3] - p[1]);
    for (size_t j = 0; j < bb.size(); ++j) {
      const auto& q = bb[j];
      const float iw = std::max(std::min(p[2], q[2]) - std::max(p[0], q[0]), 0.0f);
      const float ih = std::max(std::min(p[3], q[3]) - std::max(p[1], q[1]), 0.0f);
      const float inter = iw * ih;
      const float area_b = (q[2] - q[0]) * (q[3] - q[1]);
      const float uni = area_b + area_a - inter;
      cost[i * bb.size() + j] = 1.0f - inter / (uni + 1e-7f);
    }
  }
  return cost;
}

void fuse_score(std::vector<float>& cost, const TrackList& detections) {
  const size_t cols = detections.size();
  for (size_t k = 0; k < cost.size(); ++k) {
    const float sim = 1.0f - cost[k];
    cost[k] = 1.0f - sim * detections[k % cols]->score;
  }
}

void apply_warp(const TrackList& tracks, const Warp2x3& hw) {
  // The 8x8 map is block diagonal: R on the centre and its velocity, |R| on the size and its
  // velocity (sizes never flip sign).
  const double r[4] = {hw[0], hw[1], hw[3], hw[4]};
  const double ra[4] = {std::fabs(r[0]), std::fabs(r[1]), std::fabs(r[2]), std::fabs(r[3])};
  double m8[64] = {};
  for (int blk = 0; blk < 4; ++blk) {
    const double* src = (blk % 2 == 0) ? r : ra;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) m8[(blk * 2 + i) * 8 + blk * 2 + j] = src[i * 2 + j];
  }
  for (const auto& t : tracks) {
    auto& mean = t->kalman.mean;
    std::array<double, 8> nm{};
    for (int i = 0; i < 8; ++i)
      for (int k = 0; k < 8; ++k) nm[i] += m8[i * 8 + k] * mean[k];
    nm[0] += hw[2];
    nm[1] += hw[5];
    mean = nm;
    const auto& p = t->kalman.covariance;
    double mp[64] = {};
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j)
        for (int k = 0; k < 8; ++k) mp[i * 8 + j] += m8[i * 8 + k] * p[k * 8 + j];
    std::array<double, 64> out{};
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j)
        for (int k = 0; k < 8; ++k) out[i * 8 + j] += mp[i * 8 + k] * m8[j * 8 + k];
    t->kalman.covariance = out;
  }
}

namespace {

// Membership in a sorted id list: the lists are tens of tracks, where a sorted vector costs one
// allocation and a hash set one per id.
bool has(const std::vector<int64_t>& sorted, int64_t id) { return std::binary_search(sorted.begin(), sorted.end(), id); }

}  // namespace

TrackList joint_tracks(const TrackList& a, const TrackList& b) {
  std::vector<int64_t> ids;
  ids.reserve(a.size());
  for (const auto& t : a) ids.push_back(t->track_id);
  std::sort(ids.begin(), ids.end());
  TrackList out;
  out.reserve(a.size() + b.size());
  out.insert(out.end(), a.begin(), a.end());
  for (const auto& t : b)
    if (!has(ids, t->track_id)) out.push_back(t);
  return out;
}

TrackList sub_tracks(const TrackList& a, const std::vector<int64_t>& ids) {
  std::vector<int64_t> drop = ids;
  std::sort(drop.begin(), drop.end());
  TrackList out;
  out.reserve(a.size());
  for (const auto& t : a)
    if (!has(drop, t->track_id)) out.push_back(t);
  return out;
}

void remove_duplicate_tracks(TrackList& a, TrackList& b, BoxLayout layout) {
  const std::vector<float> dist = iou_distance(a, b, layout);
  std::vector<bool> drop_a(a.size(), false), drop_b(b.size(), false);
  for (size_t p = 0; p < a.size(); ++p)
    for (size_t q = 0; q < b.size(); ++q) {
      if (!(dist[p * b.size() + q] < 0.15f)) continue;
      const int age_p = a[p]->frame_id - a[p]->start_frame, age_q = b[q]->frame_id - b[q]->start_frame;
      if (age_p > age_q) drop_b[q] = true;
      else drop_a[p] = true;
    }
  TrackList ka, kb;
  for (size_t p = 0; p < a.size(); ++p)
    if (!drop_a[p]) ka.push_back(a[p]);
  for (size_t q = 0; q < b.size(); ++q)
    if (!drop_b[q]) kb.push_back(b[q]);
  a = std::move(ka);
  b = std::move(kb);
}

}  // namespace yolocu::track

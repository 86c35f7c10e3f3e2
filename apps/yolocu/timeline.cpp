// The bench's timeline of GPU batches (see the header).
#include "timeline.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

namespace yolocu::cli {

std::string trace_events(const std::vector<BatchSpan>& spans, int batch) {
  static const char* kStage[4] = {"upload", "letterbox", "engine", "decode+NMS+copy back"};
  std::string out;
  char buf[256];
  for (size_t k = 0; k < spans.size(); ++k) {
    const BatchSpan& s = spans[k];
    for (int i = 0; i < 4; ++i) {
      std::snprintf(buf, sizeof buf,
                    "%s{\"name\": \"%s\", \"cat\": \"batch %zu\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
                    "\"dur\": %.3f, \"args\": {\"images\": %d}}",
                    out.empty() ? "" : ", ", kStage[i], k, batch, s.context, 1000.0 * s.t[i],
                    1000.0 * std::max(0.0, s.t[i + 1] - s.t[i]), s.images);
      out += buf;
    }
  }
  return out;
}

std::string describe_overlap(const std::vector<BatchSpan>& spans) {
  if (spans.empty()) return "no batches";
  double t0 = spans[0].t[0], t1 = spans[0].t[4];
  std::set<int> contexts;
  // Engine stages at once: a sweep over their starts (+1) and ends (-1).
  std::vector<std::pair<double, int>> edges;
  for (const BatchSpan& s : spans) {
    t0 = std::min(t0, s.t[0]);
    t1 = std::max(t1, s.t[4]);
    contexts.insert(s.context);
    edges.push_back({s.t[2], +1});
    edges.push_back({s.t[3], -1});
  }
  std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
    return a.first < b.first || (a.first == b.first && a.second < b.second);  // an end before a start at one time
  });
  int now = 0, most = 0;
  for (const auto& e : edges) most = std::max(most, now += e.second);
  // Upload time that runs while another batch's engine runs.
  double upload = 0, hidden = 0;
  for (size_t a = 0; a < spans.size(); ++a) {
    const double u0 = spans[a].t[0], u1 = spans[a].t[1];
    upload += std::max(0.0, u1 - u0);
    std::vector<std::pair<double, double>> cover;  // other batches' engine intervals within the upload
    for (size_t b = 0; b < spans.size(); ++b) {
      if (b == a) continue;
      const double c0 = std::max(u0, spans[b].t[2]), c1 = std::min(u1, spans[b].t[3]);
      if (c1 > c0) cover.push_back({c0, c1});
    }
    std::sort(cover.begin(), cover.end());
    double end = u0;
    for (const auto& c : cover) {  // the union's length
      if (c.second <= end) continue;
      hidden += c.second - std::max(c.first, end);
      end = c.second;
    }
  }
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%zu batches on %zu contexts in %.3f ms: engines running at once max %d; %.0f%% of the upload time "
                "under another batch's engine",
                spans.size(), contexts.size(), t1 - t0, most, upload > 0 ? 100.0 * hidden / upload : 0.0);
  return buf;
}

}  // namespace yolocu::cli

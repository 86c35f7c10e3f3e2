// mAP as ultralytics/yolov5 v7.0 val.py computes it (process_batch + ap_per_class + compute_ap),
// or as the ultralytics package's val as of 8.4 (ValRules), as docs/postprocess.md ("mAP") states it.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "core/check.hpp"
#include "yolocu/eval.hpp"

namespace yolocu {

namespace {

// torch.linspace(0.5, 0.95, 10) in float32.
float iou_threshold(int t) { return static_cast<float>(0.5 + 0.05 * t); }

// val.py's box_iou (float32, with eps 1e-7 in the denominator).
float eval_iou(const GroundTruth& a, const Detection& b) {
  const float w = std::max(0.f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float h = std::max(0.f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float inter = w * h;
  return inter / ((a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter + 1e-7f);
}

// np.interp(x, xp, fp, left, right) for non-decreasing xp (duplicates allowed: the last of equal
// xp values is used, as numpy's binary search does).
double interp(double x, const std::vector<double>& xp, const std::vector<double>& fp, double left,
              double right) {
  const size_t n = xp.size();
  if (x < xp[0]) return left;
  if (x > xp[n - 1]) return right;
  const size_t j = static_cast<size_t>(std::upper_bound(xp.begin(), xp.end(), x) - xp.begin()) - 1;
  if (j == n - 1 || xp[j] == x) return fp[j];
  const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
  return slope * (x - xp[j]) + fp[j];
}

// np.linspace(0, 1, n)
std::vector<double> linspace01(int n) {
  std::vector<double> v(static_cast<size_t>(n));
  const double step = 1.0 / (n - 1);
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i * step;
  v.back() = 1.0;
  return v;
}

// compute_ap: sentinels, precision envelope, 101-point interpolation, trapezoidal integral.
// With `pr_x`, also the envelope at those recalls (np.interp(x, mrec, mpre): the PR curve's points).
// ValRules::kUltralytics adds the sentinel (last recall, 0) before (1, 0).
double compute_ap(ValRules rules, const std::vector<double>& recall, const std::vector<double>& precision,
                  const std::vector<double>* pr_x = nullptr, std::vector<double>* pr = nullptr) {
  std::vector<double> mrec{0.0}, mpre{1.0};
  mrec.insert(mrec.end(), recall.begin(), recall.end());
  mpre.insert(mpre.end(), precision.begin(), precision.end());
  if (rules == ValRules::kUltralytics) {
    mrec.push_back(recall.empty() ? 1.0 : recall.back());
    mpre.push_back(0.0);
  }
  mrec.push_back(1.0);
  mpre.push_back(0.0);
  for (size_t i = mpre.size() - 1; i-- > 0;) mpre[i] = std::max(mpre[i], mpre[i + 1]);
  if (pr_x && pr) {
    pr->resize(pr_x->size());
    for (size_t i = 0; i < pr_x->size(); ++i) (*pr)[i] = interp((*pr_x)[i], mrec, mpre, mpre.front(), mpre.back());
  }
  static const std::vector<double> x = linspace01(101);
  double ap = 0, prev = interp(x[0], mrec, mpre, mpre.front(), mpre.back());
  for (size_t i = 1; i < x.size(); ++i) {
    const double y = interp(x[i], mrec, mpre, mpre.front(), mpre.back());
    ap += (x[i] - x[i - 1]) * (y + prev) / 2.0;
    prev = y;
  }
  return ap;
}

// smooth(y, 0.1): box filter of 2 * round(len * 0.1) // 2 + 1 points, edges padded by copies.
std::vector<double> smooth(const std::vector<double>& y, double f) {
  const int nf = static_cast<int>(std::nearbyint(y.size() * f * 2)) / 2 + 1;
  const int half = nf / 2;
  std::vector<double> yp(static_cast<size_t>(half), y.front());
  yp.insert(yp.end(), y.begin(), y.end());
  yp.insert(yp.end(), static_cast<size_t>(half), y.back());
  std::vector<double> out(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    double s = 0;
    for (int k = 0; k < nf; ++k) s += yp[i + static_cast<size_t>(k)];
    out[i] = s / nf;
  }
  return out;
}

}  // namespace

std::string image_to_label_path(const std::string& image_path) {
  const std::string sa = "/images/", sb = "/labels/";
  std::string p = image_path;
  const size_t at = p.rfind(sa);
  if (at != std::string::npos) p.replace(at, sa.size(), sb);
  const size_t slash = p.rfind('/'), dot = p.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) p.erase(dot);
  return p + ".txt";
}

std::vector<GroundTruth> load_yolo_labels(const std::string& path, int width, int height, int num_classes) {
  YOLOCU_CHECK(width > 0 && height > 0, kInvalidArgument, "load_yolo_labels: bad image size ",
               width, "x", height);
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};  // no label file: background image
  std::ostringstream text;
  text << f.rdbuf();
  YOLOCU_CHECK(!f.bad(), kIo, path, ": read error");
  return parse_yolo_labels(text.str(), width, height, path, num_classes);
}

std::vector<GroundTruth> parse_yolo_labels(const std::string& text, int width, int height, const std::string& path,
                                           int num_classes) {
  YOLOCU_CHECK(width > 0 && height > 0, kInvalidArgument, "parse_yolo_labels: bad image size ",
               width, "x", height);
  std::istringstream f(text);
  std::vector<std::pair<int, std::vector<double>>> rows;
  bool segments = false;
  std::string line;
  int line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    std::istringstream is(line);
    std::vector<double> v;
    std::string tok;
    while (is >> tok) {
      char* end = nullptr;
      const double d = std::strtod(tok.c_str(), &end);
      YOLOCU_CHECK(end && *end == '\0' && std::isfinite(d), kParse, path, ":", line_no,
                   ": not a number: '", tok, "'");
      v.push_back(d);
    }
    if (v.empty()) continue;
    YOLOCU_CHECK(v.size() >= 5 && v.size() % 2 == 1, kParse, path, ":", line_no,
                 ": expected 'class cx cy w h' (or a class and polygon points), got ", v.size(),
                 " values");
    YOLOCU_CHECK(v[0] >= 0 && v[0] == std::floor(v[0]) && v[0] <= std::numeric_limits<int>::max(), kParse, path,
                 ":", line_no, ": bad class id ", v[0]);
    YOLOCU_CHECK(num_classes <= 0 || v[0] < num_classes, kParse, path, ":", line_no, ": class id ",
                 static_cast<long>(v[0]), " is not a class of the model (it has ", num_classes, ": 0..",
                 num_classes - 1, ")");
    for (size_t i = 1; i < v.size(); ++i)
      YOLOCU_CHECK(v[i] >= 0 && v[i] <= 1, kParse, path, ":", line_no,
                   ": coordinates must be normalised to [0, 1]");
    segments = segments || v.size() > 5;
    const int cls = static_cast<int>(v[0]);
    v.erase(v.begin());
    rows.emplace_back(cls, std::move(v));
  }
  std::vector<GroundTruth> out;
  std::set<std::pair<int, std::vector<double>>> seen;
  for (size_t r = 0; r < rows.size(); ++r) {
    // duplicate label rows are removed (first kept), as the ultralytics dataset loader does
    if (!seen.insert(rows[r]).second) continue;
    const std::vector<double>& v = rows[r].second;
    double cx, cy, w, h;
    if (segments) {  // polygon -> its bounding box (segments2boxes)
      double x0 = 1, y0 = 1, x1 = 0, y1 = 0;
      for (size_t i = 0; i + 1 < v.size(); i += 2) {
        x0 = std::min(x0, v[i]), x1 = std::max(x1, v[i]);
        y0 = std::min(y0, v[i + 1]), y1 = std::max(y1, v[i + 1]);
      }
      cx = (x0 + x1) / 2, cy = (y0 + y1) / 2, w = x1 - x0, h = y1 - y0;
    } else {
      cx = v[0], cy = v[1], w = v[2], h = v[3];
    }
    GroundTruth g;
    g.class_id = rows[r].first;
    g.x1 = static_cast<float>(width * (cx - w / 2));
    g.y1 = static_cast<float>(height * (cy - h / 2));
    g.x2 = static_cast<float>(width * (cx + w / 2));
    g.y2 = static_cast<float>(height * (cy + h / 2));
    out.push_back(g);
  }
  return out;
}

namespace {

std::vector<std::vector<bool>> match_by_iou(const Detections& det, const std::vector<GroundTruth>& labels) {
  std::vector<std::vector<bool>> correct(det.size(), std::vector<bool>(kNumIouThresholds, false));
  struct Pair {
    int l, d;
    float iou;
  };
  // Every (label, detection) pair of one class at the lowest threshold, sorted once: the order is
  // total, so each higher threshold's pairs are this list filtered, in this order.
  std::vector<Pair> pairs;  // row-major (label, detection) order, as torch.where
  for (size_t l = 0; l < labels.size(); ++l)
    for (size_t d = 0; d < det.size(); ++d) {
      if (labels[l].class_id != det[d].class_id) continue;
      const float iou = eval_iou(labels[l], det[d]);
      if (iou >= iou_threshold(0)) pairs.push_back({static_cast<int>(l), static_cast<int>(d), iou});
    }
  // IoU descending; equal IoUs in reverse (label, detection) order (argsort()[::-1]).
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    if (a.iou != b.iou) return a.iou > b.iou;
    return a.l != b.l ? a.l > b.l : a.d > b.d;
  });
  for (int t = 0; t < kNumIouThresholds; ++t) {
    const float thr = iou_threshold(t);
    // First pair of each detection (np.unique leaves them ordered by detection index) ...
    std::map<int, int> by_det;  // detection -> label
    for (const Pair& p : pairs)
      if (p.iou >= thr) by_det.emplace(p.d, p.l);
    // ... then the first remaining pair of each label in that order.
    std::map<int, int> by_label;  // label -> detection
    for (const auto& [d, l] : by_det) by_label.emplace(l, d);
    for (const auto& [l, d] : by_label) correct[static_cast<size_t>(d)][static_cast<size_t>(t)] = true;
  }
  return correct;
}

// ultralytics 8.4's match_predictions (without scipy): the detections in descending confidence
// (equal ones in their order), each one, at each threshold, taking the label that np.argmax picks
// among the IoUs with the labels still unclaimed there (0 for claimed ones and other classes: the
// first of equal maxima), when that IoU reaches the threshold.
std::vector<std::vector<bool>> match_by_confidence(const Detections& det, const std::vector<GroundTruth>& labels) {
  std::vector<std::vector<bool>> correct(det.size(), std::vector<bool>(kNumIouThresholds, false));
  std::vector<size_t> order(det.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return det[a].confidence > det[b].confidence; });
  std::vector<std::vector<bool>> claimed(labels.size(), std::vector<bool>(kNumIouThresholds, false));
  std::vector<float> iou(labels.size());
  for (size_t d : order) {
    bool any = false;
    for (size_t l = 0; l < labels.size(); ++l) {
      iou[l] = labels[l].class_id == det[d].class_id ? eval_iou(labels[l], det[d]) : 0.f;
      any = any || iou[l] >= iou_threshold(0);
    }
    if (!any) continue;
    for (int t = 0; t < kNumIouThresholds; ++t) {
      const size_t ti = static_cast<size_t>(t);
      size_t best = 0;
      float best_iou = -1.f;
      for (size_t l = 0; l < labels.size(); ++l) {
        const float v = claimed[l][ti] ? 0.f : iou[l];
        if (v > best_iou) best = l, best_iou = v;
      }
      if (best_iou >= iou_threshold(t)) {
        correct[d][ti] = true;
        claimed[best][ti] = true;
      }
    }
  }
  return correct;
}

}  // namespace

std::vector<std::vector<bool>> MapEvaluator::match(const Detections& det, const std::vector<GroundTruth>& labels,
                                                   ValRules rules) {
  return rules == ValRules::kUltralytics ? match_by_confidence(det, labels) : match_by_iou(det, labels);
}

void MapEvaluator::add_image(const Detections& det, const std::vector<GroundTruth>& labels) {
  for (const Detection& d : det)
    YOLOCU_CHECK(std::isfinite(d.confidence) && d.class_id >= 0, kInvalidArgument,
                 "MapEvaluator: detection with bad confidence or class");
  for (const GroundTruth& g : labels)
    YOLOCU_CHECK(g.class_id >= 0, kInvalidArgument, "MapEvaluator: negative label class");
  const auto correct = match(det, labels, rules_);
  for (size_t i = 0; i < det.size(); ++i) {
    Record r;
    r.confidence = det[i].confidence;
    r.class_id = det[i].class_id;
    r.order = static_cast<int64_t>(records_.size());
    for (int t = 0; t < kNumIouThresholds; ++t) r.tp[t] = correct[i][static_cast<size_t>(t)];
    records_.push_back(r);
  }
  for (const GroundTruth& g : labels) label_classes_.push_back(g.class_id);
  ++num_images_;
}

MapResult MapEvaluator::compute() const {
  MapResult res;
  res.num_images = num_images_;
  res.num_labels = static_cast<int>(label_classes_.size());
  std::map<int, int> n_labels;
  for (int c : label_classes_) ++n_labels[c];
  if (n_labels.empty()) return res;
  // Confidence descending; ties keep arrival order.
  std::vector<const Record*> sorted;
  for (const Record& r : records_) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Record* a, const Record* b) { return a->confidence > b->confidence; });
  std::map<int, std::vector<const Record*>> by_class;  // each in the order above
  for (const Record* r : sorted) by_class[r->class_id].push_back(r);
  static const std::vector<double> px = linspace01(1000);
  const size_t nc = n_labels.size();
  MapCurves& cv = res.curves;
  cv.x = px;
  cv.precision.assign(nc, std::vector<double>(px.size(), 0.0));
  cv.recall = cv.pr = cv.precision;
  std::vector<std::vector<double>>& p_curve = cv.precision;
  std::vector<std::vector<double>>& r_curve = cv.recall;
  size_t ci = 0;
  for (const auto& [cls, nl] : n_labels) {
    ClassAp ca;
    ca.class_id = cls;
    ca.num_labels = nl;
    const auto it = by_class.find(cls);
    static const std::vector<const Record*> kNone;
    const std::vector<const Record*>& preds = it == by_class.end() ? kNone : it->second;
    ca.num_predictions = static_cast<int>(preds.size());
    if (!preds.empty()) {
      const size_t np = preds.size();
      std::vector<double> neg_conf(np);
      std::vector<std::vector<double>> recall(kNumIouThresholds, std::vector<double>(np));
      std::vector<std::vector<double>> precision = recall;
      for (int t = 0; t < kNumIouThresholds; ++t) {
        double tpc = 0, fpc = 0;
        for (size_t i = 0; i < np; ++i) {
          tpc += preds[i]->tp[t] ? 1 : 0;
          fpc += preds[i]->tp[t] ? 0 : 1;
          recall[static_cast<size_t>(t)][i] = tpc / (nl + 1e-16);
          precision[static_cast<size_t>(t)][i] = tpc / (tpc + fpc);
        }
      }
      for (size_t i = 0; i < np; ++i) neg_conf[i] = -static_cast<double>(preds[i]->confidence);
      for (size_t k = 0; k < px.size(); ++k) {
        r_curve[ci][k] = interp(-px[k], neg_conf, recall[0], 0.0, recall[0].back());
        p_curve[ci][k] = interp(-px[k], neg_conf, precision[0], 1.0, precision[0].back());
      }
      double sum = 0;
      for (int t = 0; t < kNumIouThresholds; ++t) {
        const double ap = compute_ap(rules_, recall[static_cast<size_t>(t)], precision[static_cast<size_t>(t)],
                                     t == 0 ? &px : nullptr, &cv.pr[ci]);
        if (t == 0) ca.ap50 = ap;
        sum += ap;
      }
      ca.ap50_95 = sum / kNumIouThresholds;
    }
    res.per_class.push_back(ca);
    ++ci;
  }
  // P and R at the maximum of the smoothed class-mean F1 curve.
  std::vector<double> f1_mean(px.size(), 0.0);
  cv.f1.assign(nc, std::vector<double>(px.size(), 0.0));
  for (size_t c = 0; c < nc; ++c)
    for (size_t k = 0; k < px.size(); ++k) {
      const double p = p_curve[c][k], r = r_curve[c][k];
      cv.f1[c][k] = 2 * p * r / (p + r + 1e-16);
      f1_mean[k] += cv.f1[c][k] / static_cast<double>(nc);
    }
  const std::vector<double> sm = smooth(f1_mean, 0.1);
  const size_t best = static_cast<size_t>(std::max_element(sm.begin(), sm.end()) - sm.begin());
  cv.best = best;
  for (size_t c = 0; c < nc; ++c) {
    res.per_class[c].precision = p_curve[c][best];
    res.per_class[c].recall = r_curve[c][best];
    res.precision += p_curve[c][best] / static_cast<double>(nc);
    res.recall += r_curve[c][best] / static_cast<double>(nc);
    res.map50 += res.per_class[c].ap50 / static_cast<double>(nc);
    res.map50_95 += res.per_class[c].ap50_95 / static_cast<double>(nc);
  }
  return res;
}

}  // namespace yolocu

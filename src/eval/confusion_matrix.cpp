// ConfusionMatrix (yolocu/eval.hpp): ultralytics' ConfusionMatrix.process_batch for detection.
#include <algorithm>
#include <map>

#include "core/check.hpp"
#include "yolocu/eval.hpp"

namespace yolocu {

namespace {

// ultralytics' box_iou (eps 1e-7 in the denominator).
float box_iou(const GroundTruth& a, const Detection& b) {
  const float w = std::max(0.f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float h = std::max(0.f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float inter = w * h;
  return inter / ((a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter + 1e-7f);
}

}  // namespace

ConfusionMatrix::ConfusionMatrix(int num_classes, float conf, float iou)
    : num_classes_(num_classes), conf_(conf), iou_(iou) {
  YOLOCU_CHECK(num_classes > 0, kInvalidArgument, "ConfusionMatrix: num_classes must be > 0, got ", num_classes);
  matrix_.assign(static_cast<size_t>(num_classes) + 1, std::vector<int64_t>(static_cast<size_t>(num_classes) + 1, 0));
}

void ConfusionMatrix::add_image(const Detections& all, const std::vector<GroundTruth>& labels) {
  const size_t bg = static_cast<size_t>(num_classes_);
  auto cls = [&](int c) {
    YOLOCU_CHECK(c >= 0 && c < num_classes_, kInvalidArgument, "ConfusionMatrix: class ", c, " outside 0..",
                 num_classes_ - 1);
    return static_cast<size_t>(c);
  };
  Detections det;
  for (const Detection& d : all)
    if (d.confidence > conf_) det.push_back(d);
  // Pairs above the IoU threshold; highest IoU first, then one per detection and one per label
  // (the np.unique passes of process_batch keep the first of each after the sort).
  struct Pair {
    size_t l, d;
    float iou;
  };
  std::vector<Pair> pairs;
  for (size_t l = 0; l < labels.size(); ++l)
    for (size_t d = 0; d < det.size(); ++d) {
      const float iou = box_iou(labels[l], det[d]);
      if (iou > iou_) pairs.push_back({l, d, iou});
    }
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) { return a.iou > b.iou; });
  std::map<size_t, Pair> by_det;
  for (const Pair& p : pairs) by_det.emplace(p.d, p);
  std::vector<Pair> kept;
  for (const auto& [d, p] : by_det) kept.push_back(p);
  std::stable_sort(kept.begin(), kept.end(), [](const Pair& a, const Pair& b) { return a.iou > b.iou; });
  std::map<size_t, size_t> label_to_det;
  for (const Pair& p : kept) label_to_det.emplace(p.l, p.d);
  std::vector<bool> det_matched(det.size(), false);
  for (const auto& [l, d] : label_to_det) det_matched[d] = true;
  for (size_t l = 0; l < labels.size(); ++l) {
    const auto it = label_to_det.find(l);
    if (it != label_to_det.end()) ++matrix_[cls(det[it->second].class_id)][cls(labels[l].class_id)];
    else ++matrix_[bg][cls(labels[l].class_id)];  // missed: background
  }
  for (size_t d = 0; d < det.size(); ++d)
    if (!det_matched[d]) ++matrix_[cls(det[d].class_id)][bg];  // false positive: background
}

}  // namespace yolocu

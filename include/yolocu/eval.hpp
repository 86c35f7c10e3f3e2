// yolocu/eval.hpp - detection mAP as ultralytics/yolov5 v7.0 val.py reports it.
//
// Matching per image and IoU threshold (0.50:0.05:0.95), 101-point interpolated AP over the
// precision envelope, P and R at the confidence of maximum smoothed class-mean F1; see
// docs/postprocess.md. Plain C++, single-threaded; boxes in original-image pixels.
#pragma once

#include <string>
#include <vector>

#include "yolocu/detection.hpp"

namespace yolocu {

// One ground-truth box, original-image pixels.
struct GroundTruth {
  int class_id = 0;
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

// Reads a YOLO label file (`class cx cy w h` per line, normalised) into pixels of a width x height
// image. A missing file is a background image (empty result); a malformed line throws kParse.
std::vector<GroundTruth> load_yolo_labels(const std::string& path, int width, int height);
// The same for the text of a label file held in memory; `path` names it in messages.
std::vector<GroundTruth> parse_yolo_labels(const std::string& text, int width, int height,
                                           const std::string& path = "labels");

constexpr int kNumIouThresholds = 10;  // 0.50, 0.55, ..., 0.95

struct ClassAp {
  int class_id = 0;
  int num_labels = 0;
  int num_predictions = 0;
  double ap50 = 0, ap50_95 = 0;  // ap50_95: mean of the 10 thresholds
  double precision = 0, recall = 0;  // at the F1-optimal confidence shared by all classes
};

struct MapResult {
  double map50 = 0, map50_95 = 0, precision = 0, recall = 0;  // means over classes with labels
  std::vector<ClassAp> per_class;                             // classes with labels, ascending
  int num_images = 0, num_labels = 0;
};

// Accumulates images, then computes the metrics (compute() can be called at any point).
class MapEvaluator {
 public:
  // Detections of one image (any order) and its labels.
  void add_image(const Detections& detections, const std::vector<GroundTruth>& labels);
  MapResult compute() const;

  // True-positive flags of each detection at each threshold for one image (val.py's
  // process_batch), exposed for tests: result[d][t].
  static std::vector<std::vector<bool>> match(const Detections& detections,
                                              const std::vector<GroundTruth>& labels);

 private:
  struct Record {
    float confidence;
    int class_id;
    int64_t order;  // arrival order: ties in confidence keep it
    bool tp[kNumIouThresholds];
  };
  std::vector<Record> records_;
  std::vector<int> label_classes_;
  int num_images_ = 0;
};

}  // namespace yolocu

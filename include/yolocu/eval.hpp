// yolocu/eval.hpp - detection mAP as ultralytics/yolov5 v7.0 val.py reports it, or for YOLOv8 /
// YOLO11 as the ultralytics package's val (ValRules).
//
// Matching per image and IoU threshold (0.50:0.05:0.95), 101-point interpolated AP over the
// precision envelope, P and R at the confidence of maximum smoothed class-mean F1; see
// docs/postprocess.md. Plain C++, single-threaded; boxes in original-image pixels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/postprocess.hpp"

namespace yolocu {

// One ground-truth box, original-image pixels.
struct GroundTruth {
  int class_id = 0;
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

// Reads a YOLO label file (`class cx cy w h` per line, normalised) into pixels of a width x height
// image. A missing file is a background image (empty result); a malformed line throws kParse, and
// so does a class id >= `num_classes` when that is > 0 (the message names the file and line).
std::vector<GroundTruth> load_yolo_labels(const std::string& path, int width, int height, int num_classes = 0);
// The same for the text of a label file held in memory; `path` names it in messages.
std::vector<GroundTruth> parse_yolo_labels(const std::string& text, int width, int height,
                                           const std::string& path = "labels", int num_classes = 0);

// ultralytics' img2label_paths: the label file of an image, .../images/.../x.jpg ->
// .../labels/.../x.txt (the last "/images/" of the path replaced, the extension by .txt).
// Without an "images" folder in the path, the .txt beside the image.
std::string image_to_label_path(const std::string& image_path);

constexpr int kNumIouThresholds = 10;  // 0.50, 0.55, ..., 0.95

// Whose val the metrics follow. The two differ in how the detections of one image claim its labels
// at each IoU threshold (a detection and a label of different classes never match; a match needs
// IoU >= the threshold), and in AP's precision envelope past the last recall.
enum class ValRules {
  kYolov5,       // yolov5 v7.0 val.py: every pair over the threshold by descending IoU, the best pair
                 // of each detection, then of those the first of each label in detection order; the
                 // envelope falls linearly from the last recall to 0 at recall 1
  kUltralytics,  // the ultralytics package's val as of 8.4 (YOLOv8, YOLO11): the detections by
                 // descending confidence, each claiming the unclaimed label with the highest IoU
                 // (COCO's rule); the envelope is 0 right after the last recall
};
// The rules of the val that the model family's own package runs.
constexpr ValRules val_rules(OutputLayout layout) {
  return layout == OutputLayout::kYolov8 ? ValRules::kUltralytics : ValRules::kYolov5;
}

struct ClassAp {
  int class_id = 0;
  int num_labels = 0;
  int num_predictions = 0;
  double ap50 = 0, ap50_95 = 0;  // ap50_95: mean of the 10 thresholds
  double precision = 0, recall = 0;  // at the F1-optimal confidence shared by all classes
};

// The curves ultralytics' ap_per_class plots (per_class order): precision, recall and F1 over the
// confidence x (1000 points in [0, 1], IoU 0.5), and the precision envelope over the recall x
// (pr: np.interp(x, mrec, mpre) of compute_ap at IoU 0.5). A class without predictions has zeros.
struct MapCurves {
  std::vector<double> x;
  std::vector<std::vector<double>> precision, recall, f1, pr;
  size_t best = 0;  // index into x of the smoothed mean-F1 maximum (where P and R are read)
};

struct MapResult {
  double map50 = 0, map50_95 = 0, precision = 0, recall = 0;  // means over classes with labels
  std::vector<ClassAp> per_class;                             // classes with labels, ascending
  int num_images = 0, num_labels = 0;
  MapCurves curves;
};

// ultralytics' ConfusionMatrix (detect): detections above `conf` matched to labels at IoU > `iou`,
// one match per label and per detection (highest IoU first). matrix()[predicted][true], both in
// 0..num_classes, where num_classes is the background row / column.
class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int num_classes, float conf = 0.25f, float iou = 0.45f);
  void add_image(const Detections& detections, const std::vector<GroundTruth>& labels);
  int num_classes() const { return num_classes_; }
  float conf() const { return conf_; }
  float iou() const { return iou_; }
  const std::vector<std::vector<int64_t>>& matrix() const { return matrix_; }

 private:
  int num_classes_;
  float conf_, iou_;
  std::vector<std::vector<int64_t>> matrix_;
};

// Accumulates images, then computes the metrics (compute() can be called at any point).
class MapEvaluator {
 public:
  explicit MapEvaluator(ValRules rules = ValRules::kYolov5) : rules_(rules) {}
  // Detections of one image (any order) and its labels.
  void add_image(const Detections& detections, const std::vector<GroundTruth>& labels);
  MapResult compute() const;

  // True-positive flags of each detection at each threshold for one image (val.py's
  // process_batch, or ultralytics' match_predictions), exposed for tests: result[d][t].
  static std::vector<std::vector<bool>> match(const Detections& detections, const std::vector<GroundTruth>& labels,
                                              ValRules rules = ValRules::kYolov5);

 private:
  struct Record {
    float confidence;
    int class_id;
    int64_t order;  // arrival order: ties in confidence keep it
    bool tp[kNumIouThresholds];
  };
  ValRules rules_;
  std::vector<Record> records_;
  std::vector<int> label_classes_;
  int num_images_ = 0;
};

}  // namespace yolocu

// yolocu eval's files besides --json: COCO-format predictions (--save-json) and the data behind
// the plots (--plots DIR), which python/yolocu/plots.py draws with matplotlib.
#pragma once

#include <string>
#include <vector>

#include "yolocu/pipeline.hpp"

namespace yolocu::cli {

// COCO's category id of each class: ultralytics' coco80_to_coco91_class() for an 80-class model
// whose class 0 is "person" (a COCO model), else class id + 1.
std::vector<int> coco_category_ids(const std::vector<std::string>& names);

// The detections as COCO results, as ultralytics' val writes predictions.json: [{"image_id" (the
// file stem, a number when it is all digits), "category_id", "bbox": [x, y, w, h] in original
// pixels (3 decimals), "score" (5 decimals)}, ...]; failed images are left out.
std::string coco_predictions_json(const EvalRun& run, const std::vector<std::string>& names);

// DIR/curves.json (x, and per class with labels: precision, recall, f1 over the confidence, pr
// over the recall, ap50, the metrics) and DIR/confusion_matrix.json (names, conf, iou, matrix
// [predicted][true] with background last).
void write_plot_data(const std::string& dir, const EvalRun& run, const std::vector<std::string>& names);

// Runs `python3 -m yolocu.plots DIR` (matplotlib) and says on stderr what it drew, or, when that
// fails, the command to draw them later. Returns whether the PNG files were drawn.
bool draw_plots(const std::string& dir);

}  // namespace yolocu::cli

#include "eval_outputs.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "json_out.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;
namespace {

double round_to(double v, double scale) { return std::round(v * scale) / scale; }

nlohmann::json image_id(const std::string& path) {
  const std::string stem = fs::path(path).stem().string();
  const bool digits = !stem.empty() && stem.size() < 18 && stem.find_first_not_of("0123456789") == std::string::npos;
  return digits ? nlohmann::json(std::stoll(stem)) : nlohmann::json(stem);
}

std::string name_of(const std::vector<std::string>& names, int id) {
  return id >= 0 && static_cast<size_t>(id) < names.size() ? names[static_cast<size_t>(id)] : std::to_string(id);
}

}  // namespace

std::vector<int> coco_category_ids(const std::vector<std::string>& names) {
  static const int kCoco91[80] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                  22, 23, 24, 25, 27, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
                                  46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65,
                                  67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90};
  const bool coco = names.size() == 80 && names[0] == "person";
  std::vector<int> ids(names.size());
  for (size_t c = 0; c < names.size(); ++c) ids[c] = coco ? kCoco91[c] : static_cast<int>(c) + 1;
  return ids;
}

std::string coco_predictions_json(const EvalRun& run, const std::vector<std::string>& names) {
  const std::vector<int> cat = coco_category_ids(names);
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < run.images.size(); ++i) {
    const ImageResult& r = run.images[i];
    if (!r.error.empty() || !run.label_errors[i].empty()) continue;
    const nlohmann::json id = image_id(r.path);
    // clipped to the image, as val's scale_boxes clips them for its JSON (YOLOv8 / YOLO11 detections
    // reach here unclipped: their val matches them so)
    const auto clip = [](float v, int hi) { return std::min(std::max(v, 0.f), static_cast<float>(hi)); };
    for (const Detection& d : r.detections) {
      const size_t c = static_cast<size_t>(d.class_id);
      const float x1 = clip(d.x1, r.width), y1 = clip(d.y1, r.height), x2 = clip(d.x2, r.width), y2 = clip(d.y2, r.height);
      out.push_back({{"image_id", id},
                     {"category_id", c < cat.size() ? cat[c] : d.class_id + 1},
                     {"bbox", {round_to(x1, 1e3), round_to(y1, 1e3), round_to(x2 - x1, 1e3), round_to(y2 - y1, 1e3)}},
                     {"score", round_to(d.confidence, 1e5)}});
    }
  }
  return out.dump() + "\n";
}

void write_plot_data(const std::string& dir, const EvalRun& run, const std::vector<std::string>& names) {
  const MapResult& m = run.metrics;
  const MapCurves& cv = m.curves;
  nlohmann::json classes = nlohmann::json::array();
  for (size_t k = 0; k < m.per_class.size() && k < cv.precision.size(); ++k) {
    const ClassAp& c = m.per_class[k];
    classes.push_back({{"class_id", c.class_id}, {"name", name_of(names, c.class_id)}, {"labels", c.num_labels},
                       {"ap50", c.ap50}, {"ap50_95", c.ap50_95}, {"precision_at_best", c.precision},
                       {"recall_at_best", c.recall}, {"precision", cv.precision[k]}, {"recall", cv.recall[k]},
                       {"f1", cv.f1[k]}, {"pr", cv.pr[k]}});
  }
  const nlohmann::json curves = {{"x", cv.x},
                                 {"best_index", cv.best},
                                 {"metrics", {{"map50", m.map50}, {"map50_95", m.map50_95}, {"precision", m.precision},
                                              {"recall", m.recall}}},
                                 {"classes", classes}};
  nlohmann::json cm_names = nlohmann::json::array();
  const size_t nc = run.confusion.empty() ? 0 : run.confusion.size() - 1;
  for (size_t c = 0; c < nc; ++c) cm_names.push_back(name_of(names, static_cast<int>(c)));
  const nlohmann::json confusion = {{"names", cm_names}, {"conf", 0.25}, {"iou", 0.45}, {"matrix", run.confusion}};
  write_text((fs::path(dir) / "curves.json").string(), curves.dump() + "\n");
  write_text((fs::path(dir) / "confusion_matrix.json").string(), confusion.dump() + "\n");
}

bool draw_plots(const std::string& dir) {
  const char* python = std::getenv("YOLOCU_PYTHON");
  if (!python || !*python) python = "python3";
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);  // stdout stays the --json's
    execlp(python, python, "-m", "yolocu.plots", dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  const bool ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok)
    std::fprintf(stderr,
                 "yolocu eval: the plot data is in %s; '%s -m yolocu.plots %s' did not draw it (it needs the yolocu "
                 "Python package and matplotlib; from a source tree: python3 python/yolocu/plots.py %s)\n",
                 dir.c_str(), python, dir.c_str(), dir.c_str());
  return ok;
}

}  // namespace yolocu::cli

// evaluate_sources (yolocu/pipeline.hpp): run_pipeline's detections scored against YOLO labels,
// the loop of `yolocu eval` and of the Python package's eval.
#include <filesystem>

#include "yolocu/eval.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu {
namespace fs = std::filesystem;

EvalRun evaluate_sources(Detector& detector, const std::vector<Source>& sources, const std::string& labels_dir,
                         const PipelineOptions& options, const EvalCallback& callback) {
  EvalRun run;
  run.label_errors.resize(sources.size());
  MapEvaluator evaluator;
  auto on_image = [&](size_t i, const ImageResult& r, const ImageView&, const DetectionTrace*, size_t) {
    if (r.error.empty()) {
      try {
        const std::string label = (fs::path(labels_dir) / (fs::path(r.path).stem().string() + ".txt")).string();
        evaluator.add_image(r.detections, load_yolo_labels(label, r.width, r.height));
      } catch (const std::exception& e) {
        run.label_errors[i] = describe_error(e);
      }
    }
    if (callback) callback(i, r, run.label_errors[i]);
  };
  run.images = run_pipeline(detector, sources, options, on_image, &run.summary);
  run.metrics = evaluator.compute();
  run.failed = run.summary.failed;
  for (const std::string& e : run.label_errors) run.failed += e.empty() ? 0 : 1;
  return run;
}

}  // namespace yolocu

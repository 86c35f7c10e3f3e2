// evaluate_sources (yolocu/pipeline.hpp): run_pipeline's detections scored against YOLO labels,
// the loop of `yolocu eval` and of the Python package's eval.
#include <filesystem>
#include <memory>

#include "yolocu/eval.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu {
namespace fs = std::filesystem;

EvalRun evaluate_sources(Detector& detector, const std::vector<Source>& sources, const std::string& labels_dir,
                         const PipelineOptions& options, const EvalCallback& callback) {
  EvalRun run;
  run.label_errors.resize(sources.size());
  MapEvaluator evaluator(val_rules(detector.output_layout()));
  const int num_classes = static_cast<int>(detector.class_names().size());
  std::unique_ptr<ConfusionMatrix> confusion;
  if (num_classes > 0) confusion = std::make_unique<ConfusionMatrix>(num_classes);
  auto on_image = [&](size_t i, const ImageResult& r, const ImageView&, const DetectionTrace*, size_t) {
    if (r.error.empty()) {
      try {
        const std::string label = labels_dir.empty()
                                      ? image_to_label_path(sources[i].name)
                                      : (fs::path(labels_dir) / (fs::path(r.path).stem().string() + ".txt")).string();
        const std::vector<GroundTruth> labels = load_yolo_labels(label, r.width, r.height, num_classes);
        evaluator.add_image(r.detections, labels);
        if (confusion) confusion->add_image(r.detections, labels);
      } catch (const std::exception& e) {
        run.label_errors[i] = describe_error(e);
      }
    }
    if (callback) callback(i, r, run.label_errors[i]);
  };
  run.images = run_pipeline(detector, sources, options, on_image, &run.summary);
  run.metrics = evaluator.compute();
  if (confusion) run.confusion = confusion->matrix();
  run.failed = run.summary.failed;
  for (const std::string& e : run.label_errors) run.failed += e.empty() ? 0 : 1;
  return run;
}

}  // namespace yolocu

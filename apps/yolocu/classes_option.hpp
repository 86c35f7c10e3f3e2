// --classes: the classes kept, by id or by the model's class name ("--classes person car 0").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "args.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/model.hpp"

namespace yolocu::cli {

// The --classes values split into ids (whole numbers, UsageError when negative) and names (every
// other value; comma-separated values are split at the commas, a name keeps its inner spaces).
struct ClassSelection {
  std::vector<int> ids;
  std::vector<std::string> names;
};
ClassSelection class_selection(const Args& args);

// The ids of `names` among the model's class names: the exact name, else the one name equal to it
// ignoring case. An unknown name is a UsageError that lists the model's closest names (or, when
// none is close, the first of them).
std::vector<int> class_ids_of(const std::vector<std::string>& names, const std::vector<std::string>& model_names);

// Adds the ids of --classes' names to options.postprocess.classes (detector_options() took the
// numbers). The names come from the model's metadata: the model is parsed here (under
// options.max_memory) and returned, so that Detector::create need not parse it again; null when
// --classes names no class by name.
std::shared_ptr<const Model> add_named_classes(const Args& args, const std::string& model_path, DetectorOptions& options);

// Detector::create(model_path, options) with --classes' names resolved (add_named_classes).
std::unique_ptr<Detector> create_detector(const Args& args, const std::string& model_path, DetectorOptions options);

}  // namespace yolocu::cli

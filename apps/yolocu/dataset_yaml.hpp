// yolocu eval --data: ultralytics' dataset file (data.yaml), read with libyaml.
#pragma once

#include <string>
#include <vector>

namespace yolocu::cli {

struct Dataset {
  std::vector<std::string> val;    // image folders, files or file lists (.txt), resolved against `path`
  std::vector<std::string> names;  // class names by id ("" where the file leaves an id out)
};

// Reads `path: ROOT`, `val:` (a path or a list of paths, relative to ROOT; ROOT relative to the
// YAML file's folder, ultralytics resolves it against its datasets_dir) and `names:` (a list, or a
// mapping id -> name). `train`, `test`, `nc`, `download` and other keys are read past. Throws
// UsageError naming the file and the problem.
Dataset read_dataset_yaml(const std::string& file);

// The image paths of one `val` entry: a folder or an image as given; a .txt file list read (one
// path a line, relative ones against the list's folder, as ultralytics reads them).
std::vector<std::string> dataset_image_specs(const std::string& entry);

}  // namespace yolocu::cli

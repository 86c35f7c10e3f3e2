// The JSON text the CLI writes (detect --json, eval --json, bench --json, --jsonl lines).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu::cli {

std::string json_string(const std::string& s);
std::string json_number(double v);  // %.9g; non-finite -> null
// One detection as a one-line JSON object: {"box": [x1, y1, x2, y2], "confidence", "class_id", "class_name"}.
std::string detection_json(const Detection& d, const std::vector<std::string>& names);
std::string detections_json(const Detections& dets, const std::vector<std::string>& names, const std::string& indent);
// The "images" array of detect's and eval's --json: one {"path", "width", "height", "error" (only
// when error_of(i) is not empty), "detections"} object per result.
std::string images_json(const std::vector<ImageResult>& results, const std::vector<std::string>& names,
                        const std::function<std::string(size_t)>& error_of);
// Writes `text` to `path` (write_file_atomic: complete or not at all; the previous file stays on a
// failure), or to stdout when path is "-"; kIo naming the path and the system's reason.
void write_text(const std::string& path, const std::string& text);
// fwrite + fflush to stdout, both checked; kIo with the system's reason (a closed pipe, a full disk).
void write_stdout(const std::string& text);

}  // namespace yolocu::cli

// yolocu track's pieces (cmd_track.cpp): the --detections run.
#pragma once

#include <string>
#include <vector>

#include "track_stage.hpp"

namespace yolocu::cli {

// Tracks the JSON lines of `path` (docs/track.md) through `stage`, writing JSON lines to
// `jsonl_path` ('-' = stdout). `names` grows with the class names the input gives. kParse naming
// the line for bad input, kIo for files. The exit status.
int track_detections(const std::string& path, TrackStage& stage, const std::string& jsonl_path,
                     std::vector<std::string>& names, bool quiet);

}  // namespace yolocu::cli

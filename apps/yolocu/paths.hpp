// The paths a command line names: input expansion and the checks made before any work. Each check
// throws a UsageError that names the option, the path and the problem.
#pragma once

#include <string>
#include <vector>

#include "args.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu::cli {

// yolocu::expand_sources (files, folders, glob patterns); a folder without images is a UsageError.
// The folders' files that are not images are named in one line on stderr.
std::vector<Source> expand_inputs(const std::vector<std::string>& specs);

// An input file (`kind`: "an ONNX file", "an image"): exists, is a file (not a folder), can be
// read. For a folder, the files in it whose names end with `ext` are named as a hint.
void check_input_file(const std::string& option, const std::string& path, const std::string& kind,
                      const std::string& ext);
// --model M: check_input_file("--model", M, "an ONNX file", ".onnx").
void check_model_file(const std::string& path);
// An output folder: exists as a folder or is created now (with its parents).
void prepare_output_dir(const std::string& option, const std::string& dir);
// An output file ("-" = stdout): not a folder; its folder is created now; it can be opened for writing.
void check_output_file(const std::string& option, const std::string& path);

// The file name without folder and extension.
std::string file_stem(const std::string& path);
// Output names for inputs of these stems, one each: the first input of a name keeps it, a later one
// (a/x.jpg, then b/x.jpg) gets "<stem>_<its index>" (with "_2", "_3" ... should that be taken too).
std::vector<std::string> unique_stems(const std::vector<std::string>& stems);

}  // namespace yolocu::cli

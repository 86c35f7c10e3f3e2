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

// The run folder of a command's saved files, as ultralytics names it (get_save_dir): --project
// (default `default_project`) / --name (default `default_name`), numbered per run unless --exist-ok;
// or --output-dir DIR, the folder DIR itself (as --project dirname(DIR) --name basename(DIR)
// --exist-ok). Giving --output-dir with --project, --name or --exist-ok is a UsageError.
struct RunDir {
  std::string path;       // project/name, or --output-dir's folder
  bool numbered = false;  // claim() takes the first free of path, path2, path3, ...
  std::string option;     // the option that named it, for messages
};
RunDir run_dir_option(const Args& args, const std::string& default_project, const std::string& default_name);
// Creates the run folder now and returns its path: with `numbered`, ultralytics' increment_path
// (path, then path2, path3, ... up to path9999: the first name that does not exist, created
// atomically so that two runs never share one); else `path`, existing or created. UsageError
// naming the option when it cannot be created.
std::string claim_run_dir(const RunDir& dir);

// Whether a PATH given to detect is a video file: its extension is one of kVideoSuffixes (any
// case), or it is a file without an image's extension whose first bytes are a video container's
// (MP4 / MOV 'ftyp', Matroska / WebM, AVI, MPEG-TS / -PS, ASF, FLV). ultralytics' VID_FORMATS
// less .gif (the video reader's formats, src/video/input_policy.cpp, have no GIF), plus .flv.
constexpr const char* kVideoSuffixes = ".asf, .avi, .flv, .m4v, .mkv, .mov, .mp4, .mpeg, .mpg, .ts, .webm, .wmv";
bool is_video_path(const std::string& path);
// Whether the path's extension is one of kVideoSuffixes (no file access).
bool has_video_suffix(const std::string& path);

// The file name without folder and extension.
std::string file_stem(const std::string& path);
// Output names for inputs of these stems, one each: the first input of a name keeps it, a later one
// (a/x.jpg, then b/x.jpg) gets "<stem>_<its index>" (with "_2", "_3" ... should that be taken too).
std::vector<std::string> unique_stems(const std::vector<std::string>& stems);

}  // namespace yolocu::cli

// The yolocu CLI sub-commands.
#pragma once

#include <string>
#include <vector>

#include "args.hpp"
#include "yolocu/detector.hpp"

namespace yolocu::cli {

int cmd_infer(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_detect(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_bench(int argc, char** argv);

// yolocu detect --source (cmd_detect_video.cpp): the option names it adds to detect's, and the run.
void add_video_options(std::vector<std::string>& valued, std::vector<std::string>& flags);
int cmd_detect_video(const Args& args, const DetectorOptions& options, const std::string& out_dir);

}  // namespace yolocu::cli

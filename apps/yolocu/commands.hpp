// The yolocu CLI sub-commands.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "args.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/int8.hpp"

namespace yolocu::cli {

int cmd_infer(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_detect(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_track(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);
// What a calibration file holds (yolocu calibrate's summary, yolocu inspect --calibration).
void print_calibration_summary(FILE* f, const Int8Calibration& c);
// What the GPU engine runs in INT8 (plan_int8_engine): counts, the layers left in float and why.
void print_int8_engine_plan(FILE* f, const Int8EnginePlan& p);

class FrameStage;
struct RunDir;
// yolocu detect --source (cmd_detect_video.cpp): the option names it adds to detect's, and the run
// over `sources` (video files given as PATHs), or when that is empty over --source's (a source or
// a source list); --save and --save-frames write into `out_dir`, claimed (claim_run_dir) when the
// run starts. `stage` (yolocu track's trackers; nullptr for detect) sits between the detector and
// the outputs.
void add_video_options(std::vector<std::string>& valued, std::vector<std::string>& flags);
int cmd_detect_video(const Args& args, const DetectorOptions& options, const RunDir& out_dir, FrameStage* stage,
                     const std::vector<std::string>& sources = {});
// A file-name stem per source, made unique (the names of --save videos).
std::vector<std::string> source_stems(const std::vector<std::string>& sources);

}  // namespace yolocu::cli

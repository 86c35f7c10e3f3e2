// The detector options of the command line, shared by detect, eval, bench and inspect.
#pragma once

#include <string>
#include <vector>

#include "args.hpp"
#include "yolocu/detector.hpp"

namespace yolocu::cli {

// DetectorOptions from the common options (--conf --iou --max-det --classes --agnostic
// --multi-label --imgsz --device --batch --threads --decode ...) over the given post-processing
// defaults, which may leave conf, iou and max_det to the model family
// (family_postprocess_options(); the Detector resolves them, DetectorOptions::postprocess_defaults).
// `several_gpus`: --device cuda:N,M,... is accepted (video runs: one detector per GPU; the options
// name the first), else refused.
DetectorOptions detector_options(const Args& args, const PostprocessOptions& defaults, bool several_gpus = false);
// --imgsz S | H W into o.input_height / o.input_width (UsageError for a bad size).
void read_input_size(const Args& args, DetectorOptions& o);

// The GPUs --device names ("cuda:0,1" -> {0, 1}, "cuda:2" -> {2}); {} for auto, cpu and cuda.
std::vector<int> cuda_device_list(const Args& args);

// The valued/flag option names detector_options() reads.
std::vector<std::string> detector_valued_options();
std::vector<std::string> detector_flag_options();

// --workers: image decoding threads, 1..64 (default 2); UsageError otherwise.
int decode_workers(const Args& args);

}  // namespace yolocu::cli

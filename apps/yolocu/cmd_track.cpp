// yolocu track: ByteTrack / BoT-SORT ids over the detections of videos and streams (the video
// loop of yolocu detect --source with a TrackStage in it), or over detections given as JSON lines
// (--detections); counting lines and zones; MOT files.
#include <cstdio>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "paths.hpp"
#include "track_commands.hpp"
#include "yolocu/error.hpp"
#include "yolocu/track_count.hpp"

namespace yolocu::cli {
namespace {

void print_help() {
  std::printf(
      "usage: yolocu track --model M.onnx --source SOURCE [options]\n"
      "       yolocu track --detections DETS.jsonl [options]\n"
      "Tracks the objects detected in videos, streams and source lists with ultralytics' ByteTrack or\n"
      "BoT-SORT (the same ids as ultralytics' trackers on the same detections; docs/track.md): one\n"
      "tracker per stream. Each JSON line holds the tracked objects of a frame (the tracker's boxes,\n"
      "with \"track_id\" and \"index\" = the detection's index in the frame), and with counting lines\n"
      "or zones the per-class in/out counts of the stream so far (docs/video.md).\n\n"
      "tracking:\n"
      "  --tracker T        bytetrack.yaml (default), botsort.yaml (ultralytics' defaults, built in) or a\n"
      "                     tracker YAML file of ultralytics' format. BoT-SORT's gmc_method: none or\n"
      "                     sparseOptFlow (a build with OpenCV; camera motion from the frames)\n"
      "  --count-line x1,y1,x2,y2         a counting line in frame pixels (repeatable): crossing it onto\n"
      "                     the right-hand side of x1,y1 -> x2,y2 as seen on the picture counts in, back out\n"
      "  --count-zone x1,y1,x2,y2,x3,y3,...  a polygon zone (repeatable): entering counts in, leaving out\n"
      "  --trail N          frames of each track's trail drawn with --save / --save-frames (30; 0 = none)\n"
      "  --save-txt         DIR/<source>.txt per stream, MOT format: frame,id,x,y,w,h,conf,-1,-1,-1\n"
      "                     (frame = the source's frame number, from 1)\n"
      "  --output-dir DIR   where --save, --save-frames and --save-txt write (runs/track)\n"
      "  --detections F     track detections given as JSON lines (yolocu detect --source --jsonl's format,\n"
      "                     docs/track.md) instead of running a model; output to --jsonl (default stdout)\n\n"
      "Every option of yolocu detect --source applies (see yolocu detect --help): --source, --jsonl,\n"
      "--save, --save-frames, --vid-stride, --frames, --decoder, --batch, --conf, --iou, --device, ...\n"
      "Exit status: 0 all sources processed, 1 a source, the model or an output failed, 2 bad usage.\n");
}

TrackStageOptions track_options(const Args& args, const std::string& out_dir, bool detections) {
  TrackStageOptions o;
  o.tracker = load_tracker_config(args.get("tracker", "bytetrack.yaml"));
  try {
    for (const std::string& s : args.all("count-line")) o.regions.push_back(parse_count_region(s, true));
    for (const std::string& s : args.all("count-zone")) o.regions.push_back(parse_count_region(s, false));
    TrackCounter check(o.regions);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  const long trail = args.get_int("trail", 30);
  if (trail < 0 || trail > 10000) throw UsageError("--trail must be in 0..10000");
  o.trail_frames = static_cast<int>(trail);
  if (args.flag("save-txt")) o.mot_dir = out_dir;
  o.warps_given = detections;
  return o;
}

}  // namespace

int cmd_track(int argc, char** argv) {
  std::vector<std::string> valued = detector_valued_options();
  for (const char* o : {"output-dir", "project", "tracker", "count-line", "count-zone", "trail", "detections"})
    valued.push_back(o);
  std::vector<std::string> flags = detector_flag_options();
  for (const char* f : {"save-txt", "verbose"}) flags.push_back(f);
  add_video_options(valued, flags);
  Args args(argc, argv, 2, flags, valued);
  if (args.flag("help")) {
    print_help();
    return 0;
  }
  const std::string out_dir = args.get("output-dir", args.get("project", "runs/track"));
  if (args.has("detections")) {
    for (const char* o : {"model", "source"})
      if (args.has(o)) throw UsageError(std::string("--") + o + " and --detections exclude each other");
    for (const char* f : {"save", "save-frames"})
      if (args.flag(f)) throw UsageError(std::string("--") + f + " needs frames: use --source, not --detections");
    if (!args.positional().empty()) throw UsageError("unexpected argument '" + args.positional()[0] + "'");
    TrackStage stage(track_options(args, out_dir, true));
    const std::string jsonl = args.get("jsonl", "-");
    if (jsonl != "-") check_output_file("--jsonl", jsonl);
    if (args.flag("save-txt")) prepare_output_dir("--output-dir", out_dir);
    std::vector<std::string> names;
    stage.begin(names, {});
    return track_detections(args.get("detections"), stage, jsonl, names, args.flag("quiet"));
  }
  if (!args.has("source")) throw UsageError("give --source (with --model) or --detections");
  args.require("model");
  TrackStage stage(track_options(args, out_dir, false));
  if (args.flag("save-txt")) prepare_output_dir("--output-dir", out_dir);
  RunDir run_dir;
  run_dir.path = out_dir, run_dir.option = "--output-dir";
  return cmd_detect_video(args, detector_options(args, family_postprocess_options(), /*several_gpus=*/true), run_dir,
                          &stage);
}

}  // namespace yolocu::cli

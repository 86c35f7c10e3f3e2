// yolocu detect: images in, boxes out (JSON, YOLO txt, annotated JPEGs, per-stage .npy dumps).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "args.hpp"
#include "classes_option.hpp"
#include "commands.hpp"
#include "image_outputs.hpp"
#include "json_out.hpp"
#include "options.hpp"
#include "paths.hpp"
#include "report.hpp"
#include "yolocu/error.hpp"
#include "yolocu/pipeline.hpp"
#include "yolocu/video.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;
namespace {

void print_help() {
  std::printf(
      "usage: yolocu detect --model M.onnx [options] PATH...\n"
      "       yolocu detect --model M.onnx [options] --source SOURCE\n"
      "Detects objects in images exactly as ultralytics does (YOLOv5 models: yolov5 v7.0 detect.py;\n"
      "YOLOv8 / YOLO11 models: the ultralytics package's predict): letterbox, model,\n"
      "non_max_suppression, scale_boxes. PATHs are image files (JPEG, PNG, ...), folders (their images,\n"
      "sorted) and glob patterns ('coco/*.jpg', quoted), or video files (.mp4, .mkv, .avi, ... or a\n"
      "video container's bytes), stream URLs (rtsp://, ...) and cameras (/dev/video0, 0): those run as\n"
      "--source does. Annotated images are saved by default, as ultralytics' predict saves them, into\n"
      "a new run folder: runs/detect/predict, then predict2, ...\n\n"
      "post-processing (defaults: detect.py's for YOLOv5, predict's for YOLOv8 / YOLO11):\n"
      "  --conf C           confidence threshold (0.25)\n"
      "  --iou T            NMS IoU threshold (0.45; YOLOv8 / YOLO11: 0.7)\n"
      "  --max-det N        detections per image (1000; YOLOv8 / YOLO11: 300)\n"
      "  --classes 0 2 ...  keep only these classes: ids or the model's class names (--classes person car 0;\n"
      "                     a name with a space in quotes; a PATH right after it needs a '/' or '.')\n"
      "  --agnostic         class-agnostic NMS (also --agnostic-nms)\n"
      "  --multi-label      one candidate per (box, class) above --conf\n"
      "model and execution:\n"
      "  --imgsz S | H W    network input size (default: the model's static size, else 640)\n"
      "  --device D         auto | cpu | cuda | cuda:N (auto); video runs also cuda:N,M,...: one detector\n"
      "                     per GPU, the streams spread over them\n"
      "  --precision P      GPU engine precision: fp16 (default, also --half) or fp32; int8 with\n"
      "                     --calibration FILE (yolocu calibrate; docs/int8.md): INT8 convolutions on\n"
      "                     the GPU, simulated INT8 on the CPU\n"
      "  --letterbox M      GPU letterbox: exact (bit-identical to OpenCV, default) or fast\n"
      "  --batch N          images per forward pass (1)\n"
      "  --threads N        CPU engine threads (0 = all cores)\n"
      "  --max-memory SIZE  CPU engine memory budget, e.g. 4G (default: the machine's RAM); a model\n"
      "                     whose tensors need more is refused before allocating (parsing included)\n"
      "  --max-pixels N     largest image (and video frame) decoded, width x height (50M); a larger one\n"
      "                     is refused by name before its pixels are allocated (e.g. 100M, 1000000)\n"
      "  --workers N        image decoding threads (2); with --decode gpu: file reading threads\n"
      "  --decode D         where JPEGs are decoded: cpu (default: libjpeg-turbo, identical to OpenCV, so\n"
      "                     the same detections as ultralytics) or gpu (nvJPEG on the CUDA device, batched\n"
      "                     by --batch; pixels differ slightly, docs/semantics.md; PNG and EXIF-rotated\n"
      "                     JPEGs still decode on the CPU; not with --save-img or --dump)\n"
      "  --decode-cpu-share X  with --decode gpu: this share of each batch (0-0.9) is decoded on CPU\n"
      "                     threads while nvJPEG decodes the rest (more images/s where nvJPEG is the limit)\n"
      "  --no-engine-graphs launch the GPU engine's kernels one by one instead of replaying a CUDA graph\n"
      "                     (the default with --decode gpu: nvJPEG is slowed less, docs/performance.md\n"
      "                     section 10)\n"
      "  --engine-graphs    replay CUDA graphs also with --decode gpu\n"
      "  --engine-graph-segments K  the GPU engine's forward as K CUDA graphs (1-64, default 1): beside\n"
      "                     --decode gpu, shorter graphs let nvJPEG's work in between\n"
      "  --contexts N       execution contexts (GPU: streams with their own engine); N batches in flight (1)\n"
      "  --max-device-memory SIZE  GPU memory budget per context, e.g. 2G (none)\n"
      "  --tune-batches 1 8 32  GPU: batch sizes whose tactics are tuned at build (1 and --batch)\n"
      "  --pad-batches      GPU: run only the batch sizes 1, 2, 4, ... and --batch, padding a partial\n"
      "                     batch up to the next (fewer sizes to prepare: faster cold start of many streams)\n"
      "  --fast-start       GPU: many streams ready soonest on a cold tactic cache: --pad-batches, only\n"
      "                     --batch tuned (4 cuDNN graph plans a layer), the smaller sizes built without\n"
      "                     compiling kernels (docs/video.md)\n"
      "  --tactic-cache FILE GPU tactic cache ($YOLOCU_TACTIC_CACHE, else ~/.cache/yolocu/tactics.json;\n"
      "                     none: tune every build)\n"
      "outputs (DIR: the run folder, created only when something is saved into it):\n"
      "  --json OUT         write all results as JSON to OUT ('-' = stdout)\n"
      "  --project P        the run folders' parent (runs/detect)\n"
      "  --name N           the run folder's name (predict): P/N, else P/N2, P/N3, ... (a new one per run)\n"
      "  --exist-ok         write into P/N even when it exists (no new numbered folder)\n"
      "  --output-dir DIR   the run folder itself, used as it is (= --project, --name and --exist-ok in one)\n"
      "  --nosave           do not save the annotated images (--save-txt, --save-crop still write)\n"
      "  --save-img         DIR/<stem>.jpg (.png for PNG inputs), the image with boxes and labels drawn:\n"
      "                     the default for images (also --save); not with --decode gpu, which saves none\n"
      "  --save-txt         DIR/labels/<stem>.txt: 'class cx cy w h' normalised, like detect.py\n"
      "  --save-conf        add the confidence to each --save-txt line\n"
      "  --save-crop        DIR/crops/<class name>/<stem>.jpg per detection (<stem>2.jpg, ... for more):\n"
      "                     the box grown as ultralytics' save_one_box (x1.02 + 10 px), clipped\n"
      "  --dump DIR         every stage as .npy: <stem>_letterboxed, _input, _output<k>, _candidates\n"
      "  --verbose          one summary line per image on stdout\n"
      "video, streams, cameras (--source; docs/video.md):\n"
      "  --source S         a video file (mp4, mkv, avi, mov, ...), an rtsp:// / http(s):// URL, a camera\n"
      "                     (/dev/video0 or 0), an image sequence (folder, 'glob*', img_%%05d.jpg), or a\n"
      "                     .txt list of sources, one per line: decoded in parallel, batched together\n"
      "  --vid-stride N     keep every N-th frame, as detect.py (frames N-1, 2N-1, ...) (1)\n"
      "  --start N          skip the frames before frame N of each source (0)\n"
      "  --frames N         at most N frames per source (all)\n"
      "  --jsonl OUT        one JSON line per frame: source, stream, frame, pts, detections ('-' = stdout)\n"
      "  --latency          each JSON line also says latency_ms, from its packet's read to the line; the\n"
      "                     summary gives the p50 / p99 / max\n"
      "  --rtsp-listen      rtsp://HOST:PORT/PATH sources wait there for a publisher (a camera or encoder\n"
      "                     pushing RTSP, e.g. ffmpeg -f rtsp) instead of connecting to a server\n"
      "  --save             DIR/<source>.mp4: the annotated video (H.264 via libx264, else MPEG-4). Off by\n"
      "                     default for video (encoding slows the run): --save or --save-frames asks for it\n"
      "  --save-frames      DIR/<source>/<frame>.jpg: annotated frames\n"
      "  --decoder D        auto | cpu | cuda: NVDEC (H.264 / HEVC) for the GPU detector, frames stay on\n"
      "                     the GPU; auto = cuda when the detector runs on the GPU and NVDEC takes the\n"
      "                     stream, else cpu (auto)\n"
      "  --queue N          decoded frames buffered per source (4); live sources drop the oldest\n"
      "  --reconnects N     network sources: reopen attempts after a failure, -1 = forever (5)\n"
      "  --timeout S        network sources and cameras: seconds to wait when opening or reading (10)\n"
      "  --progress S       progress line on stderr every S seconds, with an ETA for video files; 0 = none\n"
      "                     (2); shown on a terminal, elsewhere only when given. Images: '[done/total]\n"
      "                     img/s, ETA', off a terminal (S > 0 given) a line every 50 images\n"
      "  --batch N          with --source: frames per detector call (default: the number of sources, <= 16)\n"
      "  --timeline FILE    video run: per-batch stage times (batch assembly, read/decode, GPU frames\n"
      "                     ready, letterbox, engine, post-processing, host sync) as medians on stderr with\n"
      "                     NVDEC utilisation from NVML, and FILE as a Chrome trace\n"
      "  --quiet            no progress, summary or 'Results saved to DIR' on stderr\n"
      "Output files are written whole or not at all (a temporary file beside each, renamed over it),\n"
      "leaving the previous file in place on a failure. A failed write of an image's outputs names the\n"
      "file and the reason; the run goes on with the next image, the --json file marks that image\n"
      "(\"error\": \"write failed: ...\") and the exit status is 1.\n"
      "Inputs of the same name (a/x.jpg, b/x.jpg) write x.* and x_<index>.*.\n"
      "Exit status: 0 all images / sources processed, 1 some image, source, output or the model failed,\n"
      "2 bad usage.\n");
}

// "120 images (2 failed: 1 unreadable, 1 write failed), ..." on stderr.
void print_summary(const PipelineSummary& sum, size_t write_failed, const Detector& detector) {
  const double ok = static_cast<double>(std::max<size_t>(sum.images - sum.failed, 1));
  std::string failed = std::to_string(sum.failed + write_failed) + " failed";
  if (sum.failed + write_failed > 0) {
    failed += ":";
    if (sum.failed) failed += " " + std::to_string(sum.failed) + " unreadable" + (write_failed ? "," : "");
    if (write_failed) failed += " " + std::to_string(write_failed) + " write failed";
  }
  std::fprintf(stderr,
               "%zu images (%s), %zu detections on %s; per image: %.1f ms preprocess, %.1f ms inference, "
               "%.1f ms postprocess; %.1f img/s overall\n",
               sum.images, failed.c_str(), sum.detections, device_name(detector.device()), sum.times.preprocess / ok,
               sum.times.inference / ok, sum.times.postprocess / ok,
               sum.wall_ms > 0 ? 1000.0 * static_cast<double>(sum.images) / sum.wall_ms : 0.0);
}

// The image outputs the command line asks for; the run folder is claimed (created) only when
// something is saved into it.
ImageOutputs image_outputs(const Args& args, bool gpu_decode) {
  ImageOutputs out;
  out.verbose = args.flag("verbose");
  out.save_txt = args.flag("save-txt"), out.save_conf = args.flag("save-conf"), out.save_crop = args.flag("save-crop");
  if (out.save_conf && !out.save_txt) throw UsageError("--save-conf needs --save-txt");
  const bool asked = args.flag("save-img") || args.flag("save");
  if (args.flag("nosave") && asked) throw UsageError(std::string("--nosave and --") + (args.flag("save") ? "save" : "save-img") + " contradict each other");
  out.dump_dir = args.get("dump");
  if (gpu_decode && (asked || out.save_crop || !out.dump_dir.empty()))
    throw UsageError(std::string("--decode gpu: ") + (asked ? "--save-img" : out.save_crop ? "--save-crop" : "--dump") +
                     " needs the decoded image on the host: use --decode cpu");
  // saved by default, as ultralytics' predict does; with --decode gpu the pixels never reach the host
  out.save_img = !args.flag("nosave") && !gpu_decode;
  return out;
}

// The image run: PATHs through the pipeline, each image's outputs written as it comes. A failed
// write is reported for its image and the run goes on; the --json file is written at the end.
int detect_images(const Args& args, const std::string& model) {
  for (const char* o : {"vid-stride", "start", "frames", "jsonl", "decoder", "queue", "reconnects", "timeout"})
    if (args.has(o)) throw UsageError(std::string("--") + o + " needs --source or a video PATH");
  for (const char* f : {"save-frames", "latency", "rtsp-listen"})
    if (args.flag(f)) throw UsageError(std::string("--") + f + " needs --source or a video PATH");
  if (args.positional().empty()) throw UsageError("no input images (give files, folders or glob patterns)");
  const DetectorOptions opts = detector_options(args, family_postprocess_options());
  const int workers = decode_workers(args);
  const bool quiet = args.flag("quiet");
  const bool gpu_decode = opts.decode == DecodeDevice::kGpu;
  ImageOutputs out = image_outputs(args, gpu_decode);
  const RunDir run_dir = run_dir_option(args, "runs/detect", "predict");
  const std::string json_path = args.get("json");

  // every path the command line names is checked before the model is loaded
  check_model_file(model);
  const std::vector<Source> items = expand_inputs(args.positional());
  std::vector<std::string> stems;
  for (const Source& s : items) stems.push_back(file_stem(s.name));
  stems = unique_stems(stems);  // a/x.jpg and b/x.jpg: x.jpg and x_1.jpg
  if (!json_path.empty()) check_output_file("--json", json_path);
  const bool saving = out.save_txt || out.save_img || out.save_crop;
  if (saving) out.run_dir = claim_run_dir(run_dir);
  if (out.save_txt) prepare_output_dir(run_dir.option, (fs::path(out.run_dir) / "labels").string());
  if (!out.dump_dir.empty()) prepare_output_dir("--dump", out.dump_dir);

  auto detector = create_detector(args, model, opts);
  const std::vector<std::string>& names = detector->class_names();
  out.names = &names;
  PipelineOptions po;
  po.batch = opts.max_batch;
  po.decode_threads = workers;
  po.trace = !out.dump_dir.empty();
  po.encoded = gpu_decode;
  const double progress_s = args.get_double("progress", 0);
  if (progress_s < 0) throw UsageError("--progress must be >= 0");
  Progress progress(items.size(), quiet || (args.has("progress") && progress_s == 0), progress_s > 0);
  std::vector<std::string> write_errors(items.size());
  size_t write_failed = 0;
  auto on_image = [&](size_t i, const ImageResult& r, const ImageView& image, const DetectionTrace* trace, size_t slot) {
    if (!r.error.empty()) std::fprintf(stderr, "yolocu detect: %s: %s\n", r.path.c_str(), r.error.c_str());
    try {
      out.write(r, image, trace, slot, stems.at(i));
    } catch (const Error& e) {  // this image's outputs stop; the run goes on with the next image
      write_errors[i] = std::string("write failed: ") + e.what();
      write_failed++;
      std::fprintf(stderr, "yolocu detect: %s: %s\n", r.path.c_str(), write_errors[i].c_str());
    }
    progress.update(i + 1);
  };
  PipelineSummary sum;
  const std::vector<ImageResult> results = run_pipeline(*detector, items, po, on_image, &sum);

  int status = sum.failed || write_failed ? 1 : 0;
  if (!json_path.empty()) {
    try {
      write_text(json_path, "{\"images\": " + images_json(results, names, [&](size_t i) {
                   return results[i].error.empty() ? write_errors[i] : results[i].error;
                 }) + "}\n");
    } catch (const Error& e) {
      std::fprintf(stderr, "yolocu detect: --json: %s\n", e.what());
      status = 1;
    }
  }
  if (!quiet) {
    print_summary(sum, write_failed, *detector);
    if (gpu_decode) std::fprintf(stderr, "%s\n", describe_decode(*detector).c_str());
    if (saving) std::fprintf(stderr, "Results saved to %s\n", out.run_dir.c_str());
    if (out.save_txt)
      std::fprintf(stderr, "%zu label%s saved to %s\n", out.labels_written(), out.labels_written() == 1 ? "" : "s",
                   (fs::path(out.run_dir) / "labels").string().c_str());
  }
  return status;
}

// Video files given as PATHs, or --source: the video run (cmd_detect_video.cpp). Saving is off by
// default there (--save, --save-frames): encoding every frame would slow the run.
int detect_videos(const Args& args, const std::string& model, const std::vector<std::string>& videos) {
  if (args.has("decode")) throw UsageError("--decode applies to image files; for video frames see --decoder");
  for (const char* o : {"save-txt", "save-conf", "save-img", "save-crop", "dump", "json"})
    if (args.flag(o) || args.has(o))
      throw UsageError(std::string("--") + o + " is for images; with --source or a video PATH use --save, --save-frames or --jsonl");
  for (const char* f : {"save", "save-frames"})
    if (args.flag("nosave") && args.flag(f)) throw UsageError(std::string("--nosave and --") + f + " contradict each other");
  if (!videos.empty() && !video_input_supported())
    throw UsageError(videos[0] + ": a video, and this yolocu was built without video input (FFmpeg)");
  check_model_file(model);
  return cmd_detect_video(args, detector_options(args, family_postprocess_options(), /*several_gpus=*/true),
                          run_dir_option(args, "runs/detect", "predict"), nullptr, videos);
}

}  // namespace

int cmd_detect(int argc, char** argv) {
  std::vector<std::string> valued = detector_valued_options();
  for (const char* o : {"json", "output-dir", "project", "name", "dump"}) valued.push_back(o);
  std::vector<std::string> flags = detector_flag_options();
  for (const char* f : {"save-txt", "save-conf", "save-img", "save-crop", "nosave", "exist-ok", "verbose"}) flags.push_back(f);
  add_video_options(valued, flags);
  Args args(argc, argv, 2, flags, valued);
  if (args.flag("help")) {
    print_help();
    return 0;
  }
  const std::string model = args.require("model");
  if (args.has("source")) return detect_videos(args, model, {});
  // video files among the PATHs (by extension, else by their first bytes) take the video run
  std::vector<std::string> videos, images;
  for (const std::string& p : args.positional()) (is_video_path(p) ? videos : images).push_back(p);
  if (videos.empty() && args.has("timeline"))
    throw UsageError("--timeline needs a video run (--source or video files); for images see yolocu bench --timeline");
  if (videos.empty()) return detect_images(args, model);
  if (!images.empty())
    throw UsageError("the PATHs mix videos ('" + videos[0] + "') and images ('" + images[0] + "'): give them in separate runs");
  return detect_videos(args, model, videos);
}

}  // namespace yolocu::cli

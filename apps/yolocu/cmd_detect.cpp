// yolocu detect: images in, boxes out (JSON, YOLO txt, annotated JPEGs, per-stage .npy dumps).
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "args.hpp"
#include "commands.hpp"
#include "json_out.hpp"
#include "options.hpp"
#include "paths.hpp"
#include "report.hpp"
#include "yolocu/annotate.hpp"
#include "yolocu/error.hpp"
#include "yolocu/npy.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;
namespace {

void print_help() {
  std::printf(
      "usage: yolocu detect --model M.onnx [options] PATH...\n"
      "       yolocu detect --model M.onnx [options] --source SOURCE\n"
      "Detects objects in images exactly as ultralytics does (YOLOv5 models: yolov5 v7.0 detect.py;\n"
      "YOLOv8 / YOLO11 models: the ultralytics package's predict): letterbox, model,\n"
      "non_max_suppression, scale_boxes. PATHs are image files (JPEG, PNG), folders (their images,\n"
      "sorted) and glob patterns ('coco/*.jpg', quoted).\n\n"
      "post-processing (defaults: detect.py's for YOLOv5, predict's for YOLOv8 / YOLO11):\n"
      "  --conf C           confidence threshold (0.25)\n"
      "  --iou T            NMS IoU threshold (0.45; YOLOv8 / YOLO11: 0.7)\n"
      "  --max-det N        detections per image (1000; YOLOv8 / YOLO11: 300)\n"
      "  --classes 0 2 ...  keep only these class ids\n"
      "  --agnostic         class-agnostic NMS (also --agnostic-nms)\n"
      "  --multi-label      one candidate per (box, class) above --conf\n"
      "model and execution:\n"
      "  --imgsz S | H W    network input size (default: the model's static size, else 640)\n"
      "  --device D         auto | cpu | cuda | cuda:N (auto)\n"
      "  --precision P      GPU engine precision: fp16 (default, also --half) or fp32\n"
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
      "  --tactic-cache FILE GPU tactic cache ($YOLOCU_TACTIC_CACHE, else ~/.cache/yolocu/tactics.json;\n"
      "                     none: tune every build)\n"
      "outputs:\n"
      "  --json OUT         write all results as JSON to OUT ('-' = stdout)\n"
      "  --output-dir DIR   where --save-txt / --save-img write (runs/detect); --project is an alias\n"
      "  --save-txt         DIR/labels/<stem>.txt: 'class cx cy w h' normalised, like detect.py\n"
      "  --save-conf        add the confidence to each --save-txt line\n"
      "  --save-img         DIR/<stem>.jpg (.png for PNG inputs): the image with boxes and labels drawn\n"
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
      "  --save             DIR/<source>.mp4: the annotated video (H.264 via libx264, else MPEG-4)\n"
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
      "  --quiet            no progress or summary on stderr\n"
      "Output files are written whole or not at all (a temporary file beside each, renamed over it): a\n"
      "failed write names the file and the reason and exits 1, leaving the previous file in place.\n"
      "Inputs of the same name (a/x.jpg, b/x.jpg) write x.* and x_<index>.*.\n"
      "Exit status: 0 all images / sources processed, 1 some image, source, output or the model failed,\n"
      "2 bad usage.\n");
}

// YOLO txt lines as detect.py --save-txt writes them: boxes rounded to whole pixels
// (torch.round: half to even), xywh normalised by the image size, '%g', in reversed order.
std::string yolo_txt(const ImageResult& r, bool with_conf) {
  std::string s;
  const float w = static_cast<float>(r.width), h = static_cast<float>(r.height);
  for (auto it = r.detections.rbegin(); it != r.detections.rend(); ++it) {
    const float x1 = std::nearbyint(it->x1), y1 = std::nearbyint(it->y1);
    const float x2 = std::nearbyint(it->x2), y2 = std::nearbyint(it->y2);
    const float cx = (x1 + x2) / 2.f / w, cy = (y1 + y2) / 2.f / h;
    const float bw = (x2 - x1) / w, bh = (y2 - y1) / h;
    char buf[160];
    if (with_conf)
      std::snprintf(buf, sizeof buf, "%d %g %g %g %g %g\n", it->class_id, static_cast<double>(cx), static_cast<double>(cy),
                    static_cast<double>(bw), static_cast<double>(bh), static_cast<double>(it->confidence));
    else
      std::snprintf(buf, sizeof buf, "%d %g %g %g %g\n", it->class_id, static_cast<double>(cx), static_cast<double>(cy),
                    static_cast<double>(bw), static_cast<double>(bh));
    s += buf;
  }
  return s;
}

// Image `slot` of a batched tensor (dim 0), as a [1, ...] copy.
Tensor batch_slice(const Tensor& t, size_t slot) {
  Shape s = t.shape();
  const size_t per = t.nbytes() / static_cast<size_t>(s.at(0));
  s[0] = 1;
  Tensor out(t.dtype(), s);
  std::memcpy(out.data(), static_cast<const uint8_t*>(t.data()) + slot * per, per);
  return out;
}

std::string summary_line(const ImageResult& r, const std::vector<std::string>& names) {
  std::map<int, int> counts;
  for (const Detection& d : r.detections) counts[d.class_id]++;
  std::string s = r.path + ": " + std::to_string(r.width) + "x" + std::to_string(r.height);
  if (counts.empty()) return s + " (no detections)";
  for (const auto& [c, k] : counts) {
    const std::string name = class_name(names, c);
    s += " " + std::to_string(k) + " " + name + ",";
  }
  s.pop_back();
  return s;
}

// What detect writes per image (--save-txt, --save-img, --dump, --verbose, errors on stderr).
struct ImageOutputs {
  bool verbose = false, save_txt = false, save_conf = false, save_img = false;
  std::string out_dir, dump_dir;
  const std::vector<std::string>* names = nullptr;

  // `stem`: the output file names' stem, unique in the run (unique_stems).
  void write(const ImageResult& r, const ImageView& image, const DetectionTrace* trace, size_t slot,
             const std::string& stem) const {
    if (!r.error.empty()) {
      std::fprintf(stderr, "yolocu detect: %s: %s\n", r.path.c_str(), r.error.c_str());
      return;
    }
    if (verbose) std::printf("%s\n", summary_line(r, *names).c_str());
    if (save_txt && !r.detections.empty())
      write_text((fs::path(out_dir) / "labels" / (stem + ".txt")).string(), yolo_txt(r, save_conf));
    if (save_img) {
      Image copy(image.width, image.height);
      for (int y = 0; y < image.height; ++y)
        std::memcpy(copy.row(y), image.data + static_cast<size_t>(y) * image.pitch_bytes, static_cast<size_t>(image.width) * 3);
      draw_detections(copy, r.detections, *names);
      // PNG inputs stay lossless (Python's Results.plot() gives the same pixels), others are JPEGs
      std::string ext = fs::path(r.path).extension().string();
      for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      write_image((fs::path(out_dir) / (stem + (ext == ".png" ? ".png" : ".jpg"))).string(), copy.view());
    }
    if (trace) {
      const fs::path base = fs::path(dump_dir) / stem;
      save_npy(base.string() + "_letterboxed.npy", trace->letterboxed.at(slot));
      save_npy(base.string() + "_input.npy", batch_slice(trace->input, slot));
      for (size_t k = 0; k < trace->outputs.size(); ++k)
        save_npy(base.string() + "_output" + std::to_string(k) + ".npy", batch_slice(trace->outputs[k], slot));
      save_npy(base.string() + "_candidates.npy", trace->candidates.at(slot));
    }
  }
};

void print_summary(const PipelineSummary& sum, const Detector& detector) {
  const double ok = static_cast<double>(std::max<size_t>(sum.images - sum.failed, 1));
  std::fprintf(stderr,
               "%zu images (%zu failed), %zu detections on %s; per image: %.1f ms preprocess, %.1f ms inference, "
               "%.1f ms postprocess; %.1f img/s overall\n",
               sum.images, sum.failed, sum.detections, device_name(detector.device()), sum.times.preprocess / ok,
               sum.times.inference / ok, sum.times.postprocess / ok,
               sum.wall_ms > 0 ? 1000.0 * static_cast<double>(sum.images) / sum.wall_ms : 0.0);
}

// The image run: PATHs through the pipeline, each image's outputs written as it comes.
int detect_images(const Args& args, const std::string& model) {
  for (const char* o : {"vid-stride", "start", "frames", "jsonl", "decoder", "queue", "reconnects", "timeout"})
    if (args.has(o)) throw UsageError(std::string("--") + o + " needs --source");
  for (const char* f : {"save", "save-frames"})
    if (args.flag(f)) throw UsageError(std::string("--") + f + " needs --source (for images: --save-img)");
  if (args.positional().empty()) throw UsageError("no input images (give files, folders or glob patterns)");
  const DetectorOptions opts = detector_options(args, family_postprocess_options());
  const int workers = decode_workers(args);
  const bool quiet = args.flag("quiet");
  ImageOutputs out;
  out.verbose = args.flag("verbose");
  out.save_txt = args.flag("save-txt"), out.save_img = args.flag("save-img"), out.save_conf = args.flag("save-conf");
  if (out.save_conf && !out.save_txt) throw UsageError("--save-conf needs --save-txt");
  out.out_dir = args.get("output-dir", args.get("project", "runs/detect"));
  out.dump_dir = args.get("dump");
  const std::string json_path = args.get("json");
  const bool gpu_decode = opts.decode == DecodeDevice::kGpu;
  if (gpu_decode && (out.save_img || !out.dump_dir.empty()))
    throw UsageError(std::string("--decode gpu: ") + (out.save_img ? "--save-img" : "--dump") +
                     " needs the decoded image on the host: use --decode cpu");

  // every path the command line names is checked before the model is loaded
  check_model_file(model);
  const std::vector<Source> items = expand_inputs(args.positional());
  std::vector<std::string> stems;
  for (const Source& s : items) stems.push_back(file_stem(s.name));
  stems = unique_stems(stems);  // a/x.jpg and b/x.jpg: x.jpg and x_1.jpg
  if (!json_path.empty()) check_output_file("--json", json_path);
  if (out.save_txt || out.save_img) prepare_output_dir("--output-dir", out.out_dir);
  if (out.save_txt) prepare_output_dir("--output-dir", (fs::path(out.out_dir) / "labels").string());
  if (!out.dump_dir.empty()) prepare_output_dir("--dump", out.dump_dir);

  auto detector = Detector::create(model, opts);
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
  auto on_image = [&](size_t i, const ImageResult& r, const ImageView& image, const DetectionTrace* trace, size_t slot) {
    out.write(r, image, trace, slot, stems.at(i));
    progress.update(i + 1);
  };
  PipelineSummary sum;
  const std::vector<ImageResult> results = run_pipeline(*detector, items, po, on_image, &sum);

  if (!json_path.empty())
    write_text(json_path, "{\"images\": " + images_json(results, names, [&](size_t i) { return results[i].error; }) + "}\n");
  if (!quiet) {
    print_summary(sum, *detector);
    if (gpu_decode) std::fprintf(stderr, "%s\n", describe_decode(*detector).c_str());
    if (out.save_txt || out.save_img) std::fprintf(stderr, "results saved to %s\n", out.out_dir.c_str());
  }
  return sum.failed ? 1 : 0;
}

}  // namespace

int cmd_detect(int argc, char** argv) {
  std::vector<std::string> valued = detector_valued_options();
  for (const char* o : {"json", "output-dir", "project", "dump"}) valued.push_back(o);
  std::vector<std::string> flags = detector_flag_options();
  for (const char* f : {"save-txt", "save-conf", "save-img", "verbose"}) flags.push_back(f);
  add_video_options(valued, flags);
  Args args(argc, argv, 2, flags, valued);
  if (args.flag("help")) {
    print_help();
    return 0;
  }
  const std::string model = args.require("model");
  if (!args.has("source")) return detect_images(args, model);
  if (args.has("decode")) throw UsageError("--decode applies to image files; for video frames see --decoder");
  for (const char* o : {"save-txt", "save-img", "dump", "json"})
    if (args.flag(o) || args.has(o)) throw UsageError(std::string("--") + o + " is for images; with --source use --save, --save-frames or --jsonl");
  check_model_file(model);
  return cmd_detect_video(args, detector_options(args, family_postprocess_options()),
                          args.get("output-dir", args.get("project", "runs/detect")), nullptr);
}

}  // namespace yolocu::cli

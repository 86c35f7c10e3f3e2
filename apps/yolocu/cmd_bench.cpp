// yolocu bench: trtexec-style latency and throughput of the whole detector (image in host memory
// -> boxes in host memory) and of its stages, per batch size; optional JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "args.hpp"
#include "classes_option.hpp"
#include "commands.hpp"
#include "json_out.hpp"
#include "options.hpp"
#include "paths.hpp"
#include "report.hpp"
#include "stats.hpp"
#include "timeline.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "yolocu/pipeline.hpp"
#include "yolocu/postprocess.hpp"

namespace yolocu::cli {
namespace {

// ---- --from-jpeg: files -> boxes ------------------------------------------------------------------

// The files of --from-jpeg DIR cycled to --images sources, read once (into the page cache).
struct JpegSet {
  std::string dir;
  long total = 0, threads = 0, rounds = 3;
  std::vector<Source> files, items;
};

JpegSet load_jpeg_set(const Args& args, const DetectorOptions& base) {
  JpegSet set;
  set.dir = args.get("from-jpeg");
  set.total = args.get_int("images", 4096);
  if (set.total < 1) throw UsageError("--images must be >= 1");
  set.rounds = args.get_int("rounds", 3);
  if (set.rounds < 1 || set.rounds > 1000) throw UsageError("--rounds must be in 1..1000");
  set.threads = args.get_int("decode-threads", 2);
  if (set.threads < 1 || set.threads > 256) throw UsageError("--decode-threads must be in 1..256");
  set.files = expand_inputs({set.dir});
  for (long i = 0; i < set.total; ++i) set.items.push_back(set.files[static_cast<size_t>(i) % set.files.size()]);
  size_t bytes = 0;
  for (const Source& f : set.files) bytes += read_file_bytes(f.name).size();  // into the page cache
  const bool gpu = base.decode == DecodeDevice::kGpu;
  char share[64] = "";
  if (gpu && base.decode_cpu_share > 0)
    std::snprintf(share, sizeof share, ", %.0f%% of each batch on CPU threads", 100.0 * base.decode_cpu_share);
  std::fprintf(stderr, "from %s: %zu files (%.1f MB), cycled to %ld images; decode %s%s, %ld reader%s; %d context(s), "
               "as many calls at once; engine %s\n", set.dir.c_str(), set.files.size(), static_cast<double>(bytes) / 1e6,
               set.total, gpu ? "gpu (nvJPEG)" : "cpu", share, set.threads, gpu ? " threads" : "/decoder threads",
               std::max(1, base.contexts), base.engine_graphs ? "CUDA graphs" : "launched eagerly");
  return set;
}

// --stage-times: a separate pass with stage profiling on (CUDA events per batch; each batch's stream
// is held until it is enqueued, so the times are device time): where a batch's device time goes
// while the others run beside it.
void from_jpeg_stage_pass(Detector& det, const JpegSet& set, const PipelineOptions& po, int b, bool gpu) {
  det.set_stage_profiling(true);
  PipelineSummary ps;
  const std::vector<Source> part(set.items.begin(), set.items.begin() + std::min<long>(set.total, 32L * b));
  run_pipeline(det, part, po, nullptr, &ps);
  det.set_stage_profiling(false);
  const double pb = std::max(1, ps.times.gpu_timed_batches);
  std::printf("       gpu ms per batch (profiling pass, %d batches timed, %d left out): %s %.3f, letterbox %.3f, "
              "engine %.3f, post %.3f; wall per batch %.3f\n", ps.times.gpu_timed_batches,
              ps.times.gpu_untimed_batches, gpu ? "wait for the decode" : "upload", ps.times.gpu_upload / pb,
              ps.times.gpu_letterbox / pb, ps.times.gpu_engine / pb, ps.times.gpu_postprocess / pb,
              ps.wall_ms / std::max(1, ps.times.batches));
}

// One batch size of --from-jpeg: its table rows and its JSON object; `failed` receives the failed images.
std::string from_jpeg_row(const Args& args, const DetectorOptions& base, const JpegSet& set, int b,
                          const std::string& model, size_t* failed) {
  const bool gpu = base.decode == DecodeDevice::kGpu;
  DetectorOptions o = base;
  o.max_batch = b;
  auto det = Detector::create(model, o);
  std::fprintf(stderr, "batch %d: detector %s\n", b, describe_build(*det).c_str());
  PipelineOptions po;
  po.batch = b;
  po.decode_threads = static_cast<int>(set.threads);
  po.encoded = gpu;
  // Warm-up: every call slot, context and nvJPEG decoder of the timed run used (buffers grown, nvJPEG
  // states initialised), twice as many images as the run keeps in flight.
  const long warm_n = std::min<long>(set.total, 2L * static_cast<long>(pipeline_images_in_flight(*det, po)));
  const std::vector<Source> warm(set.items.begin(), set.items.begin() + warm_n);
  run_pipeline(*det, warm, po);
  // --rounds timed passes over the images; the row is the median pass (by wall time).
  struct Round {
    PipelineSummary sum;
    long long on_gpu = 0, on_cpu = 0;
    double rate = 0;
  };
  std::vector<Round> rounds(static_cast<size_t>(set.rounds));
  DecodeStats after;
  size_t failed_any = 0;
  for (Round& r : rounds) {
    const DecodeStats before = det->decode_stats();
    run_pipeline(*det, set.items, po, nullptr, &r.sum);
    after = det->decode_stats();
    r.rate = r.sum.wall_ms > 0 ? 1000.0 * static_cast<double>(r.sum.images) / r.sum.wall_ms : 0.0;
    // --decode cpu: the reader threads decode (decode_image); --decode gpu: detect_encoded counts
    r.on_gpu = gpu ? after.gpu - before.gpu : 0;
    r.on_cpu = gpu ? after.cpu - before.cpu : static_cast<long long>(r.sum.images - r.sum.failed);
    failed_any = std::max(failed_any, r.sum.failed);
  }
  std::vector<double> rates;
  for (const Round& r : rounds) rates.push_back(r.rate);
  std::sort(rounds.begin(), rounds.end(), [](const Round& x, const Round& y) { return x.sum.wall_ms < y.sum.wall_ms; });
  const Round& med = rounds[rounds.size() / 2];
  const PipelineSummary& sum = med.sum;
  char decoded[160];
  std::snprintf(decoded, sizeof decoded, "%lld gpu, %lld cpu (%s)%s", med.on_gpu, med.on_cpu,
                gpu ? after.backend.c_str() : "cpu, reader threads", failed_any ? " FAILED IMAGES" : "");
  std::printf("%-6s %-6s %-7ld %-6d | %8.3f %10.0f | %s\n", device_name(det->device()), decode_device_name(o.decode),
              set.threads, b, sum.wall_ms / 1000.0, med.rate, decoded);
  if (rounds.size() > 1) {
    std::string list;
    for (double r : rates) list += (list.empty() ? "" : " ") + std::to_string(static_cast<long>(r + 0.5));
    std::printf("       %zu rounds, images/s in run order: %s (the row: their median)\n", rounds.size(), list.c_str());
  }
  // Where the calls' host time went, per batch (summed over the concurrent calls: with N contexts
  // up to N x the wall time): decode (GPU decode: its host phase) + input enqueue, forward enqueue,
  // post-processing enqueue + the wait for the results.
  const double nb = std::max(1.0, static_cast<double>(sum.images) / b);
  std::printf("       host ms per batch: input %.3f, forward %.3f, post + wait %.3f; wall per batch %.3f\n",
              sum.times.preprocess / nb, sum.times.inference / nb, sum.times.postprocess / nb, sum.wall_ms / nb);
  std::fflush(stdout);  // the rows so far stay in a log even if a later pass is killed
  if (args.flag("stage-times") && det->device() == Device::kCuda) from_jpeg_stage_pass(*det, set, po, b, gpu);
  *failed = failed_any;
  std::string all;
  for (double r : rates) all += (all.empty() ? "" : ", ") + json_number(r);
  return "{\"device\": " + json_string(device_name(det->device())) + ", \"batch\": " + std::to_string(b) +
         ", \"wall_ms\": " + json_number(sum.wall_ms) + ", \"images_per_s\": " + json_number(med.rate) +
         ", \"rounds_images_per_s\": [" + all + "], \"failed\": " + std::to_string(failed_any) +
         ", \"decoded_gpu\": " + std::to_string(med.on_gpu) + ", \"decoded_cpu\": " + std::to_string(med.on_cpu) +
         ", \"decode_backend\": " + json_string(gpu ? after.backend : "cpu") + "}";
}

// --from-jpeg DIR: files -> boxes, the whole pipeline of `yolocu detect DIR`: reader threads read
// (and with --decode cpu decode) the files in order, the calling thread runs the detector in
// batches (detect(), or detect_encoded() with nvJPEG for --decode gpu). The files are cycled to
// --images images and read once before timing (the page cache holds them, as in a warm dataset).
int bench_from_jpeg(const Args& args, const DetectorOptions& base, const std::vector<int>& batches,
                    const std::string& model) {
  const JpegSet set = load_jpeg_set(args, base);
  std::printf("%-6s %-6s %-7s %-6s | %8s %10s | %s\n", "device", "decode", "threads", "batch", "wall s", "images/s",
              "decoded");
  std::string json = "{\"model\": " + json_string(model) + ", \"from_jpeg\": " + json_string(set.dir) + ", \"files\": " +
                     std::to_string(set.files.size()) + ", \"images\": " + std::to_string(set.total) + ", \"decode\": " +
                     json_string(decode_device_name(base.decode)) + ", \"decode_threads\": " + std::to_string(set.threads) +
                     ", \"results\": [";
  for (size_t k = 0; k < batches.size(); ++k) {
    const int b = batches[k];
    if (b < 1) throw UsageError("--batches: sizes must be >= 1");
    size_t failed = 0;
    json += std::string(k ? ", " : "") + from_jpeg_row(args, base, set, b, model, &failed);
    if (failed) {
      std::fprintf(stderr, "%zu images failed\n", failed);
      return 1;
    }
  }
  json += "]}\n";
  if (args.has("json")) write_text(args.get("json"), json);
  return 0;
}

// ---- the image benchmark: latency, throughput, GPU stages -----------------------------------------

void print_help() {
  std::printf(
      "usage: yolocu bench --model M [--batches 1 8 32] [--image bus.jpg] [--iters 100] [--warmup 10]\n"
      "                    [--device auto|cpu|cuda] [--precision fp16|fp32|int8 [--calibration FILE]] [--letterbox exact|fast]\n"
      "                    [--conf 0.25 --iou 0.45 --max-det 1000 ...] [--json OUT]\n"
      "                    [--tactic-cache FILE|none] [--tune-batches 1 8 32] [--pad-batches] [--fast-start] [--max-device-memory SIZE]\n"
      "                    [--contexts N] [--depth K] [--timeline trace.json]\n"
      "       yolocu bench --model M --from-jpeg DIR [--decode cpu|gpu] [--decode-cpu-share X] [--decode-threads N]\n"
      "                    [--images 4096] [--rounds 3]\n"
      "                    [--batches 32 ...] [--device ...] [--contexts N] [--stage-times] [--json OUT]\n"
      "Per batch size, after warm-up (trtexec's three views):\n"
      "  latency     one detect() of one batch at a time, decoded image in host memory -> boxes in\n"
      "              host memory: median, p90, p99, and the host's enqueue time (median);\n"
      "  throughput  one detect() of K batches (default 2 x contexts, at least 4): with --contexts >= 2\n"
      "              the batches overlap (upload, compute and copy back of different batches at once);\n"
      "  GPU stages  a separate pass with stage profiling on: the device time of the upload, letterbox,\n"
      "              engine and decode + NMS (+ copy back) of one batch, medians (CUDA events);\n"
      "  --timeline  (GPU) three throughput calls with stage profiling: every batch's stages per context as\n"
      "              a Chrome trace (chrome://tracing, Perfetto) and a line on their overlap.\n"
      "Without --image a synthetic 810x1080 image is used. The detector options of yolocu detect apply.\n"
      "--from-jpeg DIR times files -> boxes as `yolocu detect DIR` runs it: the folder's images cycled to\n"
      "--images images (page-cached), N threads reading (--decode cpu: and decoding) them, the detector\n"
      "in batches (--decode gpu: nvJPEG decode inside detect_encoded); after a warm-up of twice the images\n"
      "the run keeps in flight, --rounds timed passes; prints the median pass's images/s per batch size;\n"
      "--stage-times adds a pass with stage profiling: each batch's device time per stage.\n");
}

// --image, or a synthetic 810x1080 image.
Image bench_image(const Args& args, const DecodeLimits& limits) {
  if (args.has("image")) return decode_image_file(args.get("image"), limits);
  Image image(810, 1080);
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width() * 3; ++x) image.row(y)[x] = static_cast<uint8_t>((x * 7 + y * 13) & 0xff);
  return image;
}

struct ImageBenchOptions {
  long iters = 100, warmup = 10, depth = 0;  // depth 0: 2 x contexts, at least 4
  bool timeline = false;
};

// One batch size's figures.
struct BatchFigures {
  Stats e2e, enqueue, upload, letterbox, engine, post;
  size_t boxes = 0;  // detections of image 0
  int contexts = 1, in_flight = 0;
  long depth = 0;
  double throughput = 0;
  bool gpu = false;
};

// Latency: one batch per call, end to end and the host's enqueue time.
void latency_pass(Detector& det, const std::vector<ImageView>& batch, long iters, BatchFigures& f) {
  std::vector<double> e2e, enq;
  for (long i = 0; i < iters; ++i) {
    const auto a = std::chrono::steady_clock::now();
    const auto r = det.detect(batch);
    e2e.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    const StageTimes t = det.last_times();
    enq.push_back(t.preprocess + t.inference);
    f.boxes = r[0].size();
  }
  f.e2e = stats_of(e2e);
  f.enqueue = stats_of(enq);
}

// Throughput: `depth` batches per call, overlapped across the contexts.
void throughput_pass(Detector& det, const std::vector<ImageView>& many, int b, long iters, BatchFigures& f) {
  const long thr_iters = std::max(3L, iters / f.depth);
  det.detect(many);  // warm: every context's buffers at this size
  const auto ta = std::chrono::steady_clock::now();
  for (long i = 0; i < thr_iters; ++i) {
    det.detect(many);
    f.in_flight = std::max(f.in_flight, det.last_times().max_in_flight);
  }
  const double thr_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ta).count();
  f.throughput = 1000.0 * static_cast<double>(b * f.depth * thr_iters) / thr_ms;
}

// --timeline: three throughput calls with stage profiling on, each batch's stages on the device, per
// context, appended to `timeline` as Chrome trace events.
void timeline_pass(Detector& det, const std::vector<ImageView>& many, int b, std::string& timeline) {
  if (det.device() != Device::kCuda) {
    std::fprintf(stderr, "timeline, batch %d: none (the CPU detector has no GPU stages)\n", b);
    return;
  }
  det.set_stage_profiling(true);
  for (int i = 0; i < 3; ++i) det.detect(many);
  const std::vector<BatchSpan> spans = det.take_timeline();
  det.set_stage_profiling(false);
  std::fprintf(stderr, "timeline, batch %d: %s\n", b, describe_overlap(spans).c_str());
  const std::string ev = trace_events(spans, b);
  if (!ev.empty()) timeline += (timeline.empty() ? "" : ", ") + ev;
}

// GPU stages: a separate pass with profiling on (its events cost the host a few us per batch).
void gpu_stage_pass(Detector& det, const std::vector<ImageView>& batch, int b, long iters, BatchFigures& f) {
  std::vector<double> up, lb, eng, post;
  int untimed = 0;
  det.set_stage_profiling(true);
  for (long i = 0; i < std::min(iters, 50L); ++i) {
    det.detect(batch);
    const StageTimes t = det.last_times();
    if (t.gpu_timed_batches == 0) {  // its gate gave up waiting for the enqueue: not device time alone
      ++untimed;
      continue;
    }
    up.push_back(t.gpu_upload);
    lb.push_back(t.gpu_letterbox);
    eng.push_back(t.gpu_engine);
    post.push_back(t.gpu_postprocess);
  }
  det.set_stage_profiling(false);
  if (untimed > 0)
    std::fprintf(stderr, "batch %d: %d of the profiled batches left out of the GPU stage times (their stream waited "
                 "over 100 ms for the enqueue)\n", b, untimed);
  f.upload = stats_of(up), f.letterbox = stats_of(lb), f.engine = stats_of(eng), f.post = stats_of(post);
}

std::string batch_json(const Detector& det, int b, const BatchFigures& f) {
  const Stats& s = f.e2e;
  return "{\"device\": " + json_string(device_name(det.device())) + ", \"batch\": " + std::to_string(b) + ", " +
         build_json_fields(det) + ", \"e2e_ms\": {\"median\": " + json_number(s.median) + ", \"p90\": " +
         json_number(s.p90) + ", \"p99\": " + json_number(s.p99) + ", \"mean\": " + json_number(s.mean) +
         "}, \"images_per_s\": " + json_number(1000.0 * b / s.median) + ", \"enqueue_ms_median\": " +
         json_number(f.enqueue.median) + ", \"throughput\": {\"contexts\": " + std::to_string(f.contexts) +
         ", \"batches_per_call\": " + std::to_string(f.depth) + ", \"max_in_flight\": " + std::to_string(f.in_flight) +
         ", \"images_per_s\": " + json_number(f.throughput) + "}" +
         (f.gpu ? ", \"gpu_stages_median_ms\": {\"upload\": " + json_number(f.upload.median) + ", \"letterbox\": " +
                      json_number(f.letterbox.median) + ", \"engine\": " + json_number(f.engine.median) +
                      ", \"postprocess\": " + json_number(f.post.median) + "}"
                : std::string()) +
         ", \"detections_image0\": " + std::to_string(f.boxes) + "}";
}

// One batch size: a detector built for it, its passes, its table row; returns its JSON object.
std::string bench_batch(const DetectorOptions& base, const ImageBenchOptions& bo, const Image& image, int b,
                        const std::string& model, std::string& timeline) {
  DetectorOptions o = base;
  o.max_batch = b;
  auto det = Detector::create(model, o);
  std::fprintf(stderr, "batch %d: detector %s\n", b, describe_build(*det).c_str());
  std::vector<ImageView> batch(static_cast<size_t>(b), image.view());
  for (long i = 0; i < bo.warmup; ++i) det->detect(batch);
  BatchFigures f;
  latency_pass(*det, batch, bo.iters, f);
  f.contexts = std::max(1, det->options().contexts);
  f.depth = bo.depth > 0 ? bo.depth : std::max(4, 2 * f.contexts);
  const std::vector<ImageView> many(static_cast<size_t>(b * f.depth), image.view());
  throughput_pass(*det, many, b, bo.iters, f);
  if (bo.timeline) timeline_pass(*det, many, b, timeline);
  f.gpu = det->device() == Device::kCuda;
  if (f.gpu) gpu_stage_pass(*det, batch, b, bo.iters, f);
  char gpu_cols[96] = "       -        -        -        -";
  if (f.gpu)
    std::snprintf(gpu_cols, sizeof gpu_cols, "%8.3f %8.3f %8.3f %8.3f", f.upload.median, f.letterbox.median,
                  f.engine.median, f.post.median);
  const Stats& s = f.e2e;
  std::printf("%-6s %-5d | %9.3f %8.3f %8.3f %9.3f | %9.0f | %10.0f %4d %10d | %s\n", device_name(det->device()), b,
              s.median, s.p90, s.p99, f.enqueue.median, 1000.0 * b / s.median, f.throughput, f.contexts, f.in_flight,
              gpu_cols);
  return batch_json(*det, b, f);
}

int bench_images(const Args& args, const DetectorOptions& base, const std::vector<int>& batches,
                 const ImageBenchOptions& bo, const std::string& model) {
  for (const char* o : {"decode", "decode-cpu-share", "decode-threads", "images", "rounds"})
    if (args.has(o)) throw UsageError(std::string("--") + o + " needs --from-jpeg DIR");
  if (args.flag("stage-times")) throw UsageError("--stage-times needs --from-jpeg DIR (the image benchmark always times the GPU stages)");
  if (args.has("image")) check_input_file("--image", args.get("image"), "an image", ".jpg");
  if (args.has("json")) check_output_file("--json", args.get("json"));
  const Image image = bench_image(args, base.decode_limits);
  std::string json = "{\"model\": " + json_string(model) + ", \"image\": [" + std::to_string(image.width()) + ", " +
                     std::to_string(image.height()) + "], \"results\": [";
  std::string timeline;  // --timeline: Chrome trace events of every batch size
  std::printf("%-6s %-5s | %9s %8s %8s %9s | %9s | %10s %4s %10s | %8s %8s %8s %8s\n", "device", "batch",
              "e2e med ms", "p90", "p99", "enqueue", "images/s", "thr img/s", "ctx", "in flight", "gpu upl",
              "letterbox", "engine", "post");
  for (size_t k = 0; k < batches.size(); ++k) {
    if (batches[k] < 1) throw UsageError("--batches: sizes must be >= 1");
    json += std::string(k ? ", " : "") + bench_batch(base, bo, image, batches[k], model, timeline);
  }
  json += "]}\n";
  if (args.has("json")) write_text(args.get("json"), json);
  if (args.has("timeline")) write_text(args.get("timeline"), "{\"traceEvents\": [" + timeline + "]}\n");
  std::printf("(enqueue: host time to stage and launch one batch; thr: images/s with several batches per call on\n"
              " 'ctx' contexts, 'in flight' of them at once; gpu: device ms per stage of one batch, CUDA events,\n"
              " 'post' = decode + NMS + the copy back)\n");
  return 0;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  auto valued = detector_valued_options();
  valued.insert(valued.end(), {"image", "iters", "warmup", "json", "batches", "depth", "from-jpeg", "images",
                                "decode-threads", "rounds", "timeline"});
  auto flags = detector_flag_options();
  flags.push_back("stage-times");
  Args args(argc, argv, 2, flags, valued);
  if (args.flag("help")) {
    print_help();
    return 0;
  }
  PostprocessOptions defaults;
  defaults.max_det = 1000;
  DetectorOptions base = detector_options(args, defaults);
  std::vector<int> batches = args.get_int_list("batches");
  if (batches.empty()) batches = {base.max_batch};
  ImageBenchOptions bo;
  bo.iters = std::max(1L, args.get_int("iters", 100));
  bo.warmup = std::max(0L, args.get_int("warmup", 10));
  bo.depth = args.get_int("depth", 0);
  if (bo.depth < 0) throw UsageError("--depth: must be >= 1 (batches per throughput call)");
  bo.timeline = args.has("timeline");
  const std::string model = args.require("model");
  check_model_file(model);
  if (args.has("timeline")) check_output_file("--timeline", args.get("timeline"));
  add_named_classes(args, model, base);  // --classes by name: their ids, for every batch size's detector
  if (args.has("from-jpeg")) {
    if (args.has("image")) throw UsageError("--from-jpeg and --image exclude each other");
    if (args.has("timeline")) throw UsageError("--timeline applies to the image benchmark, not --from-jpeg (see --stage-times)");
    return bench_from_jpeg(args, base, batches, model);
  }
  return bench_images(args, base, batches, bo, model);
}

}  // namespace yolocu::cli

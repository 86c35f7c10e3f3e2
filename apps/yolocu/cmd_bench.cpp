// yolocu bench: trtexec-style latency and throughput of the whole detector (image in host memory
// -> boxes in host memory) and of its stages, per batch size; optional JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "run_common.hpp"
#include "timeline.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "yolocu/postprocess.hpp"

namespace yolocu::cli {
namespace {

struct Stats {
  double median = 0, p90 = 0, p99 = 0, mean = 0;
};

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))]; };
  s.median = at(0.5);
  s.p90 = at(0.9);
  s.p99 = at(0.99);
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

// --from-jpeg DIR: files -> boxes, the whole pipeline of `yolocu detect DIR`: reader threads read
// (and with --decode cpu decode) the files in order, the calling thread runs the detector in
// batches (detect(), or detect_encoded() with nvJPEG for --decode gpu). The files are cycled to
// --images images and read once before timing (the page cache holds them, as in a warm dataset).
int bench_from_jpeg(const Args& args, const DetectorOptions& base, const std::vector<int>& batches,
                    const std::string& model) {
  const std::string dir = args.get("from-jpeg");
  const long total = args.get_int("images", 4096);
  if (total < 1) throw UsageError("--images must be >= 1");
  const long threads = args.get_int("decode-threads", 2);
  if (threads < 1 || threads > 256) throw UsageError("--decode-threads must be in 1..256");
  const std::vector<InputItem> files = expand_inputs({dir});
  std::vector<InputItem> items;
  for (long i = 0; i < total; ++i) items.push_back(files[static_cast<size_t>(i) % files.size()]);
  size_t bytes = 0;
  for (const InputItem& f : files) bytes += read_file_bytes(f.path).size();  // into the page cache
  const bool gpu = base.decode == DecodeDevice::kGpu;
  char share[64] = "";
  if (gpu && base.decode_cpu_share > 0)
    std::snprintf(share, sizeof share, ", %.0f%% of each batch on CPU threads", 100.0 * base.decode_cpu_share);
  std::fprintf(stderr, "from %s: %zu files (%.1f MB), cycled to %ld images; decode %s%s, %ld reader%s; %d context(s), "
               "as many calls at once; engine %s\n", dir.c_str(), files.size(), static_cast<double>(bytes) / 1e6, total,
               gpu ? "gpu (nvJPEG)" : "cpu", share, threads, gpu ? " threads" : "/decoder threads", std::max(1, base.contexts),
               base.engine_graphs ? "CUDA graphs" : "launched eagerly");
  std::printf("%-6s %-6s %-7s %-6s | %8s %10s | %s\n", "device", "decode", "threads", "batch", "wall s", "images/s",
              "decoded");
  std::string json = "{\"model\": " + json_string(model) + ", \"from_jpeg\": " + json_string(dir) + ", \"files\": " +
                     std::to_string(files.size()) + ", \"images\": " + std::to_string(total) + ", \"decode\": " +
                     json_string(decode_device_name(base.decode)) + ", \"decode_threads\": " + std::to_string(threads) +
                     ", \"results\": [";
  for (size_t k = 0; k < batches.size(); ++k) {
    const int b = batches[k];
    if (b < 1) throw UsageError("--batches: sizes must be >= 1");
    DetectorOptions o = base;
    o.max_batch = b;
    auto det = Detector::create(model, o);
    std::fprintf(stderr, "batch %d: detector %s\n", b, describe_build(*det).c_str());
    RunOptions ro;
    ro.batch = b;
    ro.decode_threads = static_cast<int>(threads);
    ro.encoded = gpu;
    ro.quiet = true;
    const std::vector<InputItem> warm(items.begin(), items.begin() + std::min<long>(total, 4L * b));
    run_detector(*det, warm, ro, nullptr, nullptr);  // warm-up: buffers grown, nvJPEG initialised
    const DecodeStats before = det->decode_stats();
    RunSummary sum;
    run_detector(*det, items, ro, nullptr, &sum);
    const DecodeStats after = det->decode_stats();
    const double rate = sum.wall_ms > 0 ? 1000.0 * static_cast<double>(sum.images) / sum.wall_ms : 0.0;
    // --decode cpu: the reader threads decode (decode_image); --decode gpu: detect_encoded counts
    const long long on_gpu = gpu ? after.gpu - before.gpu : 0;
    const long long on_cpu = gpu ? after.cpu - before.cpu : static_cast<long long>(sum.images - sum.failed);
    char decoded[160];
    std::snprintf(decoded, sizeof decoded, "%lld gpu, %lld cpu (%s)%s", on_gpu, on_cpu,
                  gpu ? after.backend.c_str() : "cpu, reader threads", sum.failed ? " FAILED IMAGES" : "");
    std::printf("%-6s %-6s %-7ld %-6d | %8.3f %10.0f | %s\n", device_name(det->device()), decode_device_name(o.decode),
                threads, b, sum.wall_ms / 1000.0, rate, decoded);
    // Where the calls' host time went, per batch (summed over the concurrent calls: with N contexts
    // up to N x the wall time): decode (GPU decode: its host phase) + input enqueue, forward enqueue,
    // post-processing enqueue + the wait for the results.
    const double nb = std::max(1.0, static_cast<double>(sum.images) / b);
    std::printf("       host ms per batch: input %.3f, forward %.3f, post + wait %.3f; wall per batch %.3f\n",
                sum.times.preprocess / nb, sum.times.inference / nb, sum.times.postprocess / nb, sum.wall_ms / nb);
    std::fflush(stdout);  // the rows so far stay in a log even if a later pass is killed
    if (args.flag("stage-times") && det->device() == Device::kCuda) {
      // A separate pass with stage profiling on (CUDA events per batch; each batch's stream is held
      // until it is enqueued, so the times are device time): where a batch's device time goes while
      // the others run beside it.
      det->set_stage_profiling(true);
      RunSummary ps;
      const std::vector<InputItem> part(items.begin(), items.begin() + std::min<long>(total, 32L * b));
      run_detector(*det, part, ro, nullptr, &ps);
      det->set_stage_profiling(false);
      const double pb = std::max(1, ps.times.gpu_timed_batches);
      std::printf("       gpu ms per batch (profiling pass, %d batches timed, %d left out): %s %.3f, letterbox %.3f, "
                  "engine %.3f, post %.3f; wall per batch %.3f\n", ps.times.gpu_timed_batches,
                  ps.times.gpu_untimed_batches, gpu ? "wait for the decode" : "upload", ps.times.gpu_upload / pb,
                  ps.times.gpu_letterbox / pb, ps.times.gpu_engine / pb, ps.times.gpu_postprocess / pb,
                  ps.wall_ms / std::max(1, ps.times.batches));
    }
    json += std::string(k ? ", " : "") + "{\"device\": " + json_string(device_name(det->device())) + ", \"batch\": " +
            std::to_string(b) + ", \"wall_ms\": " + json_number(sum.wall_ms) + ", \"images_per_s\": " +
            json_number(rate) + ", \"failed\": " + std::to_string(sum.failed) + ", \"decoded_gpu\": " +
            std::to_string(on_gpu) + ", \"decoded_cpu\": " + std::to_string(on_cpu) + ", \"decode_backend\": " +
            json_string(gpu ? after.backend : "cpu") + "}";
    if (sum.failed) {
      std::fprintf(stderr, "%zu images failed\n", sum.failed);
      return 1;
    }
  }
  json += "]}\n";
  if (args.has("json")) write_text(args.get("json"), json);
  return 0;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  auto valued = detector_valued_options();
  valued.insert(valued.end(), {"image", "iters", "warmup", "json", "batches", "depth", "from-jpeg", "images",
                                "decode-threads", "timeline"});
  auto flags = detector_flag_options();
  flags.push_back("stage-times");
  Args args(argc, argv, 2, flags, valued);
  if (args.flag("help")) {
    std::printf(
        "usage: yolocu bench --model M [--batches 1 8 32] [--image bus.jpg] [--iters 100] [--warmup 10]\n"
        "                    [--device auto|cpu|cuda] [--precision fp16|fp32] [--letterbox exact|fast]\n"
        "                    [--conf 0.25 --iou 0.45 --max-det 1000 ...] [--json OUT]\n"
        "                    [--tactic-cache FILE|none]\n"
        "                    [--contexts N] [--depth K] [--timeline trace.json]\n"
        "       yolocu bench --model M --from-jpeg DIR [--decode cpu|gpu] [--decode-cpu-share X] [--decode-threads N]\n"
        "                    [--images 4096]\n"
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
        "Without --image a synthetic 810x1080 image is used.\n"
        "--from-jpeg DIR times files -> boxes as `yolocu detect DIR` runs it: the folder's images cycled to\n"
        "--images images (page-cached), N threads reading (--decode cpu: and decoding) them, the detector\n"
        "in batches (--decode gpu: nvJPEG decode inside detect_encoded); prints images/s per batch size;\n"
        "--stage-times adds a pass with stage profiling: each batch's device time per stage.\n");
    return 0;
  }
  PostprocessOptions defaults;
  defaults.max_det = 1000;
  DetectorOptions base = detector_options(args, defaults);
  std::vector<int> batches = args.get_int_list("batches");
  if (batches.empty()) batches = {base.max_batch};
  const long iters = std::max(1L, args.get_int("iters", 100));
  const long warmup = std::max(0L, args.get_int("warmup", 10));
  const long depth_arg = args.get_int("depth", 0);
  if (depth_arg < 0) throw UsageError("--depth: must be >= 1 (batches per throughput call)");
  const std::string model = args.require("model");
  check_model_file(model);
  if (args.has("timeline")) check_output_file("--timeline", args.get("timeline"));
  if (args.has("from-jpeg")) {
    if (args.has("image")) throw UsageError("--from-jpeg and --image exclude each other");
    if (args.has("timeline")) throw UsageError("--timeline applies to the image benchmark, not --from-jpeg (see --stage-times)");
    return bench_from_jpeg(args, base, batches, model);
  }
  for (const char* o : {"decode", "decode-cpu-share", "decode-threads", "images"})
    if (args.has(o)) throw UsageError(std::string("--") + o + " needs --from-jpeg DIR");
  if (args.flag("stage-times")) throw UsageError("--stage-times needs --from-jpeg DIR (the image benchmark always times the GPU stages)");
  if (args.has("image")) check_input_file("--image", args.get("image"), "an image", ".jpg");
  if (args.has("json")) check_output_file("--json", args.get("json"));
  Image image;
  if (args.has("image")) {
    image = decode_image_file(args.get("image"));
  } else {
    image = Image(810, 1080);
    for (int y = 0; y < image.height(); ++y)
      for (int x = 0; x < image.width() * 3; ++x) image.row(y)[x] = static_cast<uint8_t>((x * 7 + y * 13) & 0xff);
  }
  std::string json = "{\"model\": " + json_string(model) + ", \"image\": [" + std::to_string(image.width()) + ", " +
                     std::to_string(image.height()) + "], \"results\": [";
  bool first_row = true;
  std::string timeline;  // --timeline: Chrome trace events of every batch size
  std::printf("%-6s %-5s | %9s %8s %8s %9s | %9s | %10s %4s %10s | %8s %8s %8s %8s\n", "device", "batch",
              "e2e med ms", "p90", "p99", "enqueue", "images/s", "thr img/s", "ctx", "in flight", "gpu upl",
              "letterbox", "engine", "post");
  for (int b : batches) {
    if (b < 1) throw UsageError("--batches: sizes must be >= 1");
    DetectorOptions o = base;
    o.max_batch = b;
    auto det = Detector::create(model, o);
    std::fprintf(stderr, "batch %d: detector %s\n", b, describe_build(*det).c_str());
    std::vector<ImageView> batch(static_cast<size_t>(b), image.view());
    for (long i = 0; i < warmup; ++i) det->detect(batch);
    // Latency: one batch per call.
    std::vector<double> e2e, enq;
    size_t boxes = 0;
    for (long i = 0; i < iters; ++i) {
      const auto a = std::chrono::steady_clock::now();
      const auto r = det->detect(batch);
      e2e.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
      const StageTimes t = det->last_times();
      enq.push_back(t.preprocess + t.inference);
      boxes = r[0].size();
    }
    // Throughput: `depth` batches per call, overlapped across the contexts.
    const int contexts = std::max(1, det->options().contexts);
    const long depth = depth_arg > 0 ? depth_arg : std::max(4, 2 * contexts);
    const std::vector<ImageView> many(static_cast<size_t>(b * depth), image.view());
    const long thr_iters = std::max(3L, iters / depth);
    det->detect(many);  // warm: every context's buffers at this size
    int in_flight = 0;
    const auto ta = std::chrono::steady_clock::now();
    for (long i = 0; i < thr_iters; ++i) {
      det->detect(many);
      in_flight = std::max(in_flight, det->last_times().max_in_flight);
    }
    const double thr_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ta).count();
    const double thr = 1000.0 * static_cast<double>(b * depth * thr_iters) / thr_ms;
    if (args.has("timeline") && det->device() != Device::kCuda) {
      std::fprintf(stderr, "timeline, batch %d: none (the CPU detector has no GPU stages)\n", b);
    } else if (args.has("timeline")) {
      // Three throughput calls with stage profiling on: each batch's stages on the device, per context.
      det->set_stage_profiling(true);
      for (int i = 0; i < 3; ++i) det->detect(many);
      const std::vector<BatchSpan> spans = det->take_timeline();
      det->set_stage_profiling(false);
      std::fprintf(stderr, "timeline, batch %d: %s\n", b, describe_overlap(spans).c_str());
      const std::string ev = trace_events(spans, b);
      if (!ev.empty()) timeline += (timeline.empty() ? "" : ", ") + ev;
    }
    // GPU stages: a separate pass with profiling on (its events cost the host a few us per batch).
    std::vector<double> g_up, g_lb, g_eng, g_post;
    const bool gpu = det->device() == Device::kCuda;
    int untimed = 0;
    if (gpu) {
      det->set_stage_profiling(true);
      for (long i = 0; i < std::min(iters, 50L); ++i) {
        det->detect(batch);
        const StageTimes t = det->last_times();
        if (t.gpu_timed_batches == 0) {  // its gate gave up waiting for the enqueue: not device time alone
          ++untimed;
          continue;
        }
        g_up.push_back(t.gpu_upload);
        g_lb.push_back(t.gpu_letterbox);
        g_eng.push_back(t.gpu_engine);
        g_post.push_back(t.gpu_postprocess);
      }
      det->set_stage_profiling(false);
      if (untimed > 0)
        std::fprintf(stderr, "batch %d: %d of the profiled batches left out of the GPU stage times (their stream waited "
                     "over 100 ms for the enqueue)\n", b, untimed);
    }
    const Stats s = stats_of(e2e), se = stats_of(enq), su = stats_of(g_up), sl = stats_of(g_lb),
                sg = stats_of(g_eng), sp = stats_of(g_post);
    const char* dev = device_name(det->device());
    char gpu_cols[96] = "       -        -        -        -";
    if (gpu) std::snprintf(gpu_cols, sizeof gpu_cols, "%8.3f %8.3f %8.3f %8.3f", su.median, sl.median, sg.median, sp.median);
    std::printf("%-6s %-5d | %9.3f %8.3f %8.3f %9.3f | %9.0f | %10.0f %4d %10d | %s\n", dev, b, s.median, s.p90, s.p99,
                se.median, 1000.0 * b / s.median, thr, contexts, in_flight, gpu_cols);
    json += std::string(first_row ? "" : ", ") + "{\"device\": " + json_string(dev) + ", \"batch\": " +
            std::to_string(b) + ", " + build_json_fields(*det) + ", \"e2e_ms\": {\"median\": " +
            json_number(s.median) + ", \"p90\": " + json_number(s.p90) + ", \"p99\": " + json_number(s.p99) +
            ", \"mean\": " + json_number(s.mean) + "}, \"images_per_s\": " + json_number(1000.0 * b / s.median) +
            ", \"enqueue_ms_median\": " + json_number(se.median) + ", \"throughput\": {\"contexts\": " +
            std::to_string(contexts) + ", \"batches_per_call\": " + std::to_string(depth) +
            ", \"max_in_flight\": " + std::to_string(in_flight) + ", \"images_per_s\": " + json_number(thr) + "}" +
            (gpu ? ", \"gpu_stages_median_ms\": {\"upload\": " + json_number(su.median) + ", \"letterbox\": " +
                       json_number(sl.median) + ", \"engine\": " + json_number(sg.median) +
                       ", \"postprocess\": " + json_number(sp.median) + "}"
                 : std::string()) +
            ", \"detections_image0\": " + std::to_string(boxes) + "}";
    first_row = false;
  }
  json += "]}\n";
  if (args.has("json")) write_text(args.get("json"), json);
  if (args.has("timeline")) write_text(args.get("timeline"), "{\"traceEvents\": [" + timeline + "]}\n");
  std::printf("(enqueue: host time to stage and launch one batch; thr: images/s with several batches per call on\n"
              " 'ctx' contexts, 'in flight' of them at once; gpu: device ms per stage of one batch, CUDA events,\n"
              " 'post' = decode + NMS + the copy back)\n");
  return 0;
}

}  // namespace yolocu::cli

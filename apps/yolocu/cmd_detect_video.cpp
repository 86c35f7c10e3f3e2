// yolocu detect --source: video files, network streams, cameras, image sequences and source lists
// (many streams at once, batched into one detector call), written as JSON lines, annotated
// videos or per-frame images.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "args.hpp"
#include "classes_option.hpp"
#include "commands.hpp"
#include "json_out.hpp"
#include "options.hpp"
#include "paths.hpp"
#include "stats.hpp"
#include "video_stage.hpp"
#include "video_timeline.hpp"
#include "yolocu/annotate.hpp"
#include "yolocu/atomic_file.hpp"
#include "yolocu/error.hpp"
#include "yolocu/video.hpp"
#include "yolocu/video_streams.hpp"
#include "yolocu/video_writer.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

long int_option(const Args& args, const std::string& name, long fallback, long lo, long hi) {
  const long v = args.get_int(name, fallback);
  if (v < lo || v > hi)
    throw UsageError("--" + name + " must be in " + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

// A file-name stem for a source: the file's stem, or the URL / device with unsafe characters replaced.
std::string source_stem(const std::string& source) {
  std::string s;
  if (classify_source(source) == SourceKind::kFile || source.find("://") == std::string::npos) {
    s = fs::path(source).stem().string();
    if (s.empty() || s.find_first_of("*?[%") != std::string::npos) s = fs::path(source).filename().string();
  }
  if (s.empty()) s = source;
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return s.empty() ? "stream" : s;
}

std::string frame_jsonl(const std::string& source, const VideoFrame& f, const Detections& dets,
                        const std::vector<std::string>& names, const FrameJson& extra) {
  std::string s = "{\"source\": " + json_string(source) + ", \"stream\": " + std::to_string(f.stream_id) +
                  ", \"frame\": " + std::to_string(f.index) + ", \"pts\": " + json_number(f.pts) +
                  ", \"width\": " + std::to_string(f.width()) + ", \"height\": " + std::to_string(f.height()) +
                  ", \"detections\": [";
  for (size_t i = 0; i < dets.size(); ++i) {
    std::string d = detection_json(dets[i], names);
    if (i < extra.object_members.size()) d.insert(d.size() - 1, extra.object_members[i]);
    s += (i ? ", " : "") + d;
  }
  return s + "]" + extra.line_members + "}\n";
}

// --jsonl: every line written and checked as it comes (the first failure stops the run with exit
// 1). A file is an AtomicFile: it replaces the previous one only when the run ends (finish()); "-"
// streams to stdout.
class JsonlOut {
 public:
  explicit JsonlOut(const std::string& path) {
    if (!path.empty() && path != "-") file_ = std::make_unique<AtomicFile>(path);
    to_stdout_ = path == "-";
  }
  void write(const std::string& line) {
    if (file_) file_->write(line);
    else if (to_stdout_) write_stdout(line);
  }
  void finish() {
    if (file_) file_->commit();
  }

 private:
  std::unique_ptr<AtomicFile> file_;
  bool to_stdout_ = false;
};

// The video options of the command line.
struct VideoRunOptions {
  StreamOptions streams;
  double progress_s = 2;
  bool progress_asked = false;  // --progress given: lines also when stderr is not a terminal
  bool quiet = false, verbose = false, save = false, save_frames = false;
  bool latency = false;  // --latency: each line's "latency_ms" (packet read -> line written), summarised
  std::string jsonl_path, out_dir;  // out_dir: the run folder, claimed when --save or --save-frames writes
};

VideoRunOptions video_options(const Args& args) {
  VideoRunOptions r;
  VideoSourceOptions& vo = r.streams.source;
  vo.vid_stride = static_cast<int>(int_option(args, "vid-stride", 1, 1, 100000));
  vo.start_frame = int_option(args, "start", 0, 0, int64_t{1} << 40);
  vo.max_frames = int_option(args, "frames", -1, -1, int64_t{1} << 40);
  const double timeout = args.get_double("timeout", 10);
  if (!(timeout > 0 && timeout <= 3600)) throw UsageError("--timeout must be in (0, 3600] seconds");
  vo.open_timeout_s = vo.read_timeout_s = timeout;
  vo.rtsp_listen = args.flag("rtsp-listen");
  const std::string decoder = args.get("decoder", "auto");
  if (decoder == "auto") vo.backend = DecodeBackend::kAuto;
  else if (decoder == "cpu") vo.backend = DecodeBackend::kCpu;
  else if (decoder == "cuda") vo.backend = DecodeBackend::kCuda;
  else throw UsageError("--decoder must be auto, cpu or cuda");
  r.streams.queue_depth = static_cast<size_t>(int_option(args, "queue", 4, 1, 1024));
  r.streams.max_reconnects = static_cast<int>(int_option(args, "reconnects", 5, -1, 1000000));
  r.progress_s = args.get_double("progress", 2);
  r.progress_asked = args.has("progress");
  r.quiet = args.flag("quiet"), r.verbose = args.flag("verbose");
  r.save = args.flag("save"), r.save_frames = args.flag("save-frames");
  r.latency = args.flag("latency");
  r.jsonl_path = args.get("jsonl");
  return r;
}

// The sources as yolocu shows them: credentials and secret query values removed (redact_source).
std::vector<std::string> redacted(const std::vector<std::string>& sources) {
  std::vector<std::string> r;
  for (const std::string& x : sources) r.push_back(redact_source(x));
  return r;
}

}  // namespace

// A file-name stem per source, made unique (unique_stems).
std::vector<std::string> source_stems(const std::vector<std::string>& sources) {
  std::vector<std::string> stems;
  for (const std::string& s : sources) stems.push_back(source_stem(s));
  return unique_stems(stems);
}

namespace {

// Frames batched across streams come in every size up to the batch (streams start, stall and end
// at different times), and a size the GPU build did not tune builds its plans on first use:
// seconds each, which would stall live streams mid-run. Warm them all before any stream opens.
void warm_up_batch_sizes(Detector& detector, size_t batch_size, bool quiet) {
  const int warm_sizes = static_cast<int>(std::min<size_t>(batch_size, static_cast<size_t>(detector.options().max_batch)));
  if (detector.device() != Device::kCuda || warm_sizes <= 1) return;
  const auto w0 = std::chrono::steady_clock::now();
  std::vector<int> sizes;
  for (int b = 1; b <= warm_sizes; ++b) sizes.push_back(b);
  detector.warm_up(sizes);
  if (quiet) return;
  std::string runs;  // --pad-batches: the sizes the engine runs
  for (int b : detector.build_info().engine_batches) runs += " " + std::to_string(b);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const bool fast = detector.options().fast_start;
  std::fprintf(stderr, "yolocu detect: batch sizes 1..%d warmed up in %.1f s%s%s%s%s\n", warm_sizes, took,
               runs.empty() ? "" : " (padded to the engine sizes", runs.c_str(), runs.empty() ? "" : ")",
               fast ? "; the smaller sizes on tactics that compile nothing"
                    : took > 10 ? " (--fast-start: sooner on a cold tactic cache)" : "");
}

// Ctrl-C while it lives: stops the streams (the outputs are then finished); the previous handler
// is restored when it ends.
class InterruptWatcher {
 public:
  explicit InterruptWatcher(StreamSet& streams) : streams_(streams) {
    g_interrupted.store(false);
    old_handler_ = std::signal(SIGINT, on_sigint);
    thread_ = std::thread([this] {
      while (!done_.load()) {
        if (g_interrupted.load()) {
          streams_.stop();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  ~InterruptWatcher() {
    done_.store(true);
    thread_.join();
    std::signal(SIGINT, old_handler_);
  }
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

 private:
  StreamSet& streams_;
  std::atomic<bool> done_{false};
  void (*old_handler_)(int) = nullptr;
  std::thread thread_;
};

// Host frames (CPU decoder) and device frames (NVDEC) in one call each; results in batch order.
std::vector<Detections> detect_frames(Detector& detector, const std::vector<VideoFrame>& batch) {
  std::vector<ImageView> views;
  std::vector<DeviceImage> device_images;
  for (const VideoFrame& f : batch) {
    if (f.location == MemoryLocation::kDevice) device_images.push_back(f.device_image());
    else views.push_back(f.view());
  }
  std::vector<Detections> host_results = views.empty() ? std::vector<Detections>{} : detector.detect(views);
  std::vector<Detections> device_results =
      device_images.empty() ? std::vector<Detections>{} : detector.detect_device(device_images);
  std::vector<Detections> results;
  for (size_t i = 0, h = 0, d = 0; i < batch.size(); ++i)
    results.push_back(std::move(batch[i].location == MemoryLocation::kDevice ? device_results[d++] : host_results[h++]));
  return results;
}

// The outputs of a --source run: JSON lines, annotated frames and videos, progress and summary.
class VideoRun {
 public:
  VideoRun(Detector& detector, const std::vector<std::string>& sources, const VideoRunOptions& o, FrameStage* stage)
      : det_(detector), sources_(redacted(sources)), stems_(source_stems(sources_)), o_(o), names_(detector.class_names()),
        jsonl_(o.jsonl_path), tty_(isatty(fileno(stderr)) != 0), stage_(stage), cmd_(stage ? stage->command() : "detect") {
    if (stage_) stage_->begin(names_, stems_);
  }

  // Several GPUs: one thread per detector takes the batches of its group of streams
  // (StreamOptions::groups), detects them on its GPU and writes them, one batch at a time; the first
  // error stops every stream and is thrown when all threads are done.
  void run_groups(StreamSet& streams, const std::vector<Detector*>& detectors, size_t batch_size) {
    t0_ = last_progress_ = std::chrono::steady_clock::now();
    std::mutex out;
    std::exception_ptr error;
    std::vector<std::thread> threads;
    for (size_t g = 0; g < detectors.size(); ++g)
      threads.emplace_back([&, g] {
        try {
          std::vector<VideoFrame> batch;
          while (streams.next_batch(batch, batch_size, static_cast<int>(g))) {
            std::vector<Detections> results = detect_frames(*detectors[g], batch);
            std::lock_guard<std::mutex> lock(out);
            write_batch(streams, batch, results);
          }
        } catch (...) {
          std::lock_guard<std::mutex> lock(out);
          if (!error) error = std::current_exception();
          streams.stop();
        }
      });
    for (std::thread& t : threads) t.join();
    if (error) std::rethrow_exception(error);
  }

  // What the summary line says the detector ran on ("cuda" by default).
  void set_device_label(std::string label) { device_label_ = std::move(label); }

  // The batches of the streams until they end (or Ctrl-C stops them); the clock starts here.
  // With a timeline (--timeline), each batch's stages are marked on it.
  void run(StreamSet& streams, size_t batch_size, VideoTimeline* timeline) {
    t0_ = last_progress_ = std::chrono::steady_clock::now();
    std::vector<VideoFrame> batch;
    for (;;) {
      if (timeline) timeline->begin_wait();
      if (!streams.next_batch(batch, batch_size)) break;
      if (timeline) timeline->got_batch(batch);
      std::vector<Detections> results = detect_frames(det_, batch);
      if (timeline) timeline->detected();
      write_batch(streams, batch, results);
      if (timeline) timeline->written();
    }
  }

  // Closes the videos, prints the summary; the exit status.
  int finish(StreamSet& streams) {
    if (progress_shown_) std::fprintf(stderr, "\n");
    print_messages(streams);
    for (auto& [id, w] : writers_) {
      try {
        w->close();
      } catch (const Error& e) {
        std::fprintf(stderr, "yolocu %s: %s: --save: %s\n", cmd_, sources_[static_cast<size_t>(id)].c_str(), e.what());
        status_ = 1;
      }
    }
    if (stage_) stage_->finish();
    try {
      jsonl_.finish();
    } catch (const Error& e) {
      std::fprintf(stderr, "yolocu %s: --jsonl: %s\n", cmd_, e.what());
      status_ = 1;
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    int64_t dropped = 0;
    for (const StreamStatus& st : streams.status()) {
      dropped += st.dropped;
      if (st.state == StreamState::kFailed) status_ = 1;
    }
    if (o_.quiet) return status_;
    // the whole run's rate, then the rate once every source runs (MiddleRate), when there were enough batches
    char middle[64] = "";
    if (const double m = middle_.frames_per_s(); m > 0) std::snprintf(middle, sizeof middle, " (%.1f over the middle half of the frames)", m);
    std::fprintf(stderr, "%zu frames from %zu sources (%" PRId64 " dropped), %zu detections on %s, %.1f frames/s%s%s\n",
                 frames_, sources_.size(), dropped, detections_,
                 device_label_.empty() ? device_name(det_.device()) : device_label_.c_str(),
                 wall > 0 ? static_cast<double>(frames_) / wall : 0.0, middle, g_interrupted.load() ? " (interrupted)" : "");
    if (o_.latency && !latencies_ms_.empty()) {
      const Stats l = stats_of(latencies_ms_);
      std::fprintf(stderr, "latency from packet to JSON line: p50 %.1f ms, p99 %.1f ms, max %.1f ms over %zu frames\n",
                   l.median, l.p99, l.max, latencies_ms_.size());
    }
    if (o_.verbose)
      for (const StreamStatus& st : streams.status())
        std::fprintf(stderr, "stream %d (%s): decoder %s\n", st.stream_id, st.source.c_str(), st.info.decoder.c_str());
    if (o_.save || o_.save_frames) std::fprintf(stderr, "Results saved to %s\n", o_.out_dir.c_str());
    return status_;
  }

 private:
  // A batch's frames written (JSON lines, stages, saved frames), then the messages and the progress.
  void write_batch(StreamSet& streams, std::vector<VideoFrame>& batch, std::vector<Detections>& results) {
    for (size_t i = 0; i < batch.size(); ++i) write_frame(streams, batch[i], results[i]);
    middle_.mark(static_cast<int64_t>(frames_));
    print_messages(streams);
    print_progress(streams);
  }

  void write_frame(StreamSet& streams, VideoFrame& f, Detections& dets) {
    const std::string& src = sources_[static_cast<size_t>(f.stream_id)];
    frames_++;
    detections_ += dets.size();
    FrameJson extra;
    if (stage_) stage_->process(f, dets, extra);
    if (o_.latency && f.received_ns > 0) {  // from the packet's read to this line, the detection included
      const double ms = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now().time_since_epoch()).count() -
                                            f.received_ns) / 1e6;
      latencies_ms_.push_back(ms);
      char member[48];
      std::snprintf(member, sizeof member, ", \"latency_ms\": %.3f", ms);
      extra.line_members += member;
    }
    jsonl_.write(frame_jsonl(src, f, dets, names_, extra));
    if (o_.verbose) std::fprintf(stderr, "%s frame %" PRId64 ": %zu detections\n", src.c_str(), f.index, dets.size());
    if (!o_.save && !o_.save_frames) return;
    if (f.location == MemoryLocation::kDevice && f.image.empty()) f.image = frame_to_host_bgr(f);  // NVDEC frame: copied back
    if (stage_) stage_->draw(f.image, f.stream_id, dets);
    else draw_detections(f.image, dets, names_);
    const std::string& stem = stems_[static_cast<size_t>(f.stream_id)];
    if (o_.save_frames) {
      const fs::path dir = fs::path(o_.out_dir) / stem;
      fs::create_directories(dir);
      char name[32];
      std::snprintf(name, sizeof name, "%06" PRId64 ".jpg", f.index);
      write_jpeg((dir / name).string(), f.view());
    }
    if (o_.save && !writer_failed_.count(f.stream_id)) save_video_frame(streams, f, src, stem);
  }

  void save_video_frame(StreamSet& streams, const VideoFrame& f, const std::string& src, const std::string& stem) {
    auto& w = writers_[f.stream_id];
    try {
      if (!w) {
        const StreamStatus st = streams.status().at(static_cast<size_t>(f.stream_id));
        const double fps = (st.info.fps > 0 ? st.info.fps : 30.0) / o_.streams.source.vid_stride;
        VideoWriterOptions wo;
        wo.gpu = det_.device() == Device::kCuda;  // NVENC first, libx264 / MPEG-4 if it does not open
        w = VideoWriter::open((fs::path(o_.out_dir) / (stem + ".mp4")).string(), f.width(), f.height(), fps, wo);
        if (wo.gpu && !w->fallback_reason().empty() && !o_.quiet)
          std::fprintf(stderr, "yolocu %s: %s: --save encodes with %s (%s)\n", cmd_, src.c_str(),
                       w->encoder_name().c_str(), w->fallback_reason().c_str());
        else if (o_.verbose)
          std::fprintf(stderr, "yolocu %s: %s: --save encodes with %s\n", cmd_, src.c_str(), w->encoder_name().c_str());
      }
      w->write(f.view());
    } catch (const Error& e) {  // e.g. the stream changed size: that stream's video stops, the rest goes on
      std::fprintf(stderr, "yolocu %s: %s: --save: %s\n", cmd_, src.c_str(), e.what());
      writer_failed_.insert(f.stream_id);
      status_ = 1;
    }
  }

  void print_messages(StreamSet& streams) {
    for (const std::string& m : streams.take_messages())
      if (!o_.quiet || m.find("failed") != std::string::npos)
        std::fprintf(stderr, "%syolocu %s: %s\n", tty_ ? "\r" : "", cmd_, m.c_str());
  }

  void print_progress(StreamSet& streams) {
    const auto now = std::chrono::steady_clock::now();
    if (o_.quiet || o_.progress_s <= 0 || !(tty_ || o_.progress_asked) ||
        std::chrono::duration<double>(now - last_progress_).count() < o_.progress_s)
      return;
    last_progress_ = now;
    int64_t dropped = 0, expected = 0;
    size_t active = 0;
    const VideoSourceOptions& vo = o_.streams.source;
    for (const StreamStatus& st : streams.status()) {
      dropped += st.dropped;
      active += st.state == StreamState::kRunning || st.state == StreamState::kOpening ||
                st.state == StreamState::kReconnecting;
      // the frames this source will give when its container says how many it has (files), else unknown
      int64_t n = st.info.frame_count > 0 ? std::max<int64_t>(st.info.frame_count - vo.start_frame, 0) / vo.vid_stride : -1;
      if (n >= 0 && vo.max_frames >= 0) n = std::min(n, vo.max_frames);
      expected = expected < 0 || n < 0 ? -1 : expected + n;
    }
    const double el = std::chrono::duration<double>(now - t0_).count();
    const double fps = static_cast<double>(frames_) / el;
    char eta[96] = "";
    if (expected > 0 && fps > 0) {
      const long s = static_cast<long>(static_cast<double>(std::max<int64_t>(expected - static_cast<int64_t>(frames_), 0)) / fps + 0.5);
      std::snprintf(eta, sizeof eta, " of %" PRId64 ", ETA %ld:%02ld", expected, s / 60, s % 60);
    }
    std::fprintf(stderr, "%s%zu frames%s, %.1f fps, %" PRId64 " dropped, %zu/%zu streams active%s", tty_ ? "\r" : "",
                 frames_, eta, fps, dropped, active, sources_.size(), tty_ ? "\033[K" : "\n");
    progress_shown_ = tty_;
  }

  Detector& det_;
  const std::vector<std::string> sources_;  // as shown, written and named: credentials removed
  const std::vector<std::string> stems_;
  const VideoRunOptions& o_;
  const std::vector<std::string>& names_;
  JsonlOut jsonl_;
  const bool tty_;
  FrameStage* stage_;
  const char* cmd_;
  std::map<int, std::unique_ptr<VideoWriter>> writers_;
  std::set<int> writer_failed_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now(), last_progress_ = t0_;
  size_t frames_ = 0, detections_ = 0;
  MiddleRate middle_;
  std::vector<double> latencies_ms_;  // --latency
  std::string device_label_;
  bool progress_shown_ = false;
  int status_ = 0;
};

}  // namespace

void add_video_options(std::vector<std::string>& valued, std::vector<std::string>& flags) {
  for (const char* o : {"source", "vid-stride", "start", "frames", "jsonl", "decoder", "queue", "reconnects",
                        "timeout", "progress", "timeline"})
    valued.push_back(o);
  for (const char* f : {"save", "save-frames", "latency", "rtsp-listen"}) flags.push_back(f);
}

int cmd_detect_video(const Args& args, const DetectorOptions& detector_opts, const RunDir& out_dir,
                     FrameStage* stage, const std::vector<std::string>& video_paths) {
  const std::string model = args.require("model");
  if (video_paths.empty() && !args.positional().empty()) throw UsageError("give inputs either as PATHs or with --source, not both");
  VideoRunOptions vo = video_options(args);

  // every path is checked before the model is loaded
  check_model_file(model);
  std::vector<std::string> sources = video_paths;
  if (sources.empty()) {
    const std::string source_arg = args.require("source");
    sources = is_source_list(source_arg) ? read_source_list(source_arg) : std::vector<std::string>{source_arg};
  }
  if (!vo.jsonl_path.empty()) check_output_file("--jsonl", vo.jsonl_path);
  const std::string timeline_path = args.get("timeline");
  if (!timeline_path.empty()) check_output_file("--timeline", timeline_path);
  if (vo.save || vo.save_frames) vo.out_dir = claim_run_dir(out_dir);

  // --device cuda:0,1: one detector per GPU, the sources spread over them (source i on GPU i mod n,
  // decoded there by NVDEC), each detector taking batches of its own sources
  std::vector<int> gpus = cuda_device_list(args);
  if (gpus.size() > 1 && !timeline_path.empty()) throw UsageError("--timeline follows one detector: not with several GPUs");
  if (gpus.size() > sources.size()) gpus.resize(sources.size());  // a GPU without a source would idle
  const bool several = gpus.size() > 1;
  std::vector<std::unique_ptr<Detector>> detectors;
  detectors.push_back(create_detector(args, model, detector_opts));
  Detector& detector = *detectors.front();
  // GPU decoding feeds the GPU detector (device frames, no host copy); the CPU detector reads host frames
  if (detector.device() != Device::kCuda) {
    if (vo.streams.source.backend == DecodeBackend::kCuda)
      throw UsageError("--decoder cuda needs the GPU detector (--device cuda)");
    vo.streams.source.backend = DecodeBackend::kCpu;
  }
  vo.streams.source.cuda_device = detector.options().cuda_device;
  vo.streams.source.limits = detector_opts.decode_limits;  // --max-pixels: frames as images
  const size_t batch_size =
      args.has("batch") ? static_cast<size_t>(detector_opts.max_batch) : std::min<size_t>(sources.size(), 16);
  warm_up_batch_sizes(detector, batch_size, vo.quiet);
  std::string label;
  for (size_t k = 1; several && k < gpus.size(); ++k) {  // after the first: its tactics are in the cache file
    DetectorOptions o = detector_opts;
    o.cuda_device = gpus[k];
    detectors.push_back(create_detector(args, model, o));
    warm_up_batch_sizes(*detectors.back(), batch_size, vo.quiet);
  }
  if (several) {
    for (size_t i = 0; i < sources.size(); ++i) vo.streams.groups.push_back(static_cast<int>(i % gpus.size()));
    vo.streams.group_cuda_devices = gpus;
    for (int g : gpus) label += (label.empty() ? "GPUs " : ", ") + std::to_string(g);
  }

  VideoRun run(detector, sources, vo, stage);
  run.set_device_label(label);
  std::unique_ptr<VideoTimeline> timeline;
  if (!timeline_path.empty()) timeline = std::make_unique<VideoTimeline>(detector, timeline_path);
  StreamSet streams(sources, vo.streams);
  try {
    InterruptWatcher watcher(streams);
    if (several) {
      std::vector<Detector*> each;
      for (auto& d : detectors) each.push_back(d.get());
      run.run_groups(streams, each, batch_size);
    } else {
      run.run(streams, batch_size, timeline.get());
    }
  } catch (...) {
    streams.stop();
    throw;
  }
  const int status = run.finish(streams);
  if (timeline) timeline->finish();
  return status;
}

}  // namespace yolocu::cli

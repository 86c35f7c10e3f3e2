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
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "run_common.hpp"
#include "yolocu/annotate.hpp"
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
                        const std::vector<std::string>& names) {
  std::string s = "{\"source\": " + json_string(source) + ", \"stream\": " + std::to_string(f.stream_id) +
                  ", \"frame\": " + std::to_string(f.index) + ", \"pts\": " + json_number(f.pts) +
                  ", \"width\": " + std::to_string(f.width()) + ", \"height\": " + std::to_string(f.height()) +
                  ", \"detections\": [";
  for (size_t i = 0; i < dets.size(); ++i) s += (i ? ", " : "") + detection_json(dets[i], names);
  return s + "]}\n";
}

class JsonlOut {
 public:
  explicit JsonlOut(const std::string& path) : path_(path) {
    if (path.empty()) return;
    f_ = path == "-" ? stdout : std::fopen(path.c_str(), "wb");
    if (!f_) throw Error(ErrorCode::kIo, path + ": cannot open for writing");
  }
  ~JsonlOut() {
    if (f_ && f_ != stdout) std::fclose(f_);
  }
  void write(const std::string& line) {
    if (f_ && std::fwrite(line.data(), 1, line.size(), f_) != line.size())
      throw Error(ErrorCode::kIo, path_ + ": write failed");
  }
  void flush() {
    if (f_) std::fflush(f_);
  }

 private:
  std::string path_;
  FILE* f_ = nullptr;
};

}  // namespace

void add_video_options(std::vector<std::string>& valued, std::vector<std::string>& flags) {
  for (const char* o : {"source", "vid-stride", "start", "frames", "jsonl", "decoder", "queue", "reconnects",
                        "timeout", "progress"})
    valued.push_back(o);
  for (const char* f : {"save", "save-frames"}) flags.push_back(f);
}

int cmd_detect_video(const Args& args, const DetectorOptions& detector_opts, const std::string& out_dir) {
  const std::string model = args.require("model");
  const std::string source_arg = args.require("source");
  if (!args.positional().empty()) throw UsageError("give inputs either as PATHs or with --source, not both");
  for (const char* o : {"save-txt", "save-img", "dump"})
    if (args.flag(o) || args.has(o)) throw UsageError(std::string("--") + o + " is for images; with --source use --save, --save-frames or --jsonl");

  StreamOptions so;
  VideoSourceOptions& vo = so.source;
  vo.vid_stride = static_cast<int>(int_option(args, "vid-stride", 1, 1, 100000));
  vo.start_frame = int_option(args, "start", 0, 0, int64_t{1} << 40);
  vo.max_frames = int_option(args, "frames", -1, -1, int64_t{1} << 40);
  const double timeout = args.get_double("timeout", 10);
  if (!(timeout > 0 && timeout <= 3600)) throw UsageError("--timeout must be in (0, 3600] seconds");
  vo.open_timeout_s = vo.read_timeout_s = timeout;
  const std::string decoder = args.get("decoder", "auto");
  if (decoder == "auto") vo.backend = DecodeBackend::kAuto;
  else if (decoder == "cpu") vo.backend = DecodeBackend::kCpu;
  else if (decoder == "cuda") vo.backend = DecodeBackend::kCuda;
  else throw UsageError("--decoder must be auto, cpu or cuda");
  so.queue_depth = static_cast<size_t>(int_option(args, "queue", 4, 1, 1024));
  so.max_reconnects = static_cast<int>(int_option(args, "reconnects", 5, -1, 1000000));
  const double progress_s = args.get_double("progress", 2);
  const bool quiet = args.flag("quiet"), verbose = args.flag("verbose");
  const bool save = args.flag("save"), save_frames = args.flag("save-frames");
  const std::string jsonl_path = args.get("jsonl");

  // every path is checked before the model is loaded
  check_model_file(model);
  std::vector<std::string> sources;
  if (is_source_list(source_arg)) {
    sources = read_source_list(source_arg);
  } else {
    sources = {source_arg};
  }
  if (!jsonl_path.empty()) check_output_file("--jsonl", jsonl_path);
  if (save || save_frames) prepare_output_dir("--output-dir", out_dir);
  std::vector<std::string> stems;
  {
    std::map<std::string, int> seen;
    for (const std::string& s : sources) {
      std::string stem = source_stem(s);
      if (seen[stem]++) stem += "_" + std::to_string(stems.size());
      stems.push_back(stem);
    }
  }

  DetectorOptions opts = detector_opts;
  auto detector = Detector::create(model, opts);
  // GPU decoding feeds the GPU detector (device frames, no host copy); the CPU detector reads host frames
  if (detector->device() != Device::kCuda) {
    if (vo.backend == DecodeBackend::kCuda) throw UsageError("--decoder cuda needs the GPU detector (--device cuda)");
    vo.backend = DecodeBackend::kCpu;
  }
  vo.cuda_device = detector->options().cuda_device;
  const std::vector<std::string>& names = detector->class_names();
  const size_t batch_size =
      args.has("batch") ? static_cast<size_t>(opts.max_batch) : std::min<size_t>(sources.size(), 16);

  // Frames batched across streams come in every size up to the batch (streams start, stall and end
  // at different times), and a size the GPU build did not tune builds its plans on first use:
  // seconds each, which would stall live streams mid-run. Warm them all before any stream opens.
  const int warm_sizes = static_cast<int>(std::min<size_t>(batch_size, static_cast<size_t>(detector->options().max_batch)));
  if (detector->device() == Device::kCuda && warm_sizes > 1) {
    const auto w0 = std::chrono::steady_clock::now();
    std::vector<int> sizes;
    for (int b = 1; b <= warm_sizes; ++b) sizes.push_back(b);
    detector->warm_up(sizes);
    if (!quiet)
      std::fprintf(stderr, "yolocu detect: batch sizes 1..%d warmed up in %.1f s\n", warm_sizes,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
  }

  JsonlOut jsonl(jsonl_path);
  std::map<int, std::unique_ptr<VideoWriter>> writers;
  std::set<int> writer_failed;

  g_interrupted.store(false);
  auto old_handler = std::signal(SIGINT, on_sigint);
  StreamSet streams(sources, so);
  std::atomic<bool> done{false};
  std::thread watcher([&] {  // Ctrl-C: stop the streams, finish the outputs
    while (!done.load()) {
      if (g_interrupted.load()) {
        streams.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  const bool tty = isatty(fileno(stderr));
  auto print_messages = [&] {
    for (const std::string& m : streams.take_messages())
      if (!quiet || m.find("failed") != std::string::npos) std::fprintf(stderr, "%syolocu detect: %s\n", tty ? "\r" : "", m.c_str());
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto last_progress = t0;
  size_t frames = 0, detections = 0;
  bool progress_shown = false;
  int status = 0;
  std::vector<VideoFrame> batch;
  std::vector<ImageView> views;
  std::vector<DeviceImage> device_images;
  std::vector<Detections> results;
  try {
    while (streams.next_batch(batch, batch_size)) {
      // host frames (CPU decoder) and device frames (NVDEC) in one call each; results in batch order
      views.clear();
      device_images.clear();
      for (const VideoFrame& f : batch) {
        if (f.location == MemoryLocation::kDevice) device_images.push_back(f.device_image());
        else views.push_back(f.view());
      }
      std::vector<Detections> host_results = views.empty() ? std::vector<Detections>{} : detector->detect(views);
      std::vector<Detections> device_results =
          device_images.empty() ? std::vector<Detections>{} : detector->detect_device(device_images);
      results.clear();
      for (size_t i = 0, h = 0, d = 0; i < batch.size(); ++i)
        results.push_back(std::move(batch[i].location == MemoryLocation::kDevice ? device_results[d++] : host_results[h++]));
      for (size_t i = 0; i < batch.size(); ++i) {
        VideoFrame& f = batch[i];
        const Detections& dets = results[i];
        const std::string& src = sources[static_cast<size_t>(f.stream_id)];
        frames++;
        detections += dets.size();
        jsonl.write(frame_jsonl(src, f, dets, names));
        if (verbose)
          std::fprintf(stderr, "%s frame %" PRId64 ": %zu detections\n", src.c_str(), f.index, dets.size());
        if (!save && !save_frames) continue;
        if (f.location == MemoryLocation::kDevice) f.image = frame_to_host_bgr(f);  // NVDEC frame: copied back
        draw_detections(f.image, dets, names);
        const std::string& stem = stems[static_cast<size_t>(f.stream_id)];
        if (save_frames) {
          const fs::path dir = fs::path(out_dir) / stem;
          fs::create_directories(dir);
          char name[32];
          std::snprintf(name, sizeof name, "%06" PRId64 ".jpg", f.index);
          write_jpeg((dir / name).string(), f.view());
        }
        if (save && !writer_failed.count(f.stream_id)) {
          auto& w = writers[f.stream_id];
          try {
            if (!w) {
              const StreamStatus st = streams.status().at(static_cast<size_t>(f.stream_id));
              const double fps = (st.info.fps > 0 ? st.info.fps : 30.0) / vo.vid_stride;
              VideoWriterOptions wo;
              wo.gpu = detector->device() == Device::kCuda;  // NVENC first, libx264 / MPEG-4 if it does not open
              w = VideoWriter::open((fs::path(out_dir) / (stem + ".mp4")).string(), f.width(), f.height(), fps, wo);
              if (wo.gpu && !w->fallback_reason().empty() && !quiet)
                std::fprintf(stderr, "yolocu detect: %s: --save encodes with %s (%s)\n", src.c_str(),
                             w->encoder_name().c_str(), w->fallback_reason().c_str());
              else if (verbose)
                std::fprintf(stderr, "yolocu detect: %s: --save encodes with %s\n", src.c_str(), w->encoder_name().c_str());
            }
            w->write(f.view());
          } catch (const Error& e) {  // e.g. the stream changed size: that stream's video stops, the rest goes on
            std::fprintf(stderr, "yolocu detect: %s: --save: %s\n", src.c_str(), e.what());
            writer_failed.insert(f.stream_id);
            status = 1;
          }
        }
      }
      jsonl.flush();
      print_messages();
      const auto now = std::chrono::steady_clock::now();
      if (!quiet && progress_s > 0 && std::chrono::duration<double>(now - last_progress).count() >= progress_s) {
        last_progress = now;
        int64_t dropped = 0;
        size_t active = 0;
        for (const StreamStatus& st : streams.status()) {
          dropped += st.dropped;
          active += st.state == StreamState::kRunning || st.state == StreamState::kOpening ||
                    st.state == StreamState::kReconnecting;
        }
        const double el = std::chrono::duration<double>(now - t0).count();
        std::fprintf(stderr, "%s%zu frames, %.1f fps, %" PRId64 " dropped, %zu/%zu streams active%s", tty ? "\r" : "",
                     frames, static_cast<double>(frames) / el, dropped, active, sources.size(), tty ? "" : "\n");
        progress_shown = tty;
      }
    }
  } catch (...) {
    done.store(true);
    streams.stop();
    watcher.join();
    std::signal(SIGINT, old_handler);
    throw;
  }
  done.store(true);
  watcher.join();
  std::signal(SIGINT, old_handler);
  if (progress_shown) std::fprintf(stderr, "\n");
  print_messages();
  for (auto& [id, w] : writers) {
    try {
      w->close();
    } catch (const Error& e) {
      std::fprintf(stderr, "yolocu detect: %s: --save: %s\n", sources[static_cast<size_t>(id)].c_str(), e.what());
      status = 1;
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t dropped = 0;
  for (const StreamStatus& st : streams.status()) {
    dropped += st.dropped;
    if (st.state == StreamState::kFailed) status = 1;
  }
  if (!quiet) {
    std::fprintf(stderr, "%zu frames from %zu sources (%" PRId64 " dropped), %zu detections on %s, %.1f frames/s%s\n",
                 frames, sources.size(), dropped, detections, device_name(detector->device()),
                 wall > 0 ? static_cast<double>(frames) / wall : 0.0, g_interrupted.load() ? " (interrupted)" : "");
    if (verbose)
      for (const StreamStatus& st : streams.status())
        std::fprintf(stderr, "stream %d (%s): decoder %s\n", st.stream_id, st.source.c_str(), st.info.decoder.c_str());
    if (save || save_frames) std::fprintf(stderr, "results saved to %s\n", out_dir.c_str());
  }
  return status;
}

}  // namespace yolocu::cli

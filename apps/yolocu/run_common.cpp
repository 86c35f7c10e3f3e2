#include "run_common.hpp"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "yolocu/error.hpp"
#include "yolocu/model.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;

namespace {

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// "it has 2 subfolders: 'train2017', 'val2017'" style listing of up to three names.
std::string some_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < std::min<size_t>(names.size(), 3); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() > 3 ? ", ..." : "");
}

// Why `p` cannot be created as a folder (or hold a file): the first part of it that exists and is
// not a folder, or "" when there is none.
std::string blocking_file(const fs::path& p) {
  std::error_code ec;
  for (fs::path q = p; !q.empty(); q = q.parent_path()) {
    const fs::file_status st = fs::status(q, ec);
    if (fs::exists(st)) return fs::is_directory(st) ? "" : q.string();
    if (q == q.parent_path()) break;
  }
  return "";
}

// Decoded images handed out in input order; workers run at most `ahead` images in front of the
// consumer, which bounds the memory held by decoded images.
class DecodeQueue {
 public:
  struct Item {
    Image image;
    std::string bytes;  // encoded mode: the file's bytes, not decoded
    std::string error;
  };

  // encoded: the workers only read the files (detect_encoded() decodes them).
  DecodeQueue(const std::vector<InputItem>& items, int threads, size_t ahead, bool encoded)
      : items_(items), ahead_(std::max<size_t>(ahead, 1)), encoded_(encoded) {
    const int n = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(items.size(), 1))));
    for (int t = 0; t < n; ++t) workers_.emplace_back([this] { work(); });
  }
  ~DecodeQueue() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    for (auto& w : workers_) w.join();
  }
  DecodeQueue(const DecodeQueue&) = delete;
  DecodeQueue& operator=(const DecodeQueue&) = delete;

  // Blocks until image i is decoded (or failed) and moves it out. Call with i = 0, 1, 2, ...
  Item take(size_t i) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return done_.count(i) != 0; });
    Item item = std::move(done_[i]);
    done_.erase(i);
    consumed_ = i + 1;
    lock.unlock();
    space_.notify_all();
    return item;
  }

 private:
  void work() {
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        space_.wait(lock, [&] { return stop_ || next_ >= items_.size() || next_ < consumed_ + ahead_; });
        if (stop_ || next_ >= items_.size()) return;
        i = next_++;
      }
      Item item;
      if (!items_[i].error.empty()) {
        item.error = items_[i].error;
      } else {
        try {
          if (encoded_) {
            item.bytes = read_file_bytes(items_[i].path);
          } else {
            item.image = decode_image_file(items_[i].path);
          }
        } catch (const std::exception& e) {
          item.error = describe_error(e);
        }
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        done_[i] = std::move(item);
      }
      ready_.notify_all();
    }
  }

  const std::vector<InputItem>& items_;
  const size_t ahead_;
  const bool encoded_;
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::map<size_t, Item> done_;
  size_t next_ = 0, consumed_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// "[37/128] 12.3 img/s": rewritten in place on a terminal, a line every 50 images otherwise.
class Progress {
 public:
  Progress(size_t total, bool quiet) : total_(total), quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1) {}
  void update(size_t done) {
    if (quiet_ || total_ < 2) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = s > 0 ? static_cast<double>(done) / s : 0.0;
    if (tty_) {
      std::fprintf(stderr, "\r[%zu/%zu] %.1f img/s", done, total_, rate);
      if (done == total_) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    } else if (done % 50 == 0 || (done == total_ && total_ >= 50)) {
      std::fprintf(stderr, "[%zu/%zu] %.1f img/s\n", done, total_, rate);
    }
  }

 private:
  size_t total_;
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

std::vector<InputItem> expand_inputs(const std::vector<std::string>& specs) {
  std::vector<InputItem> out;
  for (const std::string& spec : specs) {
    std::error_code ec;
    if (fs::is_directory(spec, ec)) {
      std::vector<std::string> files;
      for (const auto& e : fs::directory_iterator(spec, ec))
        if (e.is_regular_file(ec) && is_image_name(e.path())) files.push_back(e.path().string());
      if (ec) {
        out.push_back({spec, "kIo: " + spec + ": cannot list the folder: " + ec.message()});
        continue;
      }
      if (files.empty()) {
        std::vector<std::string> subfolders;
        for (const auto& e : fs::directory_iterator(spec, ec))
          if (e.is_directory(ec)) subfolders.push_back(e.path().filename().string());
        std::sort(subfolders.begin(), subfolders.end());
        std::string msg = spec + ": no images in this folder (.jpg, .jpeg, .png; subfolders are not searched)";
        if (!subfolders.empty())
          msg += "; it has " + std::to_string(subfolders.size()) + " subfolder" + (subfolders.size() > 1 ? "s" : "") +
                 ": " + some_names(subfolders);
        throw UsageError(msg);
      }
      std::sort(files.begin(), files.end());
      for (auto& f : files) out.push_back({f, ""});
    } else if (!fs::exists(spec, ec) && has_glob_chars(spec)) {
      glob_t g{};
      const int rc = glob(spec.c_str(), 0, nullptr, &g);
      if (rc == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back({g.gl_pathv[i], ""});  // glob sorts
      } else {
        out.push_back({spec, "kIo: " + spec + ": no file matches the pattern"});
      }
      globfree(&g);
    } else {
      out.push_back({spec, ""});
    }
  }
  return out;
}

std::string file_stem(const std::string& path) { return fs::path(path).stem().string(); }

void check_model_file(const std::string& path) { check_input_file("--model", path, "an ONNX file", ".onnx"); }

void check_input_file(const std::string& option, const std::string& path, const std::string& kind,
                      const std::string& ext) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      throw UsageError(option + " " + path + ": cannot read it: " + ec.message());
    const std::string blocker = blocking_file(fs::path(path).parent_path());
    throw UsageError(option + " " + path + ": no such file" + (blocker.empty() ? "" : " ('" + blocker + "' is a file, not a folder)"));
  }
  if (fs::is_directory(st)) {
    std::vector<std::string> candidates;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ext) candidates.push_back(e.path().filename().string());
    std::sort(candidates.begin(), candidates.end());
    throw UsageError(option + " " + path + ": is a folder, not " + kind +
                     (candidates.empty() ? "" : " (it holds " + some_names(candidates) + ")"));
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError(option + " " + path + ": cannot read it: " + std::strerror(errno));
}

void prepare_output_dir(const std::string& option, const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  const std::string blocker = blocking_file(dir);
  if (blocker == dir) throw UsageError(option + " " + dir + ": exists and is not a folder");
  if (!blocker.empty()) throw UsageError(option + " " + dir + ": cannot create it: '" + blocker + "' is a file, not a folder");
  fs::create_directories(dir, ec);
  if (ec) throw UsageError(option + " " + dir + ": cannot create the folder: " + ec.message());
}

void check_output_file(const std::string& option, const std::string& path) {
  if (path == "-") return;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(option + " " + path + ": is a folder; name a file");
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    const std::string blocker = blocking_file(parent);
    if (!blocker.empty()) throw UsageError(option + " " + path + ": cannot create it: '" + blocker + "' is a file, not a folder");
    fs::create_directories(parent, ec);
    if (ec) throw UsageError(option + " " + path + ": cannot create its folder " + parent.string() + ": " + ec.message());
  }
  const bool existed = fs::exists(path, ec);
  {
    std::ofstream f(path, std::ios::binary | std::ios::app);  // app: an existing file is left as it is
    if (!f) throw UsageError(option + " " + path + ": cannot write it: " + std::strerror(errno));
  }
  if (!existed) fs::remove(path, ec);
}

std::string describe_build(const Detector& detector) {
  const BuildInfo& b = detector.build_info();
  char buf[512];
  if (detector.device() != Device::kCuda) {
    std::snprintf(buf, sizeof buf, "built in %.0f ms (%s)", b.build_ms, device_name(detector.device()));
    return buf;
  }
  const char* kind = b.tactics_tuned > 0 ? (b.tactic_cache_hits + b.tactic_memo_hits > 0 ? "partly cold" : "cold")
                                         : "warm";
  std::snprintf(buf, sizeof buf,
                "built in %.0f ms; tactics: %d (%d from the cache file (%d plans restored), %d from this process, %d "
                "tuned) in %.0f ms, %s; cache %s",
                b.build_ms, b.tactic_layers, b.tactic_cache_hits, b.tactic_plans_restored, b.tactic_memo_hits,
                b.tactics_tuned, b.tune_ms, kind, b.tactic_cache.empty() ? "none" : b.tactic_cache.c_str());
  std::string out = buf;
  if (!b.direct_stem_batches.empty()) {
    out += "; direct stem at batch";
    for (size_t i = 0; i < b.direct_stem_batches.size(); ++i) out += (i ? ", " : " ") + std::to_string(b.direct_stem_batches[i]);
  }
  // Where the tuning time went, on a line of its own (greppable: "tune breakdown:").
  return b.tune_breakdown.empty() ? out : out + "\n    " + b.tune_breakdown;
}

std::string build_json_fields(const Detector& detector) {
  const BuildInfo& b = detector.build_info();
  return "\"build_ms\": " + json_number(b.build_ms) + ", \"tune_ms\": " + json_number(b.tune_ms) +
         ", \"tactic_layers\": " + std::to_string(b.tactic_layers) + ", \"tactic_cache_hits\": " +
         std::to_string(b.tactic_cache_hits) + ", \"tactic_plans_restored\": " + std::to_string(b.tactic_plans_restored) +
         ", \"tactics_tuned\": " + std::to_string(b.tactics_tuned) + ", \"direct_stem_batches\": [" + [&] {
           std::string list;
           for (size_t i = 0; i < b.direct_stem_batches.size(); ++i) list += (i ? ", " : "") + std::to_string(b.direct_stem_batches[i]);
           return list;
         }() + "]";
}

std::string describe_decode(const Detector& detector) {
  const DecodeStats d = detector.decode_stats();
  char buf[256];
  if (detector.options().decode == DecodeDevice::kCpu) {
    std::snprintf(buf, sizeof buf, "decode: cpu");
  } else {
    std::snprintf(buf, sizeof buf, "decode: gpu (%s): %lld images on the GPU, %lld on the CPU (PNG, EXIF-rotated, CMYK, ...)",
                  d.backend.empty() ? "nvjpeg" : d.backend.c_str(), static_cast<long long>(d.gpu),
                  static_cast<long long>(d.cpu_fallback));
  }
  return buf;
}

std::string describe_error(const std::exception& e) {
  if (const auto* ye = dynamic_cast<const Error*>(&e)) return std::string(error_code_name(ye->code())) + ": " + e.what();
  return e.what();
}

namespace {

// One detect() call's share of a run: inputs [start, next), of which `index` decoded (or were read,
// encoded mode) and go into the call.
struct Chunk {
  size_t start = 0, next = 0;
  std::vector<size_t> index;
  std::vector<Image> images;
  std::vector<std::string> encoded;  // encoded mode: the files' bytes
  DetectionTrace trace;
  bool traced = false;
  std::vector<size_t> slot;  // per input of the chunk: its place in the call (for the trace)
  StageTimes times;          // summed over the chunk's calls (a failed call is retried image by image)
};

void add_times(StageTimes& sum, const StageTimes& t) {
  sum.preprocess += t.preprocess, sum.inference += t.inference;
  sum.postprocess += t.postprocess, sum.total += t.total;
  sum.gpu_upload += t.gpu_upload, sum.gpu_letterbox += t.gpu_letterbox;
  sum.gpu_engine += t.gpu_engine, sum.gpu_postprocess += t.gpu_postprocess;
  sum.gpu_timed_batches += t.gpu_timed_batches, sum.gpu_untimed_batches += t.gpu_untimed_batches;
  sum.batches += t.batches;
}

// Takes up to `size` inputs from the queue, from `next` on; a decode failure lands in its result.
std::unique_ptr<Chunk> read_chunk(DecodeQueue& queue, size_t& next, size_t n, size_t size, bool encoded,
                                  std::vector<ImageResult>& results) {
  auto c = std::make_unique<Chunk>();
  c->start = next;
  while (c->index.size() < size && next < n) {
    DecodeQueue::Item item = queue.take(next);
    if (item.error.empty()) {
      results[next].width = item.image.width();
      results[next].height = item.image.height();
      c->index.push_back(next);
      if (encoded) {
        c->encoded.push_back(std::move(item.bytes));
      } else {
        c->images.push_back(std::move(item.image));
      }
    } else {
      results[next].error = item.error;
    }
    ++next;
  }
  c->next = next;
  c->slot.assign(c->next - c->start, 0);
  return c;
}

// Runs the chunk's call and fills its inputs' results (only theirs: chunks may run at once). A
// failing call is retried image by image so that the error lands on the right file.
void detect_chunk(Detector& det, Chunk& c, const RunOptions& o, std::vector<ImageResult>& results) {
  if (o.encoded && !c.encoded.empty()) {
    // detect_encoded: the detector decodes (nvJPEG with decode gpu) and reports each size
    auto enc = [&](size_t k) { return EncodedImage{c.encoded[k].data(), c.encoded[k].size(), results[c.index[k]].path}; };
    std::vector<EncodedImage> all;
    for (size_t k = 0; k < c.index.size(); ++k) all.push_back(enc(k));
    auto take = [&](size_t k, Detections&& d, const DecodedSize& size) {
      results[c.index[k]].detections = std::move(d);
      results[c.index[k]].width = size.width;
      results[c.index[k]].height = size.height;
    };
    try {
      std::vector<DecodedSize> sizes;
      std::vector<Detections> dets = det.detect_encoded(all, &sizes);
      add_times(c.times, det.last_times());
      for (size_t k = 0; k < c.index.size(); ++k) take(k, std::move(dets[k]), sizes[k]);
    } catch (const std::exception&) {
      for (size_t k = 0; k < c.index.size(); ++k) {
        try {
          std::vector<DecodedSize> sizes;
          std::vector<Detections> dets = det.detect_encoded({enc(k)}, &sizes);
          add_times(c.times, det.last_times());
          take(k, std::move(dets[0]), sizes[0]);
        } catch (const std::exception& e) {
          results[c.index[k]].error = describe_error(e);
        }
      }
    }
  } else if (!c.images.empty()) {
    std::vector<ImageView> views;
    for (const Image& im : c.images) views.push_back(im.view());
    try {
      std::vector<Detections> dets = det.detect(views, o.trace ? &c.trace : nullptr);
      add_times(c.times, det.last_times());
      for (size_t k = 0; k < c.index.size(); ++k) {
        results[c.index[k]].detections = std::move(dets[k]);
        c.slot[c.index[k] - c.start] = k;
      }
      c.traced = o.trace;
    } catch (const std::exception&) {
      for (size_t k = 0; k < c.index.size(); ++k) {
        try {
          results[c.index[k]].detections = det.detect(views[k]);
          add_times(c.times, det.last_times());
        } catch (const std::exception& e) {
          results[c.index[k]].error = describe_error(e);
        }
      }
    }
  }
}

}  // namespace

std::vector<ImageResult> run_detector(Detector& det, const std::vector<InputItem>& items, const RunOptions& o,
                                      const ImageCallback& callback, RunSummary* summary) {
  const auto t0 = std::chrono::steady_clock::now();
  // With --contexts N >= 2, N calls of one batch each run at once on worker threads (each takes a
  // free execution context), so that one call's decode, upload and host work overlap the others'
  // compute and no call waits for a whole group to drain; results still go out in input order, and
  // are the same as serial calls'. The last_times() each worker adds are its own call's. Encoded
  // input (the detector decodes, nvJPEG on the GPU): 2N calls at once, as the GPU detector keeps
  // two decoders per context and a call decodes before it takes a context, each of
  // kEncodedBatchesPerCall batches (a call decodes its next batch while its last one computes).
  constexpr size_t kEncodedBatchesPerCall = 4;
  const size_t n = items.size(), batch = static_cast<size_t>(std::max(o.batch, 1));
  const size_t calls = static_cast<size_t>(std::max(det.options().contexts, 1)) * (o.encoded ? 2 : 1);
  const size_t per_call = batch * (o.encoded ? kEncodedBatchesPerCall : 1);
  std::vector<ImageResult> results(n);
  for (size_t i = 0; i < n; ++i) results[i].path = items[i].path;
  RunSummary sum;
  Progress progress(n, o.quiet);
  DecodeQueue queue(items, o.decode_threads, 2 * per_call * calls + static_cast<size_t>(o.decode_threads), o.encoded);

  auto emit = [&](const Chunk& c) {  // the chunk's results, in input order, on this thread
    add_times(sum.times, c.times);
    size_t image_slot = 0;
    for (size_t i = c.start; i < c.next; ++i) {
      const ImageResult& r = results[i];
      static const Image kNoImage;
      const bool ok = r.error.empty();
      const Image& im = ok && !o.encoded ? c.images[image_slot] : kNoImage;
      if (callback) callback(i, r, im, ok && c.traced ? &c.trace : nullptr, c.slot[i - c.start]);
      if (ok) ++image_slot;
      sum.failed += ok ? 0 : 1;
      sum.detections += r.detections.size();
      progress.update(i + 1);
    }
  };
  // Calls in flight, oldest first (their futures wait in their destructors, also on an exception).
  std::deque<std::pair<std::unique_ptr<Chunk>, std::future<void>>> flight;
  auto emit_oldest = [&] {
    flight.front().second.get();
    emit(*flight.front().first);
    flight.pop_front();
  };
  size_t next = 0;
  while (next < n) {
    std::unique_ptr<Chunk> c = read_chunk(queue, next, n, per_call, o.encoded, results);
    if (calls > 1) {
      while (flight.size() >= calls) emit_oldest();
      Chunk* p = c.get();
      std::future<void> f;
      try {
        f = std::async(std::launch::async, [&det, p, &o, &results] { detect_chunk(det, *p, o, results); });
      } catch (const std::system_error&) {  // no thread to be had: this call runs here, after the others
      }
      if (f.valid()) {
        flight.emplace_back(std::move(c), std::move(f));
        continue;
      }
      while (!flight.empty()) emit_oldest();
    }
    detect_chunk(det, *c, o, results);
    emit(*c);
  }
  while (!flight.empty()) emit_oldest();
  sum.images = n;
  sum.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (summary) *summary = sum;
  return results;
}

std::vector<std::string> detector_valued_options() {
  return {"model", "conf", "iou", "max-det", "classes", "imgsz", "device", "batch", "threads", "workers",
          "precision", "letterbox", "tune-batches", "tactic-cache", "max-memory",
          "contexts", "decode", "decode-cpu-share", "max-device-memory", "engine-graph-segments"};
}
std::vector<std::string> detector_flag_options() {
  return {"agnostic", "agnostic-nms", "multi-label", "quiet", "help", "half", "no-engine-graphs", "engine-graphs"};
}

OutputLayout model_layout(const std::string& onnx_path) {
  try {
    return model_info(load_onnx(onnx_path)).family == ModelFamily::kYolov8 ? OutputLayout::kYolov8
                                                                            : OutputLayout::kYolov5;
  } catch (const Error&) {
    return OutputLayout::kYolov5;
  }
}

DetectorOptions detector_options(const Args& args, const PostprocessOptions& defaults) {
  DetectorOptions o;
  o.postprocess = defaults;
  PostprocessOptions& p = o.postprocess;
  p.conf_threshold = static_cast<float>(args.get_double("conf", p.conf_threshold));
  p.iou_threshold = static_cast<float>(args.get_double("iou", p.iou_threshold));
  const long max_det = args.get_int("max-det", p.max_det);
  if (max_det < 1 || max_det > 1000000) throw UsageError("--max-det must be in 1..1000000");
  p.max_det = static_cast<int>(max_det);
  if (!(p.conf_threshold >= 0 && p.conf_threshold <= 1)) throw UsageError("--conf must be in [0, 1]");
  if (!(p.iou_threshold >= 0 && p.iou_threshold <= 1)) throw UsageError("--iou must be in [0, 1]");
  if (args.has("classes")) {
    p.classes = args.get_int_list("classes");
    for (int c : p.classes)
      if (c < 0) throw UsageError("--classes: class ids are >= 0");
  }
  if (args.flag("agnostic") || args.flag("agnostic-nms")) p.agnostic = true;
  if (args.flag("multi-label")) p.multi_label = true;
  const std::vector<int> sz = args.get_int_list("imgsz");
  if (sz.size() == 1) {
    o.input_width = o.input_height = sz[0];
  } else if (sz.size() == 2) {
    o.input_height = sz[0], o.input_width = sz[1];  // detect.py: --imgsz h w
  } else if (!sz.empty()) {
    throw UsageError("--imgsz takes one or two values (size, or height width)");
  }
  if (!sz.empty() && (sz[0] <= 0 || sz.back() <= 0)) throw UsageError("--imgsz must be > 0");
  const std::string dev = args.get("device", "auto");
  if (dev == "auto") o.device = Device::kAuto;
  else if (dev == "cpu") o.device = Device::kCpu;
  else if (dev == "cuda" || dev == "gpu") o.device = Device::kCuda;
  else if (dev.rfind("cuda:", 0) == 0 || (dev.size() == 1 && std::isdigit(static_cast<unsigned char>(dev[0])))) {
    o.device = Device::kCuda;
    o.cuda_device = std::atoi(dev.c_str() + (dev[0] == 'c' ? 5 : 0));
  } else {
    throw UsageError("--device must be auto, cpu, cuda or cuda:N, got '" + dev + "'");
  }
  const long batch = args.get_int("batch", 1);
  if (batch < 1 || batch > 1024) throw UsageError("--batch must be in 1..1024");
  o.max_batch = static_cast<int>(batch);
  const long threads = args.get_int("threads", 0);
  if (threads < 0 || threads > 1024) throw UsageError("--threads must be in 0..1024 (0: all cores)");
  o.cpu_threads = static_cast<int>(threads);
  o.max_memory = args.get_bytes("max-memory");
  o.max_device_memory = args.get_bytes("max-device-memory");
  const long contexts = args.get_int("contexts", 1);
  if (contexts < 1 || contexts > 64) throw UsageError("--contexts must be in 1..64");
  o.contexts = static_cast<int>(contexts);
  const std::string prec = args.flag("half") ? "fp16" : args.get("precision", "fp16");
  if (prec == "fp16" || prec == "half") o.precision = Precision::kFloat16;
  else if (prec == "fp32" || prec == "float") o.precision = Precision::kFloat32;
  else throw UsageError("--precision must be fp16 or fp32, got '" + prec + "'");
  const std::string lb = args.get("letterbox", "exact");
  if (lb == "exact") o.letterbox = LetterboxMode::kExact;
  else if (lb == "fast") o.letterbox = LetterboxMode::kFast;
  else throw UsageError("--letterbox must be exact or fast, got '" + lb + "'");
  o.tune_batches = args.get_int_list("tune-batches");
  for (int b : o.tune_batches)
    if (b < 1 || b > o.max_batch)
      throw UsageError("--tune-batches: " + std::to_string(b) + " is outside 1..--batch (" + std::to_string(o.max_batch) + ")");
  o.tactic_cache = args.get("tactic-cache", "");
  const std::string decode = args.get("decode", "cpu");
  if (decode == "cpu") o.decode = DecodeDevice::kCpu;
  else if (decode == "gpu" || decode == "nvjpeg") o.decode = DecodeDevice::kGpu;
  else throw UsageError("--decode must be cpu or gpu, got '" + decode + "'");
  if (args.flag("engine-graphs") && args.flag("no-engine-graphs"))
    throw UsageError("--engine-graphs and --no-engine-graphs contradict each other");
  // Beside nvJPEG (--decode gpu) the engine launches eagerly unless graphs are asked for: replayed
  // graphs slow nvJPEG's own kernels, and files -> boxes ran faster eagerly in every measured call
  // (H100 at b8b68c7: 12,369 vs 10,905 images/s with one context; docs/performance.md section 10).
  const bool graphs_asked = args.flag("engine-graphs") || args.has("engine-graph-segments");
  o.engine_graphs = !args.flag("no-engine-graphs") && (o.decode != DecodeDevice::kGpu || graphs_asked);
  const long segments = args.get_int("engine-graph-segments", 1);
  if (segments < 1 || segments > 64) throw UsageError("--engine-graph-segments must be in 1..64");
  if (segments > 1 && !o.engine_graphs) throw UsageError("--engine-graph-segments needs the engine's graphs (not --no-engine-graphs)");
  o.engine_graph_segments = static_cast<int>(segments);
  if (args.has("decode-cpu-share")) {
    const double share = args.get_double("decode-cpu-share", 0);
    if (o.decode != DecodeDevice::kGpu) throw UsageError("--decode-cpu-share needs --decode gpu");
    if (!(share >= 0 && share <= 0.9)) throw UsageError("--decode-cpu-share must be in [0, 0.9], got " + args.get("decode-cpu-share"));
    o.decode_cpu_share = static_cast<float>(share);
  }
  return o;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

int decode_workers(const Args& args) {
  const long workers = args.get_int("workers", 2);
  if (workers < 1 || workers > 64) throw UsageError("--workers must be in 1..64");
  return static_cast<int>(workers);
}

std::string images_json(const std::vector<ImageResult>& results, const std::vector<std::string>& names,
                        const std::function<std::string(size_t)>& error_of) {
  std::string j = "[";
  for (size_t i = 0; i < results.size(); ++i) {
    const ImageResult& r = results[i];
    const std::string err = error_of(i);
    j += i ? ",\n  {" : "\n  {";
    j += "\"path\": " + json_string(r.path) + ", \"width\": " + std::to_string(r.width) +
         ", \"height\": " + std::to_string(r.height);
    if (!err.empty()) j += ", \"error\": " + json_string(err);
    j += ", \"detections\": " + detections_json(r.detections, names, "  ") + "}";
  }
  return j + (results.empty() ? "]" : "\n]");
}

std::string detection_json(const Detection& d, const std::vector<std::string>& names) {
  return "{\"box\": [" + json_number(d.x1) + ", " + json_number(d.y1) + ", " + json_number(d.x2) + ", " +
         json_number(d.y2) + "], \"confidence\": " + json_number(d.confidence) +
         ", \"class_id\": " + std::to_string(d.class_id) + ", \"class_name\": " + json_string(class_name(names, d.class_id)) +
         "}";
}

std::string detections_json(const Detections& dets, const std::vector<std::string>& names, const std::string& ind) {
  if (dets.empty()) return "[]";
  std::string s = "[\n";
  for (size_t i = 0; i < dets.size(); ++i) {
    s += ind + "  " + detection_json(dets[i], names);
    s += i + 1 < dets.size() ? ",\n" : "\n";
  }
  return s + ind + "]";
}

void write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  const fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::kIo, path + ": cannot open for writing");
  f << text;
  f.close();
  if (!f) throw Error(ErrorCode::kIo, path + ": write failed");
}

}  // namespace yolocu::cli

#include "options.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>

#include "classes_option.hpp"
#include "paths.hpp"
#include "yolocu/error.hpp"
#include "yolocu/int8.hpp"

namespace yolocu::cli {
namespace {

// --conf --iou --max-det --classes --agnostic --multi-label over `p`; each checked when given.
void read_postprocess(const Args& args, PostprocessOptions& p) {
  if (args.has("conf")) {
    p.conf_threshold = static_cast<float>(args.get_double("conf", 0));
    if (!(p.conf_threshold >= 0 && p.conf_threshold <= 1)) throw UsageError("--conf must be in [0, 1]");
  }
  if (args.has("iou")) {
    p.iou_threshold = static_cast<float>(args.get_double("iou", 0));
    if (!(p.iou_threshold >= 0 && p.iou_threshold <= 1)) throw UsageError("--iou must be in [0, 1]");
  }
  if (args.has("max-det")) {
    const long max_det = args.get_int("max-det", 0);
    if (max_det < 1 || max_det > 1000000) throw UsageError("--max-det must be in 1..1000000");
    p.max_det = static_cast<int>(max_det);
  }
  // the ids; names are resolved against the model's names when it is loaded (create_detector)
  if (args.has("classes")) p.classes = class_selection(args).ids;
  if (args.flag("agnostic") || args.flag("agnostic-nms")) p.agnostic = true;
  if (args.flag("multi-label")) p.multi_label = true;
}

// Whether --device names GPUs by number: "cuda:N", "cuda:N,M,..." or a bare "N".
bool names_gpus(const std::string& dev) {
  return dev.rfind("cuda:", 0) == 0 || (!dev.empty() && std::isdigit(static_cast<unsigned char>(dev[0])));
}

// The GPU numbers of such a --device; UsageError naming a bad one or a repeat.
std::vector<int> parse_cuda_ids(const std::string& dev) {
  const std::string list = dev.rfind("cuda:", 0) == 0 ? dev.substr(5) : dev;
  std::vector<int> ids;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    const std::string id = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (id.empty() || id.size() > 4 || id.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("--device " + dev + ": '" + id + "' is not a GPU number (cuda:N, or cuda:N,M,... for video runs)");
    const int n = std::atoi(id.c_str());
    if (std::find(ids.begin(), ids.end(), n) != ids.end()) throw UsageError("--device " + dev + ": GPU " + id + " is named twice");
    ids.push_back(n);
    if (comma == std::string::npos) return ids;
    start = comma + 1;
  }
}

void read_device(const Args& args, DetectorOptions& o, bool several_gpus) {
  const std::string dev = args.get("device", "auto");
  if (dev == "auto") o.device = Device::kAuto;
  else if (dev == "cpu") o.device = Device::kCpu;
  else if (dev == "cuda" || dev == "gpu") o.device = Device::kCuda;
  else if (names_gpus(dev)) {
    const std::vector<int> ids = parse_cuda_ids(dev);
    if (ids.size() > 1 && !several_gpus)
      throw UsageError("--device " + dev + ": several GPUs are for video runs (--source or video PATHs); this runs on one");
    o.device = Device::kCuda;
    o.cuda_device = ids[0];
  } else {
    throw UsageError("--device must be auto, cpu, cuda or cuda:N, got '" + dev + "'");
  }
}

// --precision int8 --calibration FILE: the calibration, checked against the model's bytes.
void read_calibration(const Args& args, DetectorOptions& o) {
  const bool int8 = o.precision == Precision::kInt8;
  if (!int8 && args.has("calibration"))
    throw UsageError("--calibration is the INT8 calibration: it goes with --precision int8");
  if (!int8) return;
  if (!args.has("calibration"))
    throw UsageError("--precision int8 needs --calibration FILE (made by yolocu calibrate)");
  const std::string model = args.require("model"), file = args.get("calibration");
  check_model_file(model);
  check_input_file("--calibration", file, "a calibration file", ".json");
  o.int8_calibration = std::make_shared<const Int8Calibration>(load_int8_calibration(file, file_sha256(model)));
}

// --batch --threads --max-memory --max-device-memory --contexts --precision --letterbox --tune-batches --tactic-cache
// --pad-batches --fast-start
void read_engine(const Args& args, DetectorOptions& o) {
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
  else if (prec == "int8") o.precision = Precision::kInt8;
  else throw UsageError("--precision must be fp16, fp32 or int8, got '" + prec + "'");
  read_calibration(args, o);
  const std::string lb = args.get("letterbox", "exact");
  if (lb == "exact") o.letterbox = LetterboxMode::kExact;
  else if (lb == "fast") o.letterbox = LetterboxMode::kFast;
  else throw UsageError("--letterbox must be exact or fast, got '" + lb + "'");
  o.tune_batches = args.get_int_list("tune-batches");
  for (int b : o.tune_batches)
    if (b < 1 || b > o.max_batch)
      throw UsageError("--tune-batches: " + std::to_string(b) + " is outside 1..--batch (" + std::to_string(o.max_batch) + ")");
  o.tactic_cache = args.get("tactic-cache", "");
  o.pad_batches = args.flag("pad-batches");
  o.fast_start = args.flag("fast-start");
}

// --decode --decode-cpu-share --engine-graphs --no-engine-graphs --engine-graph-segments
void read_decode_and_graphs(const Args& args, DetectorOptions& o) {
  const std::string decode = args.get("decode", "cpu");
  if (decode == "cpu") o.decode = DecodeDevice::kCpu;
  else if (decode == "gpu" || decode == "nvjpeg") o.decode = DecodeDevice::kGpu;
  else throw UsageError("--decode must be cpu or gpu, got '" + decode + "'");
  if (args.flag("engine-graphs") && args.flag("no-engine-graphs"))
    throw UsageError("--engine-graphs and --no-engine-graphs contradict each other");
  // Beside nvJPEG (--decode gpu) the engine launches eagerly unless graphs are asked for: replayed
  // graphs slow nvJPEG's own kernels, and files -> boxes ran faster eagerly in every measured call
  // (docs/performance.md section 10).
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
}

// --max-pixels N: DecodeLimits::max_pixels (a whole number, or with K / M for thousands /
// millions: 50M); the sides stay at their limit (16384).
void read_decode_limits(const Args& args, DetectorOptions& o) {
  if (!args.has("max-pixels")) return;
  const std::string v = args.get("max-pixels");
  const auto bad = [&] {
    return UsageError("--max-pixels: '" + v + "' is not a pixel count (a whole number > 0, optionally with K or M, e.g. 100M)");
  };
  size_t i = 0;
  int64_t n = 0;
  for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i) {
    if (n > (INT64_MAX - 9) / 10) throw bad();
    n = n * 10 + (v[i] - '0');
  }
  int64_t scale = 1;
  if (i > 0 && i + 1 == v.size() && (v[i] | 0x20) == 'k') scale = 1000, ++i;
  else if (i > 0 && i + 1 == v.size() && (v[i] | 0x20) == 'm') scale = 1000000, ++i;
  if (i == 0 || i != v.size() || n <= 0 || n > INT64_MAX / scale) throw bad();
  o.decode_limits.max_pixels = n * scale;
  try {
    validate_decode_limits(o.decode_limits, "--max-pixels");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace

void read_input_size(const Args& args, DetectorOptions& o) {
  const std::vector<int> sz = args.get_int_list("imgsz");
  if (sz.size() == 1) {
    o.input_width = o.input_height = sz[0];
  } else if (sz.size() == 2) {
    o.input_height = sz[0], o.input_width = sz[1];  // detect.py: --imgsz h w
  } else if (!sz.empty()) {
    throw UsageError("--imgsz takes one or two values (size, or height width)");
  }
  if (!sz.empty() && (sz[0] <= 0 || sz.back() <= 0)) throw UsageError("--imgsz must be > 0");
}

std::vector<std::string> detector_valued_options() {
  return {"model", "conf", "iou", "max-det", "classes", "imgsz", "device", "batch", "threads", "workers",
          "precision", "letterbox", "tune-batches", "tactic-cache", "max-memory",
          "calibration", "contexts", "decode", "decode-cpu-share", "max-device-memory", "engine-graph-segments", "max-pixels"};
}
std::vector<std::string> detector_flag_options() {
  return {"agnostic", "agnostic-nms", "multi-label", "quiet", "help", "half", "no-engine-graphs", "engine-graphs",
          "pad-batches", "fast-start"};
}

std::vector<int> cuda_device_list(const Args& args) {
  const std::string dev = args.get("device", "auto");
  return names_gpus(dev) ? parse_cuda_ids(dev) : std::vector<int>{};
}

DetectorOptions detector_options(const Args& args, const PostprocessOptions& defaults, bool several_gpus) {
  DetectorOptions o;
  o.postprocess = defaults;
  read_postprocess(args, o.postprocess);
  read_input_size(args, o);
  read_device(args, o, several_gpus);
  read_engine(args, o);
  read_decode_and_graphs(args, o);
  read_decode_limits(args, o);
  return o;
}

int decode_workers(const Args& args) {
  const long workers = args.get_int("workers", 2);
  if (workers < 1 || workers > 64) throw UsageError("--workers must be in 1..64");
  return static_cast<int>(workers);
}

}  // namespace yolocu::cli

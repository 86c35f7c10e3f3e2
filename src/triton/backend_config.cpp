#include "triton/backend_config.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>

#include "yolocu/error.hpp"

namespace yolocu::triton {
namespace {

using Json = nlohmann::json;

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "model config: " + what); }

double to_number(const std::string& name, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE) bad("parameter " + name + " = '" + v + "' is not a number");
  return d;
}

int64_t to_integer(const std::string& name, const std::string& v, int64_t lo, int64_t hi) {
  const double d = to_number(name, v);
  // the range first: a double outside int64 (1e48, inf, nan) must never reach the cast (UB)
  if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi) && std::fabs(d) < 9.2e18) || d != std::trunc(d))
    bad("parameter " + name + " = '" + v + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int64_t>(d);
}

float to_fraction(const std::string& name, const std::string& v) {
  const double d = to_number(name, v);
  if (!(d >= 0 && d <= 1)) bad("parameter " + name + " = '" + v + "' must be in [0, 1]");
  return static_cast<float>(d);
}

std::string one_of(const std::string& name, const std::string& v, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return v;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  bad("parameter " + name + " = '" + v + "' must be one of " + list);
}

std::vector<int> to_classes(const std::string& name, const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    if (b == std::string::npos) bad("parameter " + name + " = '" + v + "' has an empty entry");
    out.push_back(static_cast<int>(to_integer(name, item.substr(b, e - b + 1), 0, 1 << 20)));
  }
  return out;
}

// Each parameter the backend reads, and how it sets the config.
using Setter = std::function<void(BackendConfig&, const std::string& name, const std::string& value)>;
const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"model_file", [](BackendConfig& c, const std::string& n, const std::string& v) {
         if (v.empty() || v.find('/') != std::string::npos || v == "." || v == "..")
           bad("parameter " + n + " = '" + v + "' must be a file name in the version folder");
         c.model_file = v;
       }},
      {"precision", [](BackendConfig& c, const std::string& n, const std::string& v) {
         const std::string p = one_of(n, v, {"fp16", "fp32", "int8"});
         c.precision = p == "fp32" ? Precision::kFloat32 : p == "int8" ? Precision::kInt8 : Precision::kFloat16;
       }},
      {"calibration", [](BackendConfig& c, const std::string& n, const std::string& v) {
         if (v.empty() || v.find('/') != std::string::npos || v == "." || v == "..")
           bad("parameter " + n + " = '" + v + "' must be a file name in the version folder");
         c.calibration_file = v;
       }},
      {"conf", [](BackendConfig& c, const std::string& n, const std::string& v) { c.postprocess.conf_threshold = to_fraction(n, v); }},
      {"iou", [](BackendConfig& c, const std::string& n, const std::string& v) { c.postprocess.iou_threshold = to_fraction(n, v); }},
      {"max_det", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.postprocess.max_det = static_cast<int>(to_integer(n, v, 1, 100000));
       }},
      {"classes", [](BackendConfig& c, const std::string& n, const std::string& v) { c.postprocess.classes = to_classes(n, v); }},
      {"agnostic", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.postprocess.agnostic = one_of(n, v, {"true", "false"}) == "true";
       }},
      {"tactic_cache", [](BackendConfig& c, const std::string&, const std::string& v) { c.tactic_cache = v; }},
      {"decode", [](BackendConfig& c, const std::string& n, const std::string& v) { c.decode = one_of(n, v, {"auto", "gpu", "cpu"}); }},
      {"engine_graphs", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.engine_graphs = one_of(n, v, {"on", "off"});
       }},
      {"engine_graph_segments", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.engine_graph_segments = static_cast<int>(to_integer(n, v, 1, 64));
       }},
      {"max_pixels", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.decode_limits.max_pixels = to_integer(n, v, 1, int64_t{1} << 31);
       }},
      {"max_image_side", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.decode_limits.max_width = c.decode_limits.max_height = static_cast<int>(to_integer(n, v, 1, 65535));
       }},
      {"max_request_bytes", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.max_request_bytes = static_cast<uint64_t>(to_integer(n, v, 1, int64_t{1} << 32));
       }},
      {"contexts", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.contexts = static_cast<int>(to_integer(n, v, 1, 8));
       }},
      {"imgsz", [](BackendConfig& c, const std::string& n, const std::string& v) {
         const std::vector<int> hw = to_classes(n, v);  // "640" or "height,width"
         if (hw.size() != 1 && hw.size() != 2) bad("parameter " + n + " = '" + v + "' must be a size or 'height,width'");
         for (int x : hw)
           if (x < 32 || x > 8192 || x % 32 != 0) bad("parameter " + n + " = '" + v + "': sizes must be multiples of 32 in [32, 8192]");
         c.input_height = hw[0];
         c.input_width = hw.back();
       }},
      {"cpu_threads", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.cpu_threads = static_cast<int>(to_integer(n, v, 0, 1024));
       }},
      {"slow_execution_ms", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.slow_execution_ms = static_cast<int>(to_integer(n, v, 0, 600000));
       }},
      {"fast_start", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.fast_start = one_of(n, v, {"true", "false"}) == "true";
       }},
      {"blocking_sync", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.blocking_sync = one_of(n, v, {"true", "false"}) == "true";
       }},
      {"response_thread", [](BackendConfig& c, const std::string& n, const std::string& v) {
         c.response_thread = one_of(n, v, {"true", "false"}) == "true";
       }},
  };
  return table;
}

}  // namespace

BackendConfig parse_backend_config(const std::string& model_config_json) {
  Json j;
  try {
    j = Json::parse(model_config_json);
  } catch (const Json::exception& e) {
    bad(std::string("not JSON: ") + e.what());
  }
  BackendConfig c;
  c.postprocess.iou_threshold = kFamilyDefault;  // Detector::create: the family's, unless the config names one
  if (j.contains("max_batch_size")) {
    const Json& m = j["max_batch_size"];
    if (!m.is_number_integer() || m.get<int64_t>() < 1 || m.get<int64_t>() > 256)
      bad("max_batch_size must be an integer in [1, 256] (the yolocu backend batches images)");
    c.max_batch_size = m.get<int>();
  } else {
    bad("max_batch_size must be set (an integer in [1, 256])");
  }
  if (j.contains("parameters")) {
    if (!j["parameters"].is_object()) bad("parameters must be a map");
    for (const auto& [name, value] : j["parameters"].items()) {
      const auto it = setters().find(name);
      if (it == setters().end()) bad("unknown parameter '" + name + "' (docs/serving.md lists them)");
      if (!value.is_object() || !value.contains("string_value") || !value["string_value"].is_string())
        bad("parameter " + name + " has no string_value");
      it->second(c, name, value["string_value"].get<std::string>());
    }
  }
  if (c.precision == Precision::kInt8 && c.calibration_file.empty())
    bad("parameter precision = 'int8' needs the parameter calibration (yolocu calibrate's file in the version folder)");
  if (c.precision != Precision::kInt8 && !c.calibration_file.empty())
    bad("parameter calibration goes with precision = 'int8'");
  if (c.engine_graph_segments > 1 && c.engine_graphs != "on")
    bad("parameter engine_graph_segments goes with engine_graphs = 'on'");
  return c;
}

DetectorOptions detector_options(const BackendConfig& config, bool gpu, int device_id, bool nvjpeg) {
  DetectorOptions o;
  o.device = gpu ? Device::kCuda : Device::kCpu;
  o.cuda_device = device_id;
  o.precision = config.precision;
  o.max_batch = config.max_batch_size;
  o.postprocess = config.postprocess;
  o.tactic_cache = config.tactic_cache;
  o.decode_limits = config.decode_limits;
  o.contexts = gpu ? config.contexts : 1;
  o.input_height = config.input_height;
  o.input_width = config.input_width;
  o.cpu_threads = config.cpu_threads;
  if (config.decode == "gpu" && !gpu) bad("parameter decode = 'gpu' needs a KIND_GPU instance group");
  const bool gpu_decode = config.decode == "gpu" || (config.decode == "auto" && gpu && nvjpeg);
  o.decode = gpu_decode ? DecodeDevice::kGpu : DecodeDevice::kCpu;
  // Graphs beside nvJPEG too: a dynamic batch of any size launches its forward in tens of
  // microseconds instead of a millisecond of eager launches on the instance's thread.
  o.engine_graphs = config.engine_graphs == "on";
  o.engine_graph_segments = config.engine_graph_segments;
  o.blocking_sync = config.blocking_sync;
  o.fast_start = config.fast_start;
  return o;
}

}  // namespace yolocu::triton

#include "json_out.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "yolocu/atomic_file.hpp"
#include "yolocu/error.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;

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
    write_stdout(text);
    return;
  }
  const fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  write_file_atomic(path, text);
}

void write_stdout(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    throw Error(ErrorCode::kIo, std::string("standard output: cannot write: ") + std::strerror(errno));
}

}  // namespace yolocu::cli

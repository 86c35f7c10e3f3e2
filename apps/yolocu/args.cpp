#include "args.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace yolocu::cli {

namespace {

bool numbers(const char* a) { return a[0] != '\0' && std::strspn(a, "0123456789, ") == std::strlen(a); }

// A value after --classes that is taken as a class name: not an option, no '/', '.' or glob
// character in it, and no file or folder of that name here (which would be an input PATH).
bool class_name_like(const char* a) {
  std::error_code ec;
  return a[0] != '\0' && a[0] != '-' && std::strpbrk(a, "/.*?[") == nullptr && !std::filesystem::exists(a, ec);
}

}  // namespace

Args::Args(int argc, char** argv, int first, const std::vector<std::string>& flags,
           const std::vector<std::string>& valued) {
  auto known = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string key = a.substr(2), value;
      const size_t eq = key.find('=');
      const bool inline_value = eq != std::string::npos;
      if (inline_value) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      }
      std::replace(key.begin(), key.end(), '_', '-');
      if (known(flags, key)) {
        if (inline_value) throw UsageError("option --" + key + " takes no value");
        flags_[key] = true;
      } else if (known(valued, key)) {
        if (!inline_value) {
          if (i + 1 >= argc) throw UsageError("option --" + key + " needs a value");
          value = argv[++i];
        }
        values_[key].push_back(value);
        // ultralytics style: --classes 0 2 5 (several values after one option; also --imgsz, --batches, --tune-batches)
        // (numeric lists stop at the first non-number, so that paths can follow them; --classes also
        // takes class names: class_name_like)
        if (key == "input")
          while (i + 1 < argc && argv[i + 1][0] != '-') values_[key].push_back(argv[++i]);
        if (key == "classes" || key == "imgsz" || key == "batch" || key == "batches" || key == "tune-batches")
          while (i + 1 < argc && (numbers(argv[i + 1]) || (key == "classes" && class_name_like(argv[i + 1]))))
            values_[key].push_back(argv[++i]);
      } else {
        throw UsageError("unknown option --" + key);
      }
    } else {
      positional_.push_back(a);
    }
  }
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::string Args::require(const std::string& name) const {
  if (!has(name)) throw UsageError("missing required option --" + name);
  return get(name);
}

std::vector<std::string> Args::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

double Args::get_double(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end) throw UsageError("--" + name + ": '" + v + "' is not a number");
  return d;
}

long Args::get_int(const std::string& name, long fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  char* end = nullptr;
  const long d = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end) throw UsageError("--" + name + ": '" + v + "' is not an integer");
  return d;
}

uint64_t Args::get_bytes(const std::string& name) const {
  if (!has(name)) return 0;
  const std::string v = get(name);
  const auto bad = [&] {
    return UsageError("--" + name + ": '" + v + "' is not a byte count (a whole number, optionally with K, M, G or T, e.g. 8G)");
  };
  size_t i = 0;
  uint64_t n = 0;
  for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i) {
    if (n > (UINT64_MAX - 9) / 10) throw bad();
    n = n * 10 + static_cast<uint64_t>(v[i] - '0');
  }
  if (i == 0) throw bad();
  int shift = 0;
  if (i < v.size()) {
    switch (v[i] | 0x20) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: throw bad();
    }
    ++i;
    if (i < v.size() && (v[i] | 0x20) == 'b') ++i;  // 8GB, 512MB
  }
  if (i != v.size() || n == 0 || n > (UINT64_MAX >> shift)) throw bad();
  return n << shift;
}

std::vector<int> Args::get_int_list(const std::string& name) const {
  std::vector<int> out;
  for (std::string v : all(name)) {
    std::replace(v.begin(), v.end(), ',', ' ');
    std::istringstream is(v);
    std::string tok;
    while (is >> tok) {
      char* end = nullptr;
      const long d = std::strtol(tok.c_str(), &end, 10);
      if (end == tok.c_str() || *end) throw UsageError("--" + name + ": '" + tok + "' is not an integer");
      out.push_back(static_cast<int>(d));
    }
  }
  return out;
}

}  // namespace yolocu::cli

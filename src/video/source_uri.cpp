// What a --source string names, and source list files.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/check.hpp"
#include "yolocu/video.hpp"

namespace yolocu {
namespace fs = std::filesystem;
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A printf-style frame number: '%' [0-9]* 'd' (FFmpeg's image2 pattern, e.g. img_%05d.jpg).
bool has_number_pattern(const std::string& s) {
  for (size_t i = s.find('%'); i != std::string::npos; i = s.find('%', i + 1)) {
    size_t j = i + 1;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j < s.size() && s[j] == 'd') return true;
  }
  return false;
}

bool secret_key(std::string key) {
  key = lower(key);
  static const char* const kKeys[] = {"password", "passwd", "pwd", "pass", "token", "access_token", "auth",
                                      "key", "apikey", "api_key", "secret", "signature", "sig"};
  return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; });
}

bool url_char(char c) {
  return !std::isspace(static_cast<unsigned char>(c)) && c != '"' && c != '\'' && c != '<' && c != '>';
}

// One URL starting at `begin` (just after "://") up to the first character no URL holds.
std::string redact_one(const std::string& url) {
  std::string out = url;
  const size_t path = out.find_first_of("/?#");
  const size_t at = out.rfind('@', path == std::string::npos ? std::string::npos : path);
  if (at != std::string::npos && (path == std::string::npos || at < path)) out = "***" + out.substr(at);
  const size_t q = out.find('?');
  if (q == std::string::npos) return out;
  std::string r = out.substr(0, q + 1);
  size_t i = q + 1;
  while (i <= out.size()) {
    size_t e = out.find_first_of("&#", i);
    if (e == std::string::npos) e = out.size();
    const std::string pair = out.substr(i, e - i);
    const size_t eq = pair.find('=');
    r += eq != std::string::npos && secret_key(pair.substr(0, eq)) ? pair.substr(0, eq) + "=***" : pair;
    if (e >= out.size()) break;
    r += out[e];
    if (out[e] == '#') {
      r += out.substr(e + 1);
      break;
    }
    i = e + 1;
  }
  return r;
}

}  // namespace

std::string redact_source(const std::string& text) {
  std::string out;
  size_t i = 0;
  for (size_t s = text.find("://"); s != std::string::npos; s = text.find("://", i)) {
    size_t e = s + 3;
    while (e < text.size() && url_char(text[e])) ++e;
    out += text.substr(i, s + 3 - i);
    out += redact_one(text.substr(s + 3, e - s - 3));
    i = e;
  }
  return out + text.substr(std::min(i, text.size()));
}

const char* source_kind_name(SourceKind kind) noexcept {
  switch (kind) {
    case SourceKind::kFile: return "file";
    case SourceKind::kNetwork: return "network";
    case SourceKind::kCamera: return "camera";
    case SourceKind::kImageSequence: return "image sequence";
  }
  return "?";
}

const char* decode_backend_name(DecodeBackend backend) noexcept {
  switch (backend) {
    case DecodeBackend::kAuto: return "auto";
    case DecodeBackend::kCpu: return "cpu";
    case DecodeBackend::kCuda: return "cuda";
  }
  return "?";
}

SourceKind classify_source(const std::string& source) {
  const size_t scheme = source.find("://");
  if (scheme != std::string::npos && scheme > 0) {
    return lower(source.substr(0, scheme)) == "file" ? SourceKind::kFile : SourceKind::kNetwork;
  }
  if (source.rfind("/dev/video", 0) == 0) return SourceKind::kCamera;
  if (!source.empty() && source.size() <= 3 &&
      std::all_of(source.begin(), source.end(), [](unsigned char c) { return std::isdigit(c); }))
    return SourceKind::kCamera;  // "0" = /dev/video0, as ultralytics' --source 0
  if (source.find_first_of("*?[") != std::string::npos || has_number_pattern(source)) return SourceKind::kImageSequence;
  std::error_code ec;
  if (fs::is_directory(source, ec)) return SourceKind::kImageSequence;
  const std::string l = lower(source);
  if (ends_with(l, ".jpg") || ends_with(l, ".jpeg") || ends_with(l, ".png")) return SourceKind::kImageSequence;
  return SourceKind::kFile;
}

bool is_source_list(const std::string& path) {
  const std::string l = lower(path);
  std::error_code ec;
  return (ends_with(l, ".txt") || ends_with(l, ".streams")) && fs::is_regular_file(path, ec);
}

std::vector<std::string> read_source_list(const std::string& path) {
  std::ifstream f(path);
  YOLOCU_CHECK(f, kIo, path, ": cannot read the source list");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(f, line)) {
    const size_t a = line.find_first_not_of(" \t\r\n");
    if (a == std::string::npos || line[a] == '#') continue;
    const size_t b = line.find_last_not_of(" \t\r\n");
    out.push_back(line.substr(a, b - a + 1));
  }
  YOLOCU_CHECK(!out.empty(), kParse, path, ": the source list names no source (one source per line; '#' starts a comment)");
  return out;
}

}  // namespace yolocu

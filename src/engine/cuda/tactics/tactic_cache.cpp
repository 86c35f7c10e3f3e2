// The tactic cache file: JSON through nlohmann::json, strict schema; saves merge by key under an
// advisory lock and replace the file atomically (unique temporary name, fsync, rename).
#include "engine/cuda/tactics/tactic_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "yolocu/atomic_file.hpp"
#include "yolocu/error.hpp"

namespace yolocu::engine {
namespace {

using json = nlohmann::json;
constexpr const char* kFormat = "yolocu-tactic-cache";

// A cache file is a few MB at most (plans are capped at kMaxPlanBytes each); its JSON is 4 levels
// deep. Larger or deeper files are refused before parsing (nlohmann's dump() recurses per level).
constexpr uintmax_t kMaxFileBytes = uintmax_t{256} << 20;
constexpr int kMaxDepth = 16;

bool too_deep(const std::string& text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// Parses the file into a json object. Returns false with a reason if it is not a cache of ours.
bool read_file(const std::string& path, json* out, std::string* why, bool* missing) {
  *missing = false;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    *missing = true;
    return false;
  }
  if (std::filesystem::is_directory(path, ec)) {
    *why = "it is a directory";
    return false;
  }
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > kMaxFileBytes) {
    *why = "it is " + std::to_string(bytes) + " bytes, over the " + std::to_string(kMaxFileBytes >> 20) + " MiB limit";
    return false;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *why = "it cannot be read";
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  if (too_deep(text)) {
    *why = "its JSON is nested more than " + std::to_string(kMaxDepth) + " levels deep";
    return false;
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *why = "it is not valid JSON";
    return false;
  }
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat) {
    *why = "it is not a yolocu tactic cache (no \"format\": \"yolocu-tactic-cache\")";
    return false;
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != TacticCache::kVersion) {
    *why = "it has cache version " + (j.contains("version") ? j["version"].dump() : std::string("(none)")) +
           ", this build reads version " + std::to_string(TacticCache::kVersion);
    return false;
  }
  if (!j.contains("devices") || !j["devices"].is_object()) {
    *why = "it has no \"devices\" object";
    return false;
  }
  *out = std::move(j);
  return true;
}

bool parse_entries(const json& dev, std::map<std::string, TacticRecord>* out, std::string* why) {
  if (!dev.is_object()) {
    *why = "the device's entry is not an object";
    return false;
  }
  for (auto it = dev.begin(); it != dev.end(); ++it) {
    const json& e = it.value();
    const auto bar = it.key().rfind("|b");
    if (bar == std::string::npos || bar + 2 >= it.key().size() ||
        it.key().find_first_not_of("0123456789", bar + 2) != std::string::npos) {
      *why = "entry '" + it.key() + "' has no batch size";
      return false;
    }
    if (!e.is_object() || !e.contains("tactic") || !e["tactic"].is_string() || e["tactic"].get<std::string>().empty() ||
        !e.contains("us") || !e["us"].is_number() || !(e["us"].get<double>() >= 0)) {
      *why = "entry '" + it.key() + "' is malformed";
      return false;
    }
    std::vector<uint8_t> plan;
    if (e.contains("plan") && (!e["plan"].is_string() || !TacticCache::decode_plan(e["plan"].get<std::string>(), &plan))) {
      *why = "entry '" + it.key() + "' has a malformed plan (not base64, or over " +
             std::to_string(TacticCache::kMaxPlanBytes >> 20) + " MiB)";
      return false;
    }
    TacticRecord r;
    r.tactic = e["tactic"].get<std::string>();
    if (e.contains("plan")) r.plan = e["plan"].get<std::string>();
    if (e.contains("plain") && e["plain"].is_string()) r.plain = e["plain"].get<std::string>();
    r.name = e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : r.tactic;
    r.us = e["us"].get<double>();
    r.loaded = true;
    out->emplace(it.key(), std::move(r));
  }
  return true;
}

// An advisory lock (flock) on a file of its own beside the cache, so that processes saving at the
// same time merge one after the other instead of replacing each other's entries. Waits up to
// kLockWaitMs, then gives up (the cache is an optimisation: the engine works on without it).
constexpr int kLockWaitMs = 10000;

class FileLock {
 public:
  FileLock() = default;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }
  bool acquire(const std::string& path, std::string* why) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      *why = "cannot open the lock file '" + path + "': " + std::strerror(errno);
      return false;
    }
    for (int waited = 0;; waited += 10) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return true;
      if (errno != EWOULDBLOCK && errno != EINTR) break;
      if (waited >= kLockWaitMs) {
        *why = "another process held the lock file '" + path + "' for " + std::to_string(kLockWaitMs / 1000) + " s";
        return false;
      }
      ::usleep(10000);
    }
    *why = "cannot lock '" + path + "': " + std::strerror(errno);
    return false;
  }

 private:
  int fd_ = -1;
};

// `text` through AtomicFile (a temporary file of a unique name beside `path`, fsync'd, renamed
// over `path`, the folder fsync'd): a crash leaves the old file or the new one, never a mix.
bool write_durably(const std::string& path, const std::string& text, std::string* warning) {
  try {
    write_file_atomic(path, text);
    return true;
  } catch (const Error& e) {
    if (warning) *warning = std::string("tactic cache not written: ") + e.what();
    return false;
  }
}

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string TacticCache::encode_plan(const std::vector<uint8_t>& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t v = uint32_t{bytes[i]} << 16 | (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0u) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0u);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kB64[v & 63] : '=';
  }
  return out;
}

bool TacticCache::decode_plan(const std::string& text, std::vector<uint8_t>* bytes) {
  bytes->clear();
  if (text.size() % 4 != 0 || text.size() / 4 * 3 > kMaxPlanBytes + 2) return false;
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + static_cast<size_t>(k)];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return false;  // data after padding
      v[k] = b64_value(c);
      if (v[k] < 0) return false;
    }
    const uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    bytes->push_back(static_cast<uint8_t>(w >> 16));
    if (pad < 2) bytes->push_back(static_cast<uint8_t>(w >> 8));
    if (pad < 1) bytes->push_back(static_cast<uint8_t>(w));
  }
  return bytes->size() <= kMaxPlanBytes;
}

std::string TacticCache::default_path() {
  if (const char* p = std::getenv("YOLOCU_TACTIC_CACHE"); p && *p) return p;
  if (const char* p = std::getenv("XDG_CACHE_HOME"); p && *p) return std::string(p) + "/yolocu/tactics.json";
  if (const char* p = std::getenv("HOME"); p && *p) return std::string(p) + "/.cache/yolocu/tactics.json";
  return "";
}

std::string TacticCache::key(const std::string& signature, int batch) {
  return signature + "|b" + std::to_string(batch);
}

bool TacticCache::load(const std::string& path, std::string* warning) {
  entries_.clear();
  dirty_ = false;
  json j;
  std::string why;
  bool missing = false;
  if (!read_file(path, &j, &why, &missing)) {
    if (missing) return true;
    if (warning) *warning = "tactic cache '" + path + "' ignored: " + why;
    return false;
  }
  const json& devs = j["devices"];
  if (!devs.contains(device_key_)) return true;  // other GPUs only: nothing for us
  std::map<std::string, TacticRecord> parsed;
  if (!parse_entries(devs[device_key_], &parsed, &why)) {
    if (warning) *warning = "tactic cache '" + path + "' ignored: " + why;
    return false;
  }
  entries_ = std::move(parsed);
  return true;
}

bool TacticCache::save(const std::string& path, std::string* warning) const {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::string why;
  FileLock lock;
  if (!lock.acquire(path + ".lock", &why)) {
    if (warning) *warning = "tactic cache '" + path + "' not written: " + why;
    return false;
  }
  // Under the lock: what the file holds now (other processes' entries included), ours merged in
  // by key, written to a temporary file of a unique name, flushed to disk, renamed into place.
  json j;
  bool missing = false;
  if (!read_file(path, &j, &why, &missing))
    j = json{{"format", kFormat}, {"version", kVersion}, {"devices", json::object()}};
  json& devs = j["devices"];
  json dev = devs.contains(device_key_) ? devs[device_key_] : json::object();
  std::map<std::string, TacticRecord> theirs;
  if (!parse_entries(dev, &theirs, &why)) dev = json::object();  // a malformed device entry: ours replace it
  for (const auto& [k, r] : entries_) {
    dev[k] = json{{"tactic", r.tactic}, {"name", r.name}, {"us", r.us}};
    if (!r.plan.empty()) dev[k]["plan"] = r.plan;
    if (!r.plain.empty()) dev[k]["plain"] = r.plain;
  }
  devs[device_key_] = std::move(dev);
  return write_durably(path, j.dump(1) + "\n", warning);
}

std::string TacticCache::derived_key(const std::string& signature, int batch) {
  return key(signature + "|derived", batch);
}

const TacticRecord* TacticCache::find_derived(const std::string& signature, int batch) const {
  auto it = entries_.find(derived_key(signature, batch));
  return it == entries_.end() ? nullptr : &it->second;
}

void TacticCache::put_derived(const std::string& signature, int batch, TacticRecord record) {
  record.us = 0;
  record.loaded = false;
  entries_[derived_key(signature, batch)] = std::move(record);
  dirty_ = true;
}

const TacticRecord* TacticCache::find(const std::string& signature, int batch) const {
  auto it = entries_.find(key(signature, batch));
  return it == entries_.end() ? nullptr : &it->second;
}

void TacticCache::put(const std::string& signature, int batch, TacticRecord record) {
  // A file entry updated with the same tactic (its plan added) still came from the file: later
  // layers of the same build that share it count as cache hits, not as this process's choices.
  auto it = entries_.find(key(signature, batch));
  record.loaded = it != entries_.end() && it->second.loaded && it->second.tactic == record.tactic;
  entries_[key(signature, batch)] = std::move(record);
  dirty_ = true;
}

}  // namespace yolocu::engine

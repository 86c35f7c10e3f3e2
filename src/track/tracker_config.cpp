// tracker_config.cpp - reads ultralytics' tracker YAML files (bytetrack.yaml, botsort.yaml).
//
// Those files are one flat block mapping of scalars with comments. Rather than link a YAML
// library into libyolocu (and into the Python wheel) for that, this reads exactly that subset:
// `key: value  # comment` lines, values plain or quoted. Anything else (nesting, lists, anchors,
// several documents) is refused with the line that holds it, never guessed at.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "yolocu/error.hpp"
#include "yolocu/track.hpp"

namespace yolocu {
namespace {

struct Entry {
  std::string value;
  int line;
  bool quoted;
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

[[noreturn]] void fail(ErrorCode code, const std::string& where, int line, const std::string& what) {
  throw Error(code, "tracker config " + where + ":" + std::to_string(line) + ": " + what);
}

// Splits a value from its trailing comment; unquotes a quoted value.
Entry parse_value(std::string raw, const std::string& where, int line) {
  raw = trim(raw);
  if (!raw.empty() && (raw[0] == '"' || raw[0] == '\'')) {
    const size_t end = raw.find(raw[0], 1);
    if (end == std::string::npos) fail(ErrorCode::kParse, where, line, "unterminated quoted value");
    const std::string rest = trim(raw.substr(end + 1));
    if (!rest.empty() && rest[0] != '#') fail(ErrorCode::kParse, where, line, "text after a quoted value: '" + rest + "'");
    return {raw.substr(1, end - 1), line, true};
  }
  for (size_t i = 0; i < raw.size(); ++i)
    if (raw[i] == '#' && (i == 0 || raw[i - 1] == ' ' || raw[i - 1] == '\t')) {
      raw = trim(raw.substr(0, i));
      break;
    }
  if (!raw.empty() && std::string("[{&*!|>").find(raw[0]) != std::string::npos)
    fail(ErrorCode::kUnsupported, where, line, "only plain scalar values are read, not '" + raw + "'");
  return {raw, line, false};
}

std::map<std::string, Entry> parse_mapping(const std::string& text, const std::string& where) {
  std::map<std::string, Entry> out;
  std::istringstream in(text);
  std::string line_text;
  for (int line = 1; std::getline(in, line_text); ++line) {
    const std::string t = trim(line_text);
    if (t.empty() || t[0] == '#') continue;
    if (t == "---" && out.empty()) continue;
    if (line_text[0] == ' ' || line_text[0] == '\t')
      fail(ErrorCode::kUnsupported, where, line, "nested or indented entries are not tracker settings: '" + t + "'");
    const size_t colon = t.find(':');
    if (colon == std::string::npos || colon == 0 || (colon + 1 < t.size() && t[colon + 1] != ' ' && t[colon + 1] != '\t'))
      fail(ErrorCode::kParse, where, line, "expected 'key: value', got '" + t + "'");
    const std::string key = trim(t.substr(0, colon));
    Entry e = parse_value(t.substr(colon + 1), where, line);
    if (e.value.empty() && !e.quoted) fail(ErrorCode::kParse, where, line, "key '" + key + "' has no value");
    if (!out.emplace(key, e).second) fail(ErrorCode::kParse, where, line, "key '" + key + "' appears twice");
  }
  return out;
}

double to_number(const std::string& key, const Entry& e, const std::string& where, double lo, double hi) {
  errno = 0;
  char* end = nullptr;
  const double v = e.quoted ? NAN : std::strtod(e.value.c_str(), &end);
  if (e.quoted || end == e.value.c_str() || *end != '\0' || errno != 0 || !std::isfinite(v))
    fail(ErrorCode::kInvalidArgument, where, e.line, key + " must be a number, got '" + e.value + "'");
  if (v < lo || v > hi)
    fail(ErrorCode::kInvalidArgument, where, e.line,
         key + " = " + e.value + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

int to_int(const std::string& key, const Entry& e, const std::string& where) {
  errno = 0;
  char* end = nullptr;
  const long v = e.quoted ? 0 : std::strtol(e.value.c_str(), &end, 10);
  if (e.quoted || end == e.value.c_str() || *end != '\0' || errno != 0 || v < 0 || v > 1000000)
    fail(ErrorCode::kInvalidArgument, where, e.line, key + " must be a whole number of frames in [0, 1000000], got '" + e.value + "'");
  return static_cast<int>(v);
}

bool to_bool(const std::string& key, const Entry& e, const std::string& where) {
  static const std::set<std::string> kTrue{"true", "True", "TRUE"}, kFalse{"false", "False", "FALSE"};
  if (!e.quoted && kTrue.count(e.value)) return true;
  if (!e.quoted && kFalse.count(e.value)) return false;
  fail(ErrorCode::kInvalidArgument, where, e.line, key + " must be true or false, got '" + e.value + "'");
}

GmcMethod to_gmc(const Entry& e, const std::string& where) {
  static const std::map<std::string, GmcMethod> kMethods{
      {"none", GmcMethod::kNone}, {"None", GmcMethod::kNone},  {"sparseOptFlow", GmcMethod::kSparseOptFlow},
      {"orb", GmcMethod::kOrb},   {"sift", GmcMethod::kSift},  {"ecc", GmcMethod::kEcc}};
  const auto it = kMethods.find(e.value);
  if (it == kMethods.end())
    fail(ErrorCode::kInvalidArgument, where, e.line,
         "gmc_method must be one of sparseOptFlow, orb, sift, ecc, none; got '" + e.value + "'");
  return it->second;
}

}  // namespace

TrackerConfig parse_tracker_config(const std::string& yaml_text, const std::string& where) {
  const std::map<std::string, Entry> entries = parse_mapping(yaml_text, where);
  const auto type_it = entries.find("tracker_type");
  if (type_it == entries.end()) fail(ErrorCode::kInvalidArgument, where, 0, "tracker_type is missing (bytetrack or botsort)");
  TrackerConfig cfg;
  const std::string& type = type_it->second.value;
  if (type == "bytetrack") cfg.type = TrackerType::kByteTrack;
  else if (type == "botsort") cfg.type = TrackerType::kBotSort;
  else fail(ErrorCode::kInvalidArgument, where, type_it->second.line, "tracker_type must be bytetrack or botsort, got '" + type + "'");

  using Setter = std::function<void(const Entry&)>;
  const std::map<std::string, Setter> common{
      {"tracker_type", [](const Entry&) {}},
      {"track_high_thresh", [&](const Entry& e) { cfg.track_high_thresh = to_number("track_high_thresh", e, where, 0, 1); }},
      {"track_low_thresh", [&](const Entry& e) { cfg.track_low_thresh = to_number("track_low_thresh", e, where, 0, 1); }},
      {"new_track_thresh", [&](const Entry& e) { cfg.new_track_thresh = to_number("new_track_thresh", e, where, 0, 1); }},
      {"track_buffer", [&](const Entry& e) { cfg.track_buffer = to_int("track_buffer", e, where); }},
      {"match_thresh", [&](const Entry& e) { cfg.match_thresh = to_number("match_thresh", e, where, 0, 2); }},
      {"fuse_score", [&](const Entry& e) { cfg.fuse_score = to_bool("fuse_score", e, where); }},
  };
  const std::map<std::string, Setter> botsort{
      {"gmc_method", [&](const Entry& e) { cfg.gmc_method = to_gmc(e, where); }},
      {"proximity_thresh", [&](const Entry& e) { cfg.proximity_thresh = to_number("proximity_thresh", e, where, 0, 1); }},
      {"appearance_thresh", [&](const Entry& e) { cfg.appearance_thresh = to_number("appearance_thresh", e, where, 0, 1); }},
      {"with_reid", [&](const Entry& e) { cfg.with_reid = to_bool("with_reid", e, where); }},
      {"model", [](const Entry&) {}},  // the ReID model: only meaningful with with_reid
  };
  for (const auto& [key, entry] : entries) {
    if (const auto it = common.find(key); it != common.end()) {
      it->second(entry);
    } else if (const auto jt = botsort.find(key); jt != botsort.end()) {
      if (cfg.type != TrackerType::kBotSort)
        fail(ErrorCode::kInvalidArgument, where, entry.line, "key '" + key + "' is a botsort setting, but tracker_type is " + type);
      jt->second(entry);
    } else {
      fail(ErrorCode::kInvalidArgument, where, entry.line, "unknown key '" + key + "'");
    }
  }
  if (cfg.track_low_thresh > cfg.track_high_thresh)
    fail(ErrorCode::kInvalidArgument, where, entries.count("track_low_thresh") ? entries.at("track_low_thresh").line : 0,
         "track_low_thresh (" + std::to_string(cfg.track_low_thresh) + ") exceeds track_high_thresh (" +
             std::to_string(cfg.track_high_thresh) + ")");
  return cfg;
}

TrackerConfig read_tracker_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, "tracker config: cannot open '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::kIo, "tracker config: cannot read '" + path + "'");
  return parse_tracker_config(text.str(), path);
}

}  // namespace yolocu

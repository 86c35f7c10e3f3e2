// track_refs.hpp - reads the references of scripts/track/make_refs.sh: generated detection
// sequences and ultralytics' tracker outputs on them ($YOLOCU_TRACK_DIR, else
// <source>/.data/track/refs; never committed).
#pragma once

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/track.hpp"

namespace yolocu::test {

inline std::string track_refs_dir() {
  const char* env = std::getenv("YOLOCU_TRACK_DIR");
  return env && *env ? env : source_dir() + "/.data/track/refs";
}

// True when $YOLOCU_REQUIRE_TRACK is set (scripts/test.sh after making the references).
inline bool track_refs_required() {
  const char* env = std::getenv("YOLOCU_REQUIRE_TRACK");
  return env && *env && std::string(env) != "0";
}

inline bool track_refs_present() {
  struct stat st;
  return stat((track_refs_dir() + "/COMPLETE").c_str(), &st) == 0;
}

struct RefFrame {
  std::vector<TrackInput> dets;
  std::optional<Warp2x3> warp;
  std::vector<TrackOutput> out;  // ultralytics' rows
};

struct RefSequence {
  std::string name, kind;
  std::vector<RefFrame> frames;
};

inline std::ifstream open_ref(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIo, "track refs: cannot open " + path);
  return in;
}

inline void read_dets(const std::string& path, RefSequence& seq) {
  std::ifstream in = open_ref(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream head(line);
    std::string tag;
    int f = 0, n = 0;
    head >> tag >> f >> n;
    if (tag != "frame" || f != static_cast<int>(seq.frames.size()) + 1) throw Error(ErrorCode::kParse, path + ": bad frame line");
    RefFrame frame;
    Warp2x3 w;
    if (head >> w[0] >> w[1] >> w[2] >> w[3] >> w[4] >> w[5]) frame.warp = w;
    for (int i = 0; i < n; ++i) {
      TrackInput d;
      in >> d.x1 >> d.y1 >> d.x2 >> d.y2 >> d.conf >> d.cls;
      frame.dets.push_back(d);
    }
    std::getline(in, line);
    seq.frames.push_back(frame);
  }
}

inline void read_outputs(const std::string& path, RefSequence& seq) {
  std::ifstream in = open_ref(path);
  std::string tag;
  int f = 0, n = 0;
  while (in >> tag >> f >> n) {
    if (tag != "frame" || f < 1 || f > static_cast<int>(seq.frames.size())) throw Error(ErrorCode::kParse, path + ": bad frame line");
    for (int i = 0; i < n; ++i) {
      TrackOutput o;
      double id = 0, idx = 0;
      in >> o.x1 >> o.y1 >> o.x2 >> o.y2 >> id >> o.score >> o.cls >> idx;
      o.track_id = static_cast<int64_t>(id);
      o.idx = static_cast<int32_t>(idx);
      seq.frames[f - 1].out.push_back(o);
    }
  }
}

// Every sequence listed in `listing` with `tracker`'s outputs (e.g. "bytetrack", "botsort").
inline std::vector<RefSequence> read_track_refs(const std::string& tracker, const std::string& listing = "sequences.txt") {
  std::vector<RefSequence> out;
  std::ifstream list = open_ref(track_refs_dir() + "/" + listing);
  std::string name, kind, seed, frames;
  while (list >> name >> kind >> seed >> frames) {
    RefSequence seq{name, kind, {}};
    read_dets(track_refs_dir() + "/" + name + ".dets", seq);
    read_outputs(track_refs_dir() + "/" + name + "." + tracker + ".out", seq);
    out.push_back(std::move(seq));
  }
  return out;
}

}  // namespace yolocu::test

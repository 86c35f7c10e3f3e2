// The tactic cache on disk (host-only, no CUDA): which tactic won for a layer signature and batch
// size on one device, so that a later engine build loads its tactics instead of timing them again,
// like TensorRT's timing cache but readable. One JSON file may hold several devices:
//
//   {"format": "yolocu-tactic-cache", "version": 1,
//    "devices": {"<device key>": {"<signature>|b<batch>": {"tactic": "...", "name": "...", "us": 1.5}}}}
//
// The device key names everything a tactic's validity and speed depends on: GPU name and SM count,
// driver, cuDNN and cudnn-frontend versions, yolocu's tactic format. Entries of other keys are kept
// on save but never used. A file that cannot be parsed, has another format/version or holds a
// malformed entry is ignored as a whole (a warning says why), never trusted and never crashes.
#pragma once

#include <map>
#include <string>

namespace yolocu::engine {

struct TacticRecord {
  std::string tactic;  // identity, e.g. "cudnn:IMPLICIT_PRECOMP_GEMM" or "cudnn-graph:e4;24=26"
  std::string name;    // display name, e.g. "cudnn-graph eng4_k24=26"
  double us = 0;       // measured time per launch when it was chosen
  bool loaded = false; // read from the file (not put() by this process)
};

class TacticCache {
 public:
  static constexpr int kVersion = 1;

  // $YOLOCU_TACTIC_CACHE, else $XDG_CACHE_HOME/yolocu/tactics.json, else $HOME/.cache/yolocu/
  // tactics.json; "" if none of them is set.
  static std::string default_path();

  explicit TacticCache(std::string device_key) : device_key_(std::move(device_key)) {}

  // Reads `path`. A missing file is no warning (returns true, nothing loaded); an unusable one
  // returns false with `*warning` saying why, and nothing of it is used.
  bool load(const std::string& path, std::string* warning);
  // Writes the entries of this device merged into what the file holds now (other devices' entries
  // kept; a corrupt file is replaced), through a temporary file renamed into place. Returns false
  // with `*warning` if the file cannot be written (the engine works on without it).
  bool save(const std::string& path, std::string* warning) const;

  const TacticRecord* find(const std::string& signature, int batch) const;
  void put(const std::string& signature, int batch, TacticRecord record);
  size_t size() const { return entries_.size(); }
  bool dirty() const { return dirty_; }
  const std::string& device_key() const { return device_key_; }

 private:
  static std::string key(const std::string& signature, int batch);
  std::string device_key_;
  std::map<std::string, TacticRecord> entries_;  // this device only
  bool dirty_ = false;
};

}  // namespace yolocu::engine

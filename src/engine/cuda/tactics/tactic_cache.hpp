// The tactic cache on disk (host-only, no CUDA): which tactic won for a layer signature and batch
// size on one device, so that a later engine build loads its tactics instead of timing them again,
// like TensorRT's timing cache but readable. One JSON file may hold several devices:
//
//   {"format": "yolocu-tactic-cache", "version": 1,
//    "devices": {"<device key>": {"<signature>|b<batch>": {"tactic": "...", "name": "...", "us": 1.5,
//                                                         "plan": "<base64>"}}}}
//
// "plan" (optional) is the tactic's compiled plan as its family serialises it (cuDNN graph plans of
// runtime-compiled engines: cudnn-frontend's Graph::serialize), so that a later build restores the
// plan instead of compiling its kernel again; the tactic is still checked before use.
//
// The device key names everything a tactic's validity and speed depends on: GPU name and SM count,
// driver, cuDNN and cudnn-frontend versions, yolocu's tactic format. Entries of other keys are kept
// on save but never used. A file that cannot be parsed, has another format/version or holds a
// malformed entry is ignored as a whole (a warning says why), never trusted and never crashes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace yolocu::engine {

struct TacticRecord {
  std::string tactic;  // identity, e.g. "cudnn:IMPLICIT_PRECOMP_GEMM" or "cudnn-graph:e4;24=26"
  std::string name;    // display name, e.g. "cudnn-graph eng4_k24=26"
  double us = 0;       // measured time per launch when it was chosen
  std::string plan = {};  // serialised plan, base64 ("" if none)
  // Where `tactic` compiles its kernel at runtime: the fastest candidate of the same sweep that does
  // not (ConvTactic::compiled_at_runtime), which derived batch sizes may take instead
  // (CudaEngineOptions::derive_without_compiling); "" otherwise, or from a file written before it.
  std::string plain = {};
  bool loaded = false; // read from the file (not put() by this process; put() of the same tactic keeps it)
};

class TacticCache {
 public:
  static constexpr int kVersion = 1;
  // Plans larger than this (decoded) are not stored.
  static constexpr size_t kMaxPlanBytes = size_t{4} << 20;

  // Base64 (RFC 4648, with padding) of a serialised plan; decode_plan returns false for anything
  // that is not well-formed base64 or decodes to more than kMaxPlanBytes.
  static std::string encode_plan(const std::vector<uint8_t>& bytes);
  static bool decode_plan(const std::string& text, std::vector<uint8_t>* bytes);

  // $YOLOCU_TACTIC_CACHE, else $XDG_CACHE_HOME/yolocu/tactics.json, else $HOME/.cache/yolocu/
  // tactics.json; "" if none of them is set.
  static std::string default_path();

  explicit TacticCache(std::string device_key) : device_key_(std::move(device_key)) {}

  // Reads `path`. A missing file is no warning (returns true, nothing loaded); an unusable one
  // returns false with `*warning` saying why, and nothing of it is used.
  bool load(const std::string& path, std::string* warning);
  // Writes the entries of this device merged by key into what the file holds now (entries other
  // processes saved meanwhile and other devices' entries kept; ours win on the same key; a corrupt
  // file or device entry is replaced). Holds an advisory lock (flock on "<path>.lock", waiting up
  // to 10 s) while it reads, merges and writes, so that processes saving at once lose nothing;
  // writes a temporary file of a unique name, fsyncs it and renames it into place. Returns false
  // with `*warning` if the file cannot be written (the engine works on without it).
  bool save(const std::string& path, std::string* warning) const;

  const TacticRecord* find(const std::string& signature, int batch) const;
  void put(const std::string& signature, int batch, TacticRecord record);
  // Derived entries: the tactic of a layer at a batch size the build did not tune, taken from the
  // nearest tuned size's choice (not timed: "us" 0), kept for its plan so that a later start
  // restores it instead of compiling it again. Stored under "<signature>|derived|b<batch>" (files
  // of earlier builds read them as entries they never look up); find() never returns them.
  const TacticRecord* find_derived(const std::string& signature, int batch) const;
  void put_derived(const std::string& signature, int batch, TacticRecord record);
  size_t size() const { return entries_.size(); }
  bool dirty() const { return dirty_; }
  const std::string& device_key() const { return device_key_; }

 private:
  static std::string key(const std::string& signature, int batch);
  static std::string derived_key(const std::string& signature, int batch);
  std::string device_key_;
  std::map<std::string, TacticRecord> entries_;  // this device only
  bool dirty_ = false;
};

}  // namespace yolocu::engine

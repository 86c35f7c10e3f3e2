// Helpers the tuner's two source files share (tuner.cpp: choose and the checks; tuner_pool.cpp:
// prebuild and derive_many on host threads). Not part of the tuner's interface.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/tactic_cache.hpp"

namespace yolocu::engine::tuner_internal {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0);

// This process's choices (device key + signature + batch): the record and the checked tactic.
// memo_find: the tactic under `key` (only if its record names *id, when id is given), its record
// into *rec; null if none.
std::shared_ptr<const ConvTactic> memo_find(const std::string& key, const std::string* id, TacticRecord* rec);
void memo_put(const std::string& key, const TacticRecord& rec, std::shared_ptr<const ConvTactic> t);

// The tactic's serialised plan as the cache stores it (base64), "" when it has none or it does not
// restore; the bytes of a record's plan (empty: none).
std::string plan_text(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim, const ConvTactic& t);
std::vector<uint8_t> plan_bytes(const TacticRecord& r);

}  // namespace yolocu::engine::tuner_internal

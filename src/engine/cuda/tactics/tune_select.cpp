// The tuner's pure parts: two-stage choice and the tuning-time breakdown (see tune_select.hpp).
#include "engine/cuda/tactics/tune_select.hpp"

#include <algorithm>
#include <cstdio>

namespace yolocu::engine {

std::vector<size_t> retime_set(const std::vector<double>& quick_us, double margin) {
  const int best = pick_fastest(quick_us);
  std::vector<size_t> out;
  if (best < 0) return out;
  const double limit = quick_us[static_cast<size_t>(best)] * margin;
  for (size_t i = 0; i < quick_us.size(); ++i)
    if (quick_us[i] >= 0 && quick_us[i] <= limit) out.push_back(i);
  return out;
}

int pick_fastest(const std::vector<double>& us) {
  int best = -1;
  for (size_t i = 0; i < us.size(); ++i)
    if (us[i] >= 0 && (best < 0 || us[i] < us[static_cast<size_t>(best)])) best = static_cast<int>(i);
  return best;
}

int pick_plain(const std::vector<double>& us, const std::vector<bool>& unfit, int winner) {
  if (winner < 0 || static_cast<size_t>(winner) >= unfit.size() || !unfit[static_cast<size_t>(winner)]) return -1;
  std::vector<double> plain(us.size(), -1.0);
  for (size_t i = 0; i < us.size() && i < unfit.size(); ++i)
    if (!unfit[i]) plain[i] = us[i];
  return pick_fastest(plain);
}

TacticFamily family_of(const std::string& tactic_id) {
  // The packed-input wrapper ("packin:<inner id>") counts as its inner tactic's family (it keeps
  // that tactic's serialised plan, and a cutlass inner is left out like a cutlass tactic).
  if (tactic_id.rfind("packin:", 0) == 0) return family_of(tactic_id.substr(7));
  if (tactic_id.rfind("cudnn-graph:", 0) == 0) return TacticFamily::kCudnnGraph;
  if (tactic_id.rfind("own:", 0) == 0) return TacticFamily::kOwn;
  if (tactic_id.rfind("cutlass:", 0) == 0) return TacticFamily::kCutlass;
  return TacticFamily::kCudnnLegacy;
}

const char* family_name(TacticFamily f) {
  switch (f) {
    case TacticFamily::kCudnnGraph: return "cudnn-graph";
    case TacticFamily::kCudnnLegacy: return "legacy";
    case TacticFamily::kOwn: return "own";
    case TacticFamily::kCutlass: return "cutlass";
  }
  return "?";
}

void TuneBreakdown::merge(const TuneBreakdown& o) {
  total_ms += o.total_ms;
  cache_io_ms += o.cache_io_ms;
  prebuild_wall_ms += o.prebuild_wall_ms;
  prebuild_threads += o.prebuild_threads;
  handles_ms += o.handles_ms;
  list_ms += o.list_ms;
  lists += o.lists;
  for (int f = 0; f < kTacticFamilies; ++f) {
    build_ms[f] += o.build_ms[f];
    built[f] += o.built[f];
  }
  build_failed += o.build_failed;
  if (o.slowest_build_ms > slowest_build_ms) {
    slowest_build_ms = o.slowest_build_ms;
    slowest_build = o.slowest_build;
  }
  restore_ms += o.restore_ms;
  restores += o.restores;
  choose_ms += o.choose_ms;
  prepare_ms += o.prepare_ms;
  check_ms += o.check_ms;
  checks += o.checks;
  timing_ms += o.timing_ms;
  quick_timings += o.quick_timings;
  full_timings += o.full_timings;
  serialise_ms += o.serialise_ms;
  serialised += o.serialised;
  for (int f = 0; f < kTacticFamilies; ++f) wins[f] += o.wins[f];
  for (int r = 0; r < kRankBins; ++r) graph_win_rank[r] += o.graph_win_rank[r];
  for (int k = 0; k < 3; ++k) cap_loss_us[k] += o.cap_loss_us[k];
  brief_best_us += o.brief_best_us;
}

void TuneBreakdown::add_cap_costs(const std::vector<double>& brief_us, const std::vector<int>& graph_place) {
  auto fastest = [&](int cap) {  // cap < 0: no cap
    double best = -1;
    for (size_t i = 0; i < brief_us.size() && i < graph_place.size(); ++i) {
      if (brief_us[i] < 0 || (cap >= 0 && graph_place[i] >= cap)) continue;
      if (best < 0 || brief_us[i] < best) best = brief_us[i];
    }
    return best;
  };
  const double all = fastest(-1);
  if (all < 0) return;
  brief_best_us += all;
  for (int k = 0; k < 3; ++k) {
    const double capped = fastest(kCaps[k]);
    // nothing left under the cap (every kept candidate failed): the layer would have no tactic;
    // count the whole best time as the loss, a lower bound of "unusable"
    cap_loss_us[k] += capped < 0 ? all : capped - all;
  }
}

void TuneBreakdown::add_win(const std::string& id, int graph_rank) {
  const TacticFamily f = family_of(id);
  ++wins[static_cast<int>(f)];
  if (f == TacticFamily::kCudnnGraph && graph_rank >= 0) ++graph_win_rank[std::min(graph_rank, kRankBins - 1)];
}

void TuneBreakdown::add_build(const std::string& id, double ms, bool ok) {
  const int f = static_cast<int>(family_of(id));
  build_ms[f] += ms;
  if (ok) ++built[f];
  else ++build_failed;
  if (ms > slowest_build_ms) {
    slowest_build_ms = ms;
    slowest_build = id;
  }
}

void TuneBreakdown::add_builds(TacticFamily f, double ms, int n) {
  build_ms[static_cast<int>(f)] += ms;
  built[static_cast<int>(f)] += n;
}

std::string describe(const TuneBreakdown& b) {
  double build = 0;
  int plans = 0;
  for (int f = 0; f < kTacticFamilies; ++f) {
    build += b.build_ms[f];
    plans += b.built[f];
  }
  char buf[1024];
  int n = std::snprintf(
      buf, sizeof buf,
      "tune breakdown: prebuild wall %.0f ms on %d threads (handles %.0f thread-ms, heuristics %.0f thread-ms over %d "
      "lists; build %.0f thread-ms over %d plans + %d failed: %s %.0f ms / %d, %s %.0f ms / %d, %s %.0f ms / %d, "
      "%s %.0f ms / %d; "
      "slowest %.0f ms %s; restore %.0f thread-ms over %d), choose %.0f ms (prepare %.0f ms, check %.0f ms over %d, "
      "timing %.0f ms over %d brief + %d full, serialise %.0f ms over %d)",
      b.prebuild_wall_ms, b.prebuild_threads, b.handles_ms, b.list_ms, b.lists, build, plans, b.build_failed,
      family_name(TacticFamily::kCudnnGraph), b.build_ms[0], b.built[0], family_name(TacticFamily::kCudnnLegacy),
      b.build_ms[1], b.built[1], family_name(TacticFamily::kOwn), b.build_ms[2], b.built[2],
      family_name(TacticFamily::kCutlass), b.build_ms[3], b.built[3], b.slowest_build_ms,
      b.slowest_build.empty() ? "-" : b.slowest_build.c_str(), b.restore_ms, b.restores, b.choose_ms, b.prepare_ms,
      b.check_ms, b.checks, b.timing_ms, b.quick_timings, b.full_timings, b.serialise_ms, b.serialised);
  std::string s(buf, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
  if (b.wins[0] + b.wins[1] + b.wins[2] + b.wins[3] > 0) {
    s += "; winners: ";
    for (int f = 0; f < kTacticFamilies; ++f) {
      s += std::string(f ? ", " : "") + family_name(static_cast<TacticFamily>(f)) + " " + std::to_string(b.wins[f]);
    }
    s += " (cudnn-graph by place in cuDNN's list:";
    for (int r = 0; r < TuneBreakdown::kRankBins; ++r)
      s += " " + std::to_string(b.graph_win_rank[r]);
    s += ")";
  }
  if (b.brief_best_us > 0) {
    char cap[256];
    std::snprintf(cap, sizeof cap,
                  "; capped at %d / %d / %d graph plans: +%.1f / +%.1f / +%.1f us over the tuned layers' %.1f us "
                  "(brief timings)",
                  TuneBreakdown::kCaps[0], TuneBreakdown::kCaps[1], TuneBreakdown::kCaps[2], b.cap_loss_us[0],
                  b.cap_loss_us[1], b.cap_loss_us[2], b.brief_best_us);
    s += cap;
  }
  if (b.total_ms > 0) {
    const double other = b.total_ms - b.prebuild_wall_ms - b.choose_ms - b.cache_io_ms;
    std::snprintf(buf, sizeof buf, ", cache file %.0f ms, other %.0f ms, total %.0f ms", b.cache_io_ms, other,
                  b.total_ms);
    s += buf;
  }
  return s;
}

}  // namespace yolocu::engine

// The tuner's pure parts (host-only, no CUDA; unit-tested without a GPU): how many launches and
// replays time a candidate, the two-stage choice of the fastest, and the breakdown of where the
// tuning time goes (TunerStats::breakdown, CudaEngineStats::tune_breakdown).
//
// Two-stage timing: every candidate that passes the check is timed briefly (kQuickTimings replays
// of a graph of kReps launches, after one warm-up); only those within kRetimeMargin of the fastest
// brief time are timed again with kTimings replays, and the fastest of that second sweep wins. A
// candidate more than 25% slower than the best in the brief sweep does not win the full one unless
// the two are within the noise of a few replays.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace yolocu::engine {

struct TuneTiming {
  static constexpr int kReps = 10;             // launches per timed CUDA graph
  static constexpr int kQuickTimings = 3;      // replays of the brief sweep (median)
  static constexpr int kTimings = 5;           // replays of the full sweep (median)
  static constexpr double kRetimeMargin = 1.25;  // brief time <= 1.25 x the best brief time: timed again
  static constexpr int kQuickGraphPlans = 3;   // YOLOCU_TUNE_QUICK=1: graph plans per layer (1 launch, 1 replay)
};

// Indices of `quick_us` (negative: failed, left out) within `margin` x the smallest, in index
// order; empty if every entry failed.
std::vector<size_t> retime_set(const std::vector<double>& quick_us, double margin);

// Index of the smallest non-negative entry (the first of equal ones); -1 if there is none.
int pick_fastest(const std::vector<double>& us);

// The candidate a derived batch size may build without a runtime compilation
// (CudaEngineOptions::derive_without_compiling). unfit[i]: candidate i cannot serve there (it
// compiles at runtime, or needs more workspace than a derived size has). -1 if the winner is fit
// (unfit[winner] false: the winner serves) or no fit candidate has a time; else the index of the
// fastest fit one (`us` negative: failed, left out; the first of equal times).
int pick_plain(const std::vector<double>& us, const std::vector<bool>& unfit, int winner);

// Tactic families as the breakdown counts them, by id prefix ("cudnn-graph:", "cudnn:", "own:",
// "cutlass:"; "packin:<inner id>" as its inner tactic's).
enum class TacticFamily { kCudnnGraph = 0, kCudnnLegacy = 1, kOwn = 2, kCutlass = 3 };
constexpr int kTacticFamilies = 4;
TacticFamily family_of(const std::string& tactic_id);
const char* family_name(TacticFamily f);

// Where an engine build's tuning time went. "thread-ms" sum the time of every pool thread (16 on
// the H100 host), so they may exceed the wall time; "ms" without "thread" are on the engine's own
// thread (choose()).
struct TuneBreakdown {
  double total_ms = 0;           // the engine's tune_ms (cache file load and save included)
  double cache_io_ms = 0;        // reading and writing the tactic cache file
  double prebuild_wall_ms = 0;   // prebuild(): wall time of the parallel build
  int prebuild_threads = 0;
  double handles_ms = 0;         // thread-ms creating the pool's cuDNN handles
  double list_ms = 0;            // thread-ms of cudnn-graph heuristics queries (lists of engine configs)
  int lists = 0;
  double build_ms[kTacticFamilies] = {};  // thread-ms building candidates (pool and choose())
  int built[kTacticFamilies] = {};        // candidates built
  int build_failed = 0;                   // cudnn-graph configs that did not build (or need too much workspace)
  double slowest_build_ms = 0;            // the slowest single candidate build
  std::string slowest_build;              // its tactic id
  double restore_ms = 0;         // thread-ms re-creating the cache file's tactics (plan restore or build from id)
  int restores = 0;
  double choose_ms = 0;          // choose(): everything on the engine's thread, the four below included
  double prepare_ms = 0;         // random inputs + reference output, once per tuned or checked layer
  double check_ms = 0;           // numeric checks
  int checks = 0;
  double timing_ms = 0;          // time_us(): graph capture, instantiation, replays
  int quick_timings = 0, full_timings = 0;
  double serialise_ms = 0;       // plan_text(): serialising a chosen plan and restoring it once
  int serialised = 0;
  // Tuned layers won by each family, and the cudnn-graph winners by their place among the layer's
  // graph plans (cuDNN's heuristic order; the last bin holds kRankBins - 1 and later): what a
  // smaller max_graph_plans would lose.
  static constexpr int kRankBins = 12;
  int wins[kTacticFamilies] = {};
  int graph_win_rank[kRankBins] = {};
  // The price of a smaller max_graph_plans, from the brief sweep's times: over the tuned layers, the
  // sum of (the fastest brief time among the candidates a cap of kCaps[k] graph plans keeps, other
  // families always kept) minus (the fastest of all), next to the sum of the fastest brief times.
  static constexpr int kCaps[3] = {4, 7, 10};
  double cap_loss_us[3] = {};
  double brief_best_us = 0;

  // Sums counts and times; the slowest build is the slower of the two.
  void merge(const TuneBreakdown& o);
  // Records one candidate build of `id` that took `ms` (ok: it built; a failed one counts in
  // build_failed and its time in its family's).
  void add_build(const std::string& id, double ms, bool ok);
  // Records `n` candidates of family `f` built together in `ms` (legacy cuDNN, own: cheap, one call).
  void add_builds(TacticFamily f, double ms, int n);
  // Records a tuned layer's winner: its id, and for a cudnn-graph one its place among the graph plans.
  void add_win(const std::string& id, int graph_rank);
  // Records what the caps would cost one tuned layer: per candidate that passed, its brief time
  // (negative: failed, ignored), and its place among the graph plans (-1: another family).
  void add_cap_costs(const std::vector<double>& brief_us, const std::vector<int>& graph_place);
};

// One line, "tune breakdown: prebuild wall X ms on T threads (...), check A ms (n), timing B ms
// (q brief + f full), serialise C ms (n), ...": what bench_cuda_engine and `yolocu inspect` print.
std::string describe(const TuneBreakdown& b);

}  // namespace yolocu::engine

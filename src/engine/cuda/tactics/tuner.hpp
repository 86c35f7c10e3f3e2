// The tuner: picks one tactic per convolution layer and batch size. Order of trust:
//   1. the tactic cache on disk (tactic_cache.hpp), when the engine has one;
//   2. the choice this process already made for the same device, layer signature and batch (so
//      every engine of a model runs the same kernels and computes bit-identical results);
//   3. tuning: every candidate of every family (conv_tactic.hpp) is run on random data and checked
//      against the reference convolution (cuDNN implicit GEMM + yolocu's epilogue), then the ones
//      that pass are timed in two stages (tune_select.hpp: a brief sweep, then a full one of those
//      within 25% of the best); the fastest of the full sweep wins. A layer with a pitched input
//      or residual (a channel view) first has the tactic of the same layer on packed inputs chosen
//      (1 to 3, as a layer of its own signature); that tactic in the "packin" wrapper (copy, then
//      run it) joins the families' native candidates, so the layer is never slower than the copy
//      and the packed layer, and always has a candidate. The check's reference reads packed copies.
// A choice from the file is checked before it is used (never trusted); if it fails the check or no
// longer builds, a warning says so and the layer is tuned. A choice of this process was checked
// when it was made: its tactic object is shared.
//
// Tolerances of the check (output vs reference over the whole output tensor):
//   FP16: rel L2 <= 2e-3 and max |d| <= 2e-2 * max(1, max |ref|). Both sides round to fp16 once
//         (rel. error <= 2^-11 each) after fp32 accumulation in a different order: a correct tactic
//         sits near 3e-4 rel L2; a wrong border, channel or epilogue is far above.
//   FP32: rel L2 <= 1e-5 and max |d| <= 1e-4 * max(1, max |ref|): admits reordered fp32 sums,
//         rejects TF32 (~1e-3), so FP32 engines stay within 1e-5 of the CPU engine.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/tactic_cache.hpp"
#include "engine/cuda/tactics/tune_select.hpp"

namespace yolocu::engine {

// Everything a tactic's validity and speed depends on: GPU name, SM count and compute capability,
// driver, cuDNN (runtime) and cudnn-frontend versions, the tactic format (raised when a family
// joins: cached layers are then tuned again with its candidates).
std::string tactic_device_key(int device);

// A candidate's output against the reference (cuda_kernels::compare_rows's sums): rel L2 and the
// largest |difference|; ok within the check's bounds (FP16: rel L2 <= 2e-3 and |d| <= 2e-2 *
// max(1, largest |ref|), both accumulating in fp32 in different orders and rounding to fp16; FP32:
// 1e-5 and 1e-4) with nothing non-finite. The tuner's check and the direct stem's use it.
struct CheckVerdict {
  bool ok = false;
  double rel_l2 = 0, max_diff = 0;
};
CheckVerdict check_verdict(const cuda_kernels::CompareAcc& acc, bool half);

// Forgets this process's choices (tests: the next engine build then behaves as in a new process).
void forget_process_tactics();
// This process's other build-time choices (the direct stem's), by key: shared by its engines as
// the tactics are (two engines of one process then decide alike), forgotten with them.
bool find_process_choice(const std::string& key, std::string* choice);
void put_process_choice(const std::string& key, const std::string& choice);

struct TunedLayer {
  std::shared_ptr<const ConvTactic> tactic;
  std::string plain;       // TacticRecord::plain of the choice ("" if none)
  double us = 0;           // time per launch (measured now, or as recorded)
  int candidates = 0;      // tried (0 when taken from a cache)
  int rejected = 0;        // failed the check
  bool from_cache = false;
};

struct TunerStats {
  int layers = 0, memo_hits = 0, cache_hits = 0, tuned = 0, candidates = 0, rejected = 0;
  int plans_restored = 0;  // cache hits whose tactic was restored from its serialised plan
  int derived_restored = 0;  // derive_many(): tactics restored from the file's derived plans
  int derived_compiled = 0;  // derive_many(): tactics whose build compiled a kernel at runtime
  double derive_pool_ms = 0;    // derive_many(): wall time of the pool's builds and restores
  double derive_finish_ms = 0;  // ... of what follows on the engine's handle (failed builds, plans serialised)
  double ms = 0;  // host time spent in choose()
  TuneBreakdown breakdown;  // where the time of prebuild() and choose() went (breakdown.choose_ms == ms)
};

class Tuner {
 public:
  // Launches per timed CUDA graph and timed replays per candidate: TuneTiming (tune_select.hpp).
  // YOLOCU_TUNE_QUICK=1: 1 launch, 1 replay, no second sweep, and at most
  // TuneTiming::kQuickGraphPlans cuDNN graph plans per layer, for runs under compute-sanitizer,
  // where only the checks of every family matter.

  // cache may be null. stream: where checks and timings run (synchronised by choose()).
  Tuner(cudnnHandle_t cudnn, const TacticLimits& limits, TacticCache* cache, int device, cudaStream_t stream);
  ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // The tactic for `pb` (batch pb.n). `b` are the layer's real buffers (b.x and b.residual are
  // overwritten with random data, b.y with results; b.ws holds limits.workspace bytes); y_ref
  // holds at least the output's bytes.
  TunedLayer choose(const ConvProblem& pb, const ConvBuffers& b, void* y_ref);

  // Builds, on `threads` host threads each with its own cuDNN handle, what choose() will need for
  // `problems`: the tactic the cache file names (warm load), else the cuDNN graph candidates and
  // the legacy cuDNN ones (cold tuning); nothing for what this process already chose. Building a
  // plan (often a runtime compilation) is what both spend their time on, and it needs no GPU time.
  // Work items are small: one per cached tactic, one heuristics query per problem, one build per
  // cuDNN graph engine config (at most limits.max_graph_plans that build, the first ones of the
  // list: the same set whatever the threads' timing), so that the pool stays busy when problems
  // are few or uneven.
  void prebuild(const std::vector<ConvProblem>& problems, int device, int threads);

  // For a batch size that was not tuned: the tactic `id` (chosen for the nearest tuned batch) if it
  // builds for `pb` within the workspace, else the first cuDNN graph plan, else implicit GEMM (behind
  // the packin wrapper for pitched inputs, else direct). No
  // timing, no check (the check ran on the tuned batch), no synchronisation.
  std::shared_ptr<const ConvTactic> derive(const ConvProblem& pb, const std::string& id);
  // derive() for every layer of a batch size at once (problems[i] with ids[i]): the tactics are
  // built on `threads` host threads each with its own cuDNN handle (as prebuild()), one build per
  // distinct (problem, tactic); what does not build there is derived on the engine's handle. A
  // derived batch size then costs about one layer's plan compilation instead of all of them in a row
  // (several video streams warming batch sizes one layer at a time waited on every build in turn).
  // A tactic another engine of this process derived already is taken from it. With a cache: a plan
  // the file keeps for the same derived tactic is restored instead of built, and plans built here
  // are put there (TacticCache::put_derived; the caller saves the file).
  std::vector<std::shared_ptr<const ConvTactic>> derive_many(const std::vector<ConvProblem>& problems,
                                                             const std::vector<std::string>& ids, int device,
                                                             int threads);

  void set_limits(const TacticLimits& limits);
  const TunerStats& stats() const { return stats_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  // The process memo's key of "<signature>|b<batch>" (device and candidate set included).
  std::string memo_key_of(const std::string& key) const;
  // The cache file's record of a layer, unless it names a family this tuner leaves out.
  const TacticRecord* usable_record(const std::string& sig, int batch) const;
  using Check = CheckVerdict;
  Check check(const ConvProblem& pb, const ConvTactic& t, const ConvBuffers& b, void* y_ref);
  double time_us(const ConvTactic& t, const ConvBuffers& b, int timings);
  void prepare(const ConvProblem& pb, const ConvBuffers& b, void* y_ref);
  // choose()'s passes: the cache file's record, this process's memo, else tuning (candidates,
  // check and brief sweep, full sweep of the finalists).
  struct Choice;
  struct Sweep {
    std::vector<TacticPtr> passed;  // candidates that passed the check and timed
    std::vector<double> brief;      // their brief-sweep times (us)
    std::vector<int> place;         // their index in the candidate list
  };
  void ensure_prepared(Choice& c);
  TunedLayer finish(Choice& c);
  std::string serialise(const ConvProblem& pb, const ConvTactic& t);
  TacticPtr cached_tactic(Choice& c, const TacticRecord& r, bool* memo_hit);
  bool choose_from_cache(Choice& c, const TacticRecord& r);
  bool choose_from_memo(Choice& c);
  std::vector<TacticPtr> candidates(const Choice& c);
  Sweep check_and_sweep(Choice& c, std::vector<TacticPtr>& cands);
  int pick_winner(const Choice& c, const Sweep& s, double* us);
  void tune(Choice& c);
  std::shared_ptr<const ConvTactic> choose_packed_inputs(Choice& c);

  cudnnHandle_t cudnn_;
  TacticLimits limits_;
  TacticCache* cache_;
  std::string device_key_;
  cudaStream_t stream_;
  cudaStream_t capture_ = nullptr;
  cudaEvent_t ev_[2] = {nullptr, nullptr};
  void* d_acc_ = nullptr;
  TunerStats stats_;
  std::vector<std::string> warnings_;
  int reps_ = TuneTiming::kReps, quick_timings_ = TuneTiming::kQuickTimings, timings_ = TuneTiming::kTimings;
  bool quick_ = false;
  std::map<std::string, std::vector<TacticPtr>> prebuilt_;  // signature|b<batch> -> graph candidates
  std::map<std::string, std::vector<TacticPtr>> prelegacy_; // signature|b<batch> -> legacy candidates
  std::map<std::string, TacticPtr> premade_;                // signature|b<batch> -> the cached tactic
};

}  // namespace yolocu::engine

// Tuner: memo / disk cache / check + timing of every candidate (see tuner.hpp).
#include "engine/cuda/tactics/tuner.hpp"

#include <cudnn_frontend_version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"

namespace yolocu::engine {
namespace {

namespace ck = cuda_kernels;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Adds the time from construction to destruction to `ms`: on every way out, exceptions included.
struct AddElapsed {
  double& ms;
  Clock::time_point t0 = Clock::now();
  ~AddElapsed() { ms += ms_since(t0); }
};

// Choices made in this process: device key + signature + batch -> the record and the tactic object,
// checked once and then shared by every engine of the process (tactics are immutable; run() takes
// the caller's cuDNN handle and stream).
struct MemoEntry {
  TacticRecord rec;
  std::shared_ptr<const ConvTactic> tactic;
};
struct Memo {
  std::mutex mutex;
  std::map<std::string, MemoEntry> choices;
};
Memo& memo() {
  static Memo m;
  return m;
}
std::shared_ptr<const ConvTactic> memo_find(const std::string& key, const std::string* id, TacticRecord* rec) {
  std::lock_guard<std::mutex> lock(memo().mutex);
  auto it = memo().choices.find(key);
  if (it == memo().choices.end() || (id && it->second.rec.tactic != *id)) return nullptr;
  if (rec) *rec = it->second.rec;
  return it->second.tactic;
}
void memo_put(const std::string& key, const TacticRecord& rec, std::shared_ptr<const ConvTactic> t) {
  std::lock_guard<std::mutex> lock(memo().mutex);
  memo().choices[key] = MemoEntry{rec, std::move(t)};
}

// The tactic's serialised plan as the cache stores it (base64), "" if it has none, it is too big,
// or it does not restore: cuDNN serialises the plans of every engine but deserialises only those
// of its runtime-compiled ones (measured on the H100: 47 of 61 stored plans restored), so each
// plan is restored once here, when it is chosen, and kept only if that works. A warm build then
// restores every plan the file carries. Only restored: a plan that does not restore is not built
// again from its id (that was a second compilation, on the engine's thread, of every chosen plan
// of an engine that cuDNN does not deserialise).
std::string plan_text(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim, const ConvTactic& t) {
  std::vector<uint8_t> bytes;
  try {
    if (!t.serialize_plan(&bytes) || bytes.empty() || bytes.size() > TacticCache::kMaxPlanBytes) return "";
    const TacticPtr back = restore_cudnn_graph(cudnn, pb, t.id(), lim, bytes);
    if (!back || !back->restored_from_plan()) return "";
  } catch (const std::exception&) {
    return "";
  }
  return TacticCache::encode_plan(bytes);
}

// The bytes of a record's plan ("" / malformed: none; the file's loader already refused malformed ones).
std::vector<uint8_t> plan_bytes(const TacticRecord& r) {
  std::vector<uint8_t> bytes;
  if (!r.plan.empty() && !TacticCache::decode_plan(r.plan, &bytes)) bytes.clear();
  return bytes;
}

size_t out_elems(const ConvProblem& pb) { return static_cast<size_t>(pb.n) * pb.p * pb.q * pb.k; }

// A pool thread's cuDNN handle, on a non-blocking stream of the thread's own: on the default
// (legacy) stream, cudnn-frontend's plan warm-up creates a blocking stream and captures it, and a
// second thread doing the same (cudnnSetStream records on the legacy stream) invalidates that
// capture, so the plan does not restore (compute-sanitizer on the H100 at 2fabd44:
// cudaErrorStreamCaptureImplicit in Graph::warmup on prebuild threads).
struct PoolHandle {
  cudnnHandle_t h = nullptr;
  cudaStream_t s = nullptr;
  // False: no handle (the thread does no work).
  bool open(int device) {
    if (cudaSetDevice(device) != cudaSuccess || cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
      h = nullptr;
      return false;
    }
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess || cudnnSetStream(h, s) != CUDNN_STATUS_SUCCESS)
      return false;
    return true;
  }
  ~PoolHandle() {
    if (s) cudaStreamSynchronize(s);
    if (h) cudnnDestroy(h);
    if (s) cudaStreamDestroy(s);
  }
};

float bits_to_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

void forget_process_tactics() {
  std::lock_guard<std::mutex> lock(memo().mutex);
  memo().choices.clear();
}

bool find_process_choice(const std::string& key, std::string* choice) {
  std::lock_guard<std::mutex> lock(memo().mutex);
  auto it = memo().choices.find("choice|" + key);
  if (it == memo().choices.end()) return false;
  *choice = it->second.rec.tactic;
  return true;
}

void put_process_choice(const std::string& key, const std::string& choice) {
  std::lock_guard<std::mutex> lock(memo().mutex);
  memo().choices["choice|" + key] = MemoEntry{TacticRecord{choice, choice, 0}, nullptr};
}

std::string tactic_device_key(int device) {
  cudaDeviceProp prop{};
  YOLOCU_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0;
  YOLOCU_CUDA_CHECK(cudaDriverGetVersion(&driver));
  return detail::cat(prop.name, " | sm", prop.major, prop.minor, " x", prop.multiProcessorCount, " | driver ", driver,
                     " | cudnn ", cudnnGetVersion(), " | cudnn-frontend ", CUDNN_FRONTEND_VERSION, " | tactics 1");
}

TacticPtr make_tactic(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim,
                      const std::vector<uint8_t>* plan) {
  if (id.rfind("cudnn-graph:", 0) == 0) return make_cudnn_graph(cudnn, pb, id, lim, plan);
  if (id.rfind("cudnn:", 0) == 0) return make_cudnn_legacy(cudnn, pb, id, lim);
  if (id.rfind("own:", 0) == 0) return make_own_conv(pb, id);
  if (id.rfind("cutlass:", 0) == 0) return make_cutlass_conv(pb, id, lim);
  return nullptr;
}

Tuner::Tuner(cudnnHandle_t cudnn, const TacticLimits& limits, TacticCache* cache, int device, cudaStream_t stream)
    : cudnn_(cudnn), limits_(limits), cache_(cache), device_key_(tactic_device_key(device)), stream_(stream) {
  if (const char* q = std::getenv("YOLOCU_TUNE_QUICK"); q && std::string(q) == "1") {
    quick_ = true;
    reps_ = quick_timings_ = timings_ = 1;
  }
  set_limits(limits);
  YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking));
  YOLOCU_CUDA_CHECK(cudaEventCreate(&ev_[0]));
  YOLOCU_CUDA_CHECK(cudaEventCreate(&ev_[1]));
  YOLOCU_CUDA_CHECK(cudaMalloc(&d_acc_, sizeof(ck::CompareAcc)));
}

std::string Tuner::memo_key_of(const std::string& key) const {
  // with the cutlass family on, the candidates differ: entries of their own
  return device_key_ + "|" + key + (limits_.cutlass ? "|cutlass" : "");
}

const TacticRecord* Tuner::usable_record(const std::string& sig, int batch) const {
  const TacticRecord* r = cache_ ? cache_->find(sig, batch) : nullptr;
  // A CUTLASS choice while that family is off: the layer is tuned again without it (no warning).
  return r && !limits_.cutlass && family_of(r->tactic) == TacticFamily::kCutlass ? nullptr : r;
}

void Tuner::set_limits(const TacticLimits& limits) {
  limits_ = limits;
  if (quick_) limits_.max_graph_plans = std::min(limits_.max_graph_plans, TuneTiming::kQuickGraphPlans);
}

Tuner::~Tuner() {
  if (d_acc_) cudaFree(d_acc_);
  for (cudaEvent_t e : ev_)
    if (e) cudaEventDestroy(e);
  if (capture_) cudaStreamDestroy(capture_);
}

void Tuner::prepare(const ConvProblem& pb, const ConvBuffers& b, void* y_ref) {
  const int64_t nx = int64_t{pb.n} * pb.h * pb.w * pb.c;
  ck::fill_uniform(const_cast<void*>(b.x), pb.half, nx, 0x5eed0001u, -1.f, 1.f, stream_);
  if (pb.residual)
    ck::fill_uniform(const_cast<void*>(b.residual), pb.half, static_cast<int64_t>(out_elems(pb)), 0x5eed0002u, -1.f,
                     1.f, stream_);
  ConvBuffers r = b;
  r.y = y_ref;  // packed [n, p, q, k], whatever the problem's output pitch
  cudnn_legacy_reference(cudnn_, pb.packed())->run(cudnn_, r, stream_);
}

CheckVerdict check_verdict(const ck::CompareAcc& acc, bool half) {
  CheckVerdict c;
  c.rel_l2 = std::sqrt(acc.sq_diff) / std::max(std::sqrt(acc.sq_ref), 1e-30);
  c.max_diff = bits_to_float(acc.max_diff_bits);
  const double scale = std::max(1.0, static_cast<double>(bits_to_float(acc.max_ref_bits)));
  const double tol_l2 = half ? 2e-3 : 1e-5, tol_max = half ? 2e-2 : 1e-4;
  c.ok = acc.non_finite == 0 && c.rel_l2 <= tol_l2 && c.max_diff <= tol_max * scale;
  return c;
}

Tuner::Check Tuner::check(const ConvProblem& pb, const ConvTactic& t, const ConvBuffers& b, void* y_ref) {
  const AddElapsed elapsed{stats_.breakdown.check_ms};
  ++stats_.breakdown.checks;
  Check c;
  try {
    // NaNs in the output's pixels (only its channel slice when pitched)
    const size_t es = pb.half ? 2 : 4;
    YOLOCU_CUDA_CHECK(cudaMemset2DAsync(b.y, static_cast<size_t>(pb.y_pitch()) * es, 0xff, static_cast<size_t>(pb.k) * es,
                                        static_cast<size_t>(pb.n) * pb.p * pb.q, stream_));
    t.run(cudnn_, b, stream_);
    YOLOCU_CUDA_CHECK(cudaMemsetAsync(d_acc_, 0, sizeof(ck::CompareAcc), stream_));
    ck::compare_rows(b.y, pb.y_pitch(), y_ref, pb.k, pb.half, static_cast<int64_t>(out_elems(pb)),
                     static_cast<ck::CompareAcc*>(d_acc_), stream_);
    ck::CompareAcc acc{};
    YOLOCU_CUDA_CHECK(cudaMemcpyAsync(&acc, d_acc_, sizeof acc, cudaMemcpyDeviceToHost, stream_));
    YOLOCU_CUDA_CHECK(cudaStreamSynchronize(stream_));
    c = check_verdict(acc, pb.half);
  } catch (const Error&) {
    (void)cudaGetLastError();
    c.ok = false;
  }
  return c;
}

double Tuner::time_us(const ConvTactic& t, const ConvBuffers& b, int timings) {
  const AddElapsed elapsed{stats_.breakdown.timing_ms};
  cudaGraphExec_t exec = nullptr;
  try {
    cudaGraph_t g = nullptr;
    YOLOCU_CUDA_CHECK(cudaStreamBeginCapture(capture_, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < reps_; ++i) t.run(cudnn_, b, capture_);
    } catch (...) {
      cudaStreamEndCapture(capture_, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    YOLOCU_CUDA_CHECK(cudaStreamEndCapture(capture_, &g));
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    YOLOCU_CUDA_CHECK(e);
  } catch (const Error&) {
    (void)cudaGetLastError();
    exec = nullptr;  // time eagerly below
  }
  std::vector<double> us;
  auto launch = [&] {
    if (exec) YOLOCU_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    else
      for (int i = 0; i < reps_; ++i) t.run(cudnn_, b, stream_);
  };
  try {
    launch();  // warm-up
    for (int k = 0; k < timings; ++k) {
      YOLOCU_CUDA_CHECK(cudaEventRecord(ev_[0], stream_));
      launch();
      YOLOCU_CUDA_CHECK(cudaEventRecord(ev_[1], stream_));
      YOLOCU_CUDA_CHECK(cudaEventSynchronize(ev_[1]));
      float ms = 0;
      YOLOCU_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_[0], ev_[1]));
      us.push_back(1e3 * ms / reps_);
    }
  } catch (const Error&) {
    if (exec) cudaGraphExecDestroy(exec);
    (void)cudaGetLastError();
    cudaStreamSynchronize(stream_);
    return -1;
  }
  if (exec) cudaGraphExecDestroy(exec);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

TunedLayer Tuner::choose(const ConvProblem& pb, const ConvBuffers& b, void* y_ref) {
  const auto t0 = Clock::now();
  TuneBreakdown& bd = stats_.breakdown;
  ++stats_.layers;
  const std::string sig = pb.signature();
  const std::string memo_key = memo_key_of(sig + "|b" + std::to_string(pb.n));
  TunedLayer out;
  bool prepared = false;
  auto ensure_prepared = [&] {
    if (prepared) return;
    const auto p0 = Clock::now();
    prepare(pb, b, y_ref);
    bd.prepare_ms += ms_since(p0);  // asynchronous: the first check's synchronisation pays most of it
    prepared = true;
  };
  auto finish = [&]() -> TunedLayer {
    stats_.ms += ms_since(t0);
    bd.choose_ms = stats_.ms;
    return out;
  };
  auto serialise = [&](const ConvTactic& t) {
    const auto s0 = Clock::now();
    std::string text = plan_text(cudnn_, pb, limits_, t);
    bd.serialise_ms += ms_since(s0);
    ++bd.serialised;
    return text;
  };

  // 1: the file's choice: the object this process already checked for it, else built (in
  // parallel by prebuild(), or now) and checked. Repeated layers (same signature and batch) find
  // the memo: one check per distinct (signature, batch).
  if (const TacticRecord* r = usable_record(sig, pb.n)) {
    int& hits = r->loaded ? stats_.cache_hits : stats_.memo_hits;  // not loaded: put() earlier in this build
    if (auto t = memo_find(memo_key, &r->tactic, nullptr)) {
      out.tactic = std::move(t);
      out.us = r->us;
      out.from_cache = true;
      ++hits;
      return finish();
    }
    TacticPtr t;
    const std::vector<uint8_t> plan = plan_bytes(*r);
    if (auto it = premade_.find(sig + "|b" + std::to_string(pb.n)); it != premade_.end()) {
      if (it->second && it->second->id() == r->tactic) t = std::move(it->second);
      premade_.erase(it);
    }
    // A plan that did not restore on prebuild()'s thread (its own cuDNN handle) is tried once more
    // here on the engine's handle before the one built from the id is taken: on the H100 at
    // 27f3fa0 a warm build restored 14 of the 21 plans that had each restored when chosen. Only a
    // restore: the tactic built from the id is there already.
    if (t && !plan.empty() && !t->restored_from_plan()) {
      const auto r0 = Clock::now();
      if (TacticPtr again = restore_cudnn_graph(cudnn_, pb, r->tactic, limits_, plan)) t = std::move(again);
      bd.restore_ms += ms_since(r0);
      ++bd.restores;
    }
    if (!t) {
      const auto r0 = Clock::now();
      t = make_tactic(cudnn_, pb, r->tactic, limits_, &plan);
      bd.restore_ms += ms_since(r0);
      ++bd.restores;
    }
    if (!t) {
      warnings_.push_back(detail::cat("tactic '", r->tactic, "' from the tactic cache for ", sig, " batch ", pb.n,
                                      " no longer builds: tuning the layer"));
    } else {
      ensure_prepared();
      const Check c = check(pb, *t, b, y_ref);
      if (c.ok) {
        if (t->restored_from_plan()) ++stats_.plans_restored;
        out.tactic = std::shared_ptr<const ConvTactic>(std::move(t));
        out.us = r->us;
        out.from_cache = true;
        ++hits;
        TacticRecord rec = *r;
        if (!out.tactic->restored_from_plan() && family_of(r->tactic) == TacticFamily::kCudnnGraph) {
          // No plan in the entry (written before plans were kept), or one that no longer loads:
          // store the plan built now, so that the next build restores it.
          std::string text = serialise(*out.tactic);
          if (!text.empty() && text != rec.plan) {
            rec.plan = std::move(text);
            cache_->put(sig, pb.n, rec);
          }
        }
        memo_put(memo_key, rec, out.tactic);
        return finish();
      }
      warnings_.push_back(detail::cat("tactic '", r->tactic, "' from the tactic cache for ", sig, " batch ", pb.n,
                                      " fails the check (rel L2 ", c.rel_l2, ", max |d| ", c.max_diff,
                                      "): tuning the layer"));
    }
  }
  // 2: this process's choice (already checked).
  {
    TacticRecord rec;
    if (auto t = memo_find(memo_key, nullptr, &rec)) {
      out.tactic = std::move(t);
      out.us = rec.us;
      out.from_cache = true;
      ++stats_.memo_hits;
      if (cache_) cache_->put(sig, pb.n, rec);
      return finish();
    }
  }

  // 3: tune. Candidates in a fixed order: cuDNN graph configs in heuristic order, legacy cuDNN
  // algorithms, own kernels, CUTLASS (prebuilt ones first built on the pool, else here).
  ensure_prepared();
  const std::string key = sig + "|b" + std::to_string(pb.n);
  std::vector<TacticPtr> cands;
  if (auto it = prebuilt_.find(key); it != prebuilt_.end()) {
    cands = std::move(it->second);
    prebuilt_.erase(it);
  } else {
    for (const std::string& id : cudnn_graph_configs(cudnn_, pb, limits_)) {
      if (static_cast<int>(cands.size()) >= limits_.max_graph_plans) break;
      const auto b0 = Clock::now();
      TacticPtr t = make_cudnn_graph(cudnn_, pb, id, limits_);
      bd.add_build(id, ms_since(b0), t != nullptr);
      if (t) cands.push_back(std::move(t));
    }
  }
  std::vector<TacticPtr> legacy;
  if (auto it = prelegacy_.find(key); it != prelegacy_.end()) {
    legacy = std::move(it->second);
    prelegacy_.erase(it);
  } else {
    const auto b0 = Clock::now();
    legacy = cudnn_legacy_candidates(cudnn_, pb, limits_);
    bd.add_builds(TacticFamily::kCudnnLegacy, ms_since(b0), static_cast<int>(legacy.size()));
  }
  for (TacticPtr& t : legacy) cands.push_back(std::move(t));
  {
    const auto b0 = Clock::now();
    std::vector<TacticPtr> own = own_conv_candidates(pb);
    bd.add_builds(TacticFamily::kOwn, ms_since(b0), static_cast<int>(own.size()));
    for (TacticPtr& t : own) cands.push_back(std::move(t));
  }
  {
    const auto b0 = Clock::now();
    std::vector<TacticPtr> cutlass = cutlass_conv_candidates(pb, limits_);
    bd.add_builds(TacticFamily::kCutlass, ms_since(b0), static_cast<int>(cutlass.size()));
    for (TacticPtr& t : cutlass) cands.push_back(std::move(t));
  }

  // Check, then the brief sweep of every candidate that passed, then the full sweep of those
  // within TuneTiming::kRetimeMargin of the best brief time (tune_select.hpp).
  std::vector<TacticPtr> passed;
  std::vector<double> brief;
  std::vector<int> place;  // per passed candidate: its index in cands (graph plans first, in list order)
  for (TacticPtr& t : cands) {
    ++out.candidates;
    const Check c = check(pb, *t, b, y_ref);
    if (!c.ok) {
      ++out.rejected;
      continue;
    }
    const double us = time_us(*t, b, quick_timings_);
    ++bd.quick_timings;
    if (us < 0) {
      ++out.rejected;
      continue;
    }
    place.push_back(static_cast<int>(&t - cands.data()));
    passed.push_back(std::move(t));
    brief.push_back(us);
  }
  {
    std::vector<int> graph_place(passed.size(), -1);  // graph plans come first in cands, in list order
    for (size_t i = 0; i < passed.size(); ++i)
      if (family_of(passed[i]->id()) == TacticFamily::kCudnnGraph) graph_place[i] = place[i];
    bd.add_cap_costs(brief, graph_place);
  }
  const std::vector<size_t> finalists = retime_set(brief, TuneTiming::kRetimeMargin);
  int winner = -1;
  double best = -1;
  if (!finalists.empty()) {
    std::vector<double> full(finalists.size(), -1.0);
    if (finalists.size() > 1 && !quick_) {
      for (size_t j = 0; j < finalists.size(); ++j) {
        full[j] = time_us(*passed[finalists[j]], b, timings_);
        ++bd.full_timings;
      }
    }
    const int f = pick_fastest(full);
    if (f >= 0) {
      winner = static_cast<int>(finalists[static_cast<size_t>(f)]);
      best = full[static_cast<size_t>(f)];
    } else {  // one finalist, quick mode, or every full timing failed: the brief sweep decides
      winner = pick_fastest(brief);
      best = brief[static_cast<size_t>(winner)];
    }
  }
  stats_.candidates += out.candidates;
  stats_.rejected += out.rejected;
  ++stats_.tuned;
  YOLOCU_CHECK(winner >= 0, kUnsupported, "conv ", sig, " batch ", pb.n, ": none of ", out.candidates,
               " candidate tactics passed the check");
  out.tactic = std::move(passed[static_cast<size_t>(winner)]);
  bd.add_win(out.tactic->id(), place[static_cast<size_t>(winner)]);
  out.us = best;
  TacticRecord chosen{out.tactic->id(), out.tactic->name(), best};
  if (family_of(chosen.tactic) == TacticFamily::kCudnnGraph) chosen.plan = serialise(*out.tactic);
  if (cache_) cache_->put(sig, pb.n, chosen);
  memo_put(memo_key, chosen, out.tactic);
  return finish();
}

void Tuner::prebuild(const std::vector<ConvProblem>& problems, int device, int threads) {
  const auto wall0 = Clock::now();
  // One job per distinct problem: either the cached tactic to re-create (id set), or (cold) the
  // list of cuDNN graph configs to query, each config to build, and the legacy candidates.
  struct Job {
    const ConvProblem* pb = nullptr;
    std::string key, id;
    std::vector<uint8_t> plan;  // the cached tactic's serialised plan, if any
    // Progress (under the pool's mutex).
    bool taken = false;          // the restore (warm) or the heuristics query (cold) is under way or done
    bool listed = false;         // cold: configs is known
    bool list_failed = false;    // the query threw: choose() queries again
    bool legacy_taken = false;
    std::vector<std::string> configs;
    std::vector<TacticPtr> built;  // per config index; null: not tried or did not build
    size_t next = 0;               // next config to build
    int ok = 0, in_flight = 0;     // configs built, builds under way
    // Results.
    TacticPtr made;
    std::vector<TacticPtr> legacy;
    bool legacy_done = false;
  };
  std::vector<Job> jobs;
  std::vector<std::string> seen;
  for (const ConvProblem& pb : problems) {
    const std::string sig = pb.signature(), key = sig + "|b" + std::to_string(pb.n);
    if (std::find(seen.begin(), seen.end(), key) != seen.end() || prebuilt_.count(key) || premade_.count(key)) continue;
    seen.push_back(key);
    Job j;
    if (const TacticRecord* r = usable_record(sig, pb.n)) {
      if (memo_find(memo_key_of(key), &r->tactic, nullptr)) continue;
      j.id = r->tactic;
      j.plan = plan_bytes(*r);
    } else if (memo_find(memo_key_of(key), nullptr, nullptr)) {
      continue;
    }
    j.pb = &pb;
    j.key = key;
    jobs.push_back(std::move(j));
  }
  if (jobs.empty()) return;

  const int max_plans = limits_.max_graph_plans;
  std::mutex mutex;
  std::condition_variable cv;
  int busy = 0;  // items under way (their results may add work)
  // The next item, under the mutex: restores, heuristics queries and legacy builds first (cheap,
  // and a query opens its configs), then config builds in job order. A job's config i is handed
  // out only while its built + under way < max_plans, so the configs tried are always a prefix of
  // its list and the kept ones are the first max_plans that build, whatever the threads' timing.
  enum class Kind { kNone, kRestore, kList, kLegacy, kBuild };
  struct Item {
    Kind kind = Kind::kNone;
    size_t job = 0, config = 0;
  };
  auto next_item = [&]() -> Item {
    for (size_t i = 0; i < jobs.size(); ++i) {
      Job& j = jobs[i];
      if (!j.taken) {
        j.taken = true;
        return {j.id.empty() ? Kind::kList : Kind::kRestore, i, 0};
      }
      if (j.id.empty() && !j.legacy_taken) {
        j.legacy_taken = true;
        return {Kind::kLegacy, i, 0};
      }
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      Job& j = jobs[i];
      if (j.listed && j.next < j.configs.size() && j.ok + j.in_flight < max_plans) {
        ++j.in_flight;
        return {Kind::kBuild, i, j.next++};
      }
    }
    return {};
  };
  TuneBreakdown pool_bd;
  auto worker = [&] {
    TuneBreakdown bd;
    const auto h0 = Clock::now();
    PoolHandle ph;
    if (!ph.open(device)) return;
    const cudnnHandle_t h = ph.h;
    bd.handles_ms += ms_since(h0);
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      const Item it = next_item();
      if (it.kind == Kind::kNone) {
        if (busy == 0) break;
        cv.wait(lock);
        continue;
      }
      ++busy;
      Job& j = jobs[it.job];
      lock.unlock();
      const auto t0 = Clock::now();
      TacticPtr one;
      std::vector<TacticPtr> many;
      std::vector<std::string> configs;
      bool threw = false;
      try {
        switch (it.kind) {
          case Kind::kRestore: one = make_tactic(h, *j.pb, j.id, limits_, &j.plan); break;
          case Kind::kList: configs = cudnn_graph_configs(h, *j.pb, limits_); break;
          case Kind::kLegacy: many = cudnn_legacy_candidates(h, *j.pb, limits_); break;
          case Kind::kBuild: one = make_cudnn_graph(h, *j.pb, j.configs[it.config], limits_); break;
          case Kind::kNone: break;
        }
      } catch (const std::exception&) {
        // choose() builds what is missing again (and reports what fails)
        threw = true;
        one.reset();
        many.clear();
        configs.clear();
      }
      const double ms = ms_since(t0);
      lock.lock();
      switch (it.kind) {
        case Kind::kRestore:
          bd.restore_ms += ms;
          ++bd.restores;
          j.made = std::move(one);
          break;
        case Kind::kList:
          bd.list_ms += ms;
          ++bd.lists;
          j.configs = std::move(configs);
          j.built.resize(j.configs.size());
          j.listed = true;
          j.list_failed = threw;
          break;
        case Kind::kLegacy:
          bd.add_builds(TacticFamily::kCudnnLegacy, ms, static_cast<int>(many.size()));
          j.legacy = std::move(many);
          j.legacy_done = !threw;
          break;
        case Kind::kBuild:
          bd.add_build(j.configs[it.config], ms, one != nullptr);
          --j.in_flight;
          if (one) ++j.ok;
          j.built[it.config] = std::move(one);
          break;
        case Kind::kNone: break;
      }
      --busy;
      cv.notify_all();
    }
    pool_bd.merge(bd);  // under the mutex
  };
  // No more threads (each creates a cuDNN handle) than items that can run at once.
  size_t items = 0;
  for (const Job& j : jobs) items += j.id.empty() ? static_cast<size_t>(std::max(1, max_plans)) + 1 : 1;
  const int n = static_cast<int>(std::min(static_cast<size_t>(std::max(1, threads)), std::max<size_t>(1, items)));
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (Job& j : jobs) {
    if (!j.id.empty()) {
      if (j.made) premade_[j.key] = std::move(j.made);
      continue;
    }
    // Every listed config tried (or max_plans built): complete, in list order. A job the pool
    // never finished (no thread got a cuDNN handle) is left to choose().
    if (j.listed && !j.list_failed && (j.next == j.configs.size() || j.ok >= max_plans)) {
      std::vector<TacticPtr>& c = prebuilt_[j.key];
      for (TacticPtr& t : j.built)
        if (t) c.push_back(std::move(t));
    }
    if (j.legacy_done) prelegacy_[j.key] = std::move(j.legacy);
  }
  pool_bd.prebuild_wall_ms = ms_since(wall0);
  pool_bd.prebuild_threads = n;
  stats_.breakdown.merge(pool_bd);
}

std::shared_ptr<const ConvTactic> Tuner::derive(const ConvProblem& pb, const std::string& id) {
  if (TacticPtr t = make_tactic(cudnn_, pb, id, limits_)) return t;
  TacticLimits one = limits_;
  one.max_graph_plans = 1;
  auto g = cudnn_graph_candidates(cudnn_, pb, one);
  if (!g.empty()) return std::move(g.front());
  return cudnn_legacy_reference(cudnn_, pb);
}

std::vector<std::shared_ptr<const ConvTactic>> Tuner::derive_many(const std::vector<ConvProblem>& problems,
                                                                  const std::vector<std::string>& ids, int device,
                                                                  int threads) {
  YOLOCU_CHECK(problems.size() == ids.size(), kInternal, "derive_many: ", problems.size(), " problems, ", ids.size(), " ids");
  // One job per distinct (problem, tactic): layers of the same shape share the built tactic, and so
  // do the engines of this process (the memo: each execution context's engine derives the same sizes).
  struct Job {
    size_t first = 0;               // its first layer
    std::string sig, memo_key;
    std::vector<uint8_t> plan;      // the cache file's derived plan of this tactic, if any
    std::shared_ptr<const ConvTactic> built;  // (from the memo: before the pool runs)
    std::string text;               // its plan serialised for the file (built here, or the memo's)
  };
  std::vector<Job> jobs;
  std::vector<size_t> job_of(problems.size());
  for (size_t i = 0; i < problems.size(); ++i) {
    Job j;
    j.sig = problems[i].signature();
    j.memo_key = memo_key_of("derived|" + j.sig + "|b" + std::to_string(problems[i].n) + "|" + ids[i]);
    const auto same = std::find_if(jobs.begin(), jobs.end(), [&](const Job& o) { return o.memo_key == j.memo_key; });
    job_of[i] = static_cast<size_t>(same - jobs.begin());
    if (same != jobs.end()) continue;
    j.first = i;
    TacticRecord memo_rec;
    j.built = memo_find(j.memo_key, nullptr, &memo_rec);
    const TacticRecord* r = cache_ ? cache_->find_derived(j.sig, problems[i].n) : nullptr;
    if (r && r->tactic != ids[i]) r = nullptr;
    if (j.built) {
      // Derived by another engine of this process: its plan goes into this engine's cache too
      // (each engine saves its own entries: one without them would drop the other's from the file).
      if (cache_ && !r && !memo_rec.plan.empty())
        cache_->put_derived(j.sig, problems[i].n, {memo_rec.tactic, memo_rec.name, 0, memo_rec.plan});
    } else if (r) {
      j.plan = plan_bytes(*r);
    }
    jobs.push_back(std::move(j));
  }
  std::vector<Job*> todo;
  for (Job& j : jobs)
    if (!j.built) todo.push_back(&j);
  std::mutex mutex;
  size_t next = 0;
  auto worker = [&] {
    PoolHandle ph;
    if (!ph.open(device)) return;
    for (;;) {
      Job* j;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (next == todo.size()) return;
        j = todo[next++];
      }
      const ConvProblem& pb = problems[j->first];
      try {
        j->built = make_tactic(ph.h, pb, ids[j->first], limits_, j->plan.empty() ? nullptr : &j->plan);
      } catch (const std::exception&) {
        j->built.reset();  // derived below, on the engine's handle (which reports what fails)
      }
    }
  };
  const int n = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(1, threads)), todo.size()));
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (Job* j : todo) {
    const ConvProblem& pb = problems[j->first];
    if (!j->built) j->built = derive(pb, ids[j->first]);
    if (j->built->restored_from_plan()) ++stats_.derived_restored;
    // The plan of a graph tactic built here, serialised and test-restored on the engine's handle as
    // the tuned layers' plans are (a pool thread's handle restored none of them: H100 at 43cb69b,
    // CudaEngine.TacticCacheOnDisk found no derived plan in the file).
    if (cache_ && !j->built->restored_from_plan() && family_of(j->built->id()) == TacticFamily::kCudnnGraph) {
      j->text = plan_text(cudnn_, pb, limits_, *j->built);
      if (!j->text.empty()) cache_->put_derived(j->sig, pb.n, {j->built->id(), j->built->name(), 0, j->text});
    }
    memo_put(j->memo_key, {j->built->id(), j->built->name(), 0, j->text}, j->built);
  }
  std::vector<std::shared_ptr<const ConvTactic>> out(problems.size());
  for (size_t i = 0; i < problems.size(); ++i) out[i] = jobs[job_of[i]].built;
  return out;
}

}  // namespace yolocu::engine

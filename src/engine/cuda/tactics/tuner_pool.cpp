// Tuner, host-thread half: prebuild() (the plans choose() will need, built on a pool of threads)
// and derive() / derive_many() (tactics for batch sizes that were not tuned). See tuner.hpp.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "core/cuda_check.hpp"
#include "engine/cuda/tactics/tuner.hpp"
#include "engine/cuda/tactics/tuner_internal.hpp"

namespace yolocu::engine {
namespace {

using namespace tuner_internal;

// A pool thread's cuDNN handle, on a non-blocking stream of the thread's own: on the default
// (legacy) stream, cudnn-frontend's plan warm-up creates a blocking stream and captures it, and a
// second thread doing the same (cudnnSetStream records on the legacy stream) invalidates that
// capture, so the plan does not restore (compute-sanitizer reported cudaErrorStreamCaptureImplicit
// in Graph::warmup on prebuild threads).
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

// One prebuild() job per distinct problem: either the cached tactic to re-create (id set), or (cold)
// the list of cuDNN graph configs to query, each config to build, and the legacy candidates.
struct PrebuildJob {
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

// prebuild()'s threads, each with its own cuDNN handle, taking work items from the jobs until none
// is left and none is under way (an item's result may add work: a query opens its configs).
class PrebuildPool {
 public:
  PrebuildPool(std::vector<PrebuildJob>& jobs, const TacticLimits& limits, int device)
      : jobs_(jobs), limits_(limits), device_(device), max_plans_(limits.max_graph_plans) {}

  // Runs the pool on at most `threads` threads; returns the number of threads started.
  int run(int threads) {
    // No more threads (each creates a cuDNN handle) than items that can run at once.
    size_t items = 0;
    for (const PrebuildJob& j : jobs_) items += j.id.empty() ? static_cast<size_t>(std::max(1, max_plans_)) + 1 : 1;
    const int n = static_cast<int>(std::min(static_cast<size_t>(std::max(1, threads)), std::max<size_t>(1, items)));
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t) pool.emplace_back([this] { worker(); });
    for (auto& t : pool) t.join();
    return n;
  }
  const TuneBreakdown& breakdown() const { return breakdown_; }

 private:
  enum class Kind { kNone, kRestore, kList, kLegacy, kBuild };
  struct Item {
    Kind kind = Kind::kNone;
    size_t job = 0, config = 0;
  };
  struct Result {
    TacticPtr one;
    std::vector<TacticPtr> many;
    std::vector<std::string> configs;
    bool threw = false;
  };

  Item next_item();
  Result work(cudnnHandle_t h, const Item& it);
  void record(const Item& it, Result r, double ms, TuneBreakdown& bd);
  void worker();

  std::vector<PrebuildJob>& jobs_;
  const TacticLimits& limits_;
  int device_;
  int max_plans_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int busy_ = 0;  // items under way (their results may add work)
  TuneBreakdown breakdown_;
};

// The next item, under the mutex: restores, heuristics queries and legacy builds first (cheap, and a
// query opens its configs), then config builds in job order. A job's config i is handed out only
// while its built + under way < max_plans, so the configs tried are always a prefix of its list and
// the kept ones are the first max_plans that build, whatever the threads' timing.
PrebuildPool::Item PrebuildPool::next_item() {
  for (size_t i = 0; i < jobs_.size(); ++i) {
    PrebuildJob& j = jobs_[i];
    if (!j.taken) {
      j.taken = true;
      return {j.id.empty() ? Kind::kList : Kind::kRestore, i, 0};
    }
    if (j.id.empty() && !j.legacy_taken) {
      j.legacy_taken = true;
      return {Kind::kLegacy, i, 0};
    }
  }
  for (size_t i = 0; i < jobs_.size(); ++i) {
    PrebuildJob& j = jobs_[i];
    if (j.listed && j.next < j.configs.size() && j.ok + j.in_flight < max_plans_) {
      ++j.in_flight;
      return {Kind::kBuild, i, j.next++};
    }
  }
  return {};
}

// One item, outside the mutex.
PrebuildPool::Result PrebuildPool::work(cudnnHandle_t h, const Item& it) {
  const PrebuildJob& j = jobs_[it.job];
  Result r;
  try {
    switch (it.kind) {
      case Kind::kRestore: r.one = make_tactic(h, *j.pb, j.id, limits_, &j.plan); break;
      case Kind::kList: r.configs = cudnn_graph_configs(h, *j.pb, limits_); break;
      case Kind::kLegacy: r.many = cudnn_legacy_candidates(h, *j.pb, limits_); break;
      case Kind::kBuild: r.one = make_cudnn_graph(h, *j.pb, j.configs[it.config], limits_); break;
      case Kind::kNone: break;
    }
  } catch (const std::exception&) {
    // choose() builds what is missing again (and reports what fails)
    r = Result{};
    r.threw = true;
  }
  return r;
}

// An item's result into its job, under the mutex.
void PrebuildPool::record(const Item& it, Result r, double ms, TuneBreakdown& bd) {
  PrebuildJob& j = jobs_[it.job];
  switch (it.kind) {
    case Kind::kRestore:
      bd.restore_ms += ms;
      ++bd.restores;
      j.made = std::move(r.one);
      break;
    case Kind::kList:
      bd.list_ms += ms;
      ++bd.lists;
      j.configs = std::move(r.configs);
      j.built.resize(j.configs.size());
      j.listed = true;
      j.list_failed = r.threw;
      break;
    case Kind::kLegacy:
      bd.add_builds(TacticFamily::kCudnnLegacy, ms, static_cast<int>(r.many.size()));
      j.legacy = std::move(r.many);
      j.legacy_done = !r.threw;
      break;
    case Kind::kBuild:
      bd.add_build(j.configs[it.config], ms, r.one != nullptr);
      --j.in_flight;
      if (r.one) ++j.ok;
      j.built[it.config] = std::move(r.one);
      break;
    case Kind::kNone: break;
  }
}

void PrebuildPool::worker() {
  TuneBreakdown bd;
  const auto h0 = Clock::now();
  PoolHandle ph;
  if (!ph.open(device_)) return;
  bd.handles_ms += ms_since(h0);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    const Item it = next_item();
    if (it.kind == Kind::kNone) {
      if (busy_ == 0) break;
      cv_.wait(lock);
      continue;
    }
    ++busy_;
    lock.unlock();
    const auto t0 = Clock::now();
    Result r = work(ph.h, it);
    const double ms = ms_since(t0);
    lock.lock();
    record(it, std::move(r), ms, bd);
    --busy_;
    cv_.notify_all();
  }
  breakdown_.merge(bd);  // under the mutex
}

}  // namespace

void Tuner::prebuild(const std::vector<ConvProblem>& problems, int device, int threads) {
  const auto wall0 = Clock::now();
  // A layer with pitched inputs that will be tuned (no choice in the file or this process) also has
  // the same layer on packed inputs chosen first (Tuner::tune).
  std::vector<ConvProblem> all(problems);
  for (const ConvProblem& pb : problems) {
    const std::string key = pb.signature() + "|b" + std::to_string(pb.n);
    if (!pb.inputs_packed() && !usable_record(pb.signature(), pb.n) && !memo_find(memo_key_of(key), nullptr, nullptr))
      all.push_back(pb.packed_inputs());
  }
  std::vector<PrebuildJob> jobs;
  std::vector<std::string> seen;
  for (const ConvProblem& pb : all) {
    const std::string sig = pb.signature(), key = sig + "|b" + std::to_string(pb.n);
    if (std::find(seen.begin(), seen.end(), key) != seen.end() || prebuilt_.count(key) || premade_.count(key)) continue;
    seen.push_back(key);
    PrebuildJob j;
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

  PrebuildPool pool(jobs, limits_, device);
  const int n = pool.run(threads);
  const int max_plans = limits_.max_graph_plans;
  for (PrebuildJob& j : jobs) {
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
  TuneBreakdown pool_bd = pool.breakdown();
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
  if (!pb.inputs_packed())
    if (TacticPtr t = make_packin(cudnn_, pb, "packin:cudnn:IMPLICIT_GEMM", limits_)) return t;
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
  const auto pool0 = std::chrono::steady_clock::now();
  const int n = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(1, threads)), todo.size()));
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  const auto finish0 = std::chrono::steady_clock::now();
  stats_.derive_pool_ms += std::chrono::duration<double, std::milli>(finish0 - pool0).count();
  for (Job* j : todo) {
    const ConvProblem& pb = problems[j->first];
    if (!j->built) j->built = derive(pb, ids[j->first]);
    if (j->built->restored_from_plan()) ++stats_.derived_restored;
    else if (j->built->compiled_at_runtime()) ++stats_.derived_compiled;
    // The plan of a graph tactic built here, serialised and test-restored on the engine's handle as
    // the tuned layers' plans are (a pool thread's handle restored none of them:
    // CudaEngine.TacticCacheOnDisk found no derived plan in the file).
    if (cache_ && !j->built->restored_from_plan() && family_of(j->built->id()) == TacticFamily::kCudnnGraph) {
      j->text = plan_text(cudnn_, pb, limits_, *j->built);
      if (!j->text.empty()) cache_->put_derived(j->sig, pb.n, {j->built->id(), j->built->name(), 0, j->text});
    }
    memo_put(j->memo_key, {j->built->id(), j->built->name(), 0, j->text}, j->built);
  }
  stats_.derive_finish_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - finish0).count();
  std::vector<std::shared_ptr<const ConvTactic>> out(problems.size());
  for (size_t i = 0; i < problems.size(); ++i) out[i] = jobs[job_of[i]].built;
  return out;
}

}  // namespace yolocu::engine

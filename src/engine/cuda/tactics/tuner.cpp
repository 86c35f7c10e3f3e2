// Tuner: memo / disk cache / check + timing of every candidate (see tuner.hpp).
#include "engine/cuda/tactics/tuner.hpp"

#include <cudnn_frontend_version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
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
// restores every plan the file carries.
std::string plan_text(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim, const ConvTactic& t) {
  std::vector<uint8_t> bytes;
  try {
    if (!t.serialize_plan(&bytes) || bytes.empty() || bytes.size() > TacticCache::kMaxPlanBytes) return "";
    const TacticPtr back = make_tactic(cudnn, pb, t.id(), lim, &bytes);
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
  return nullptr;
}

Tuner::Tuner(cudnnHandle_t cudnn, const TacticLimits& limits, TacticCache* cache, int device, cudaStream_t stream)
    : cudnn_(cudnn), limits_(limits), cache_(cache), device_key_(tactic_device_key(device)), stream_(stream) {
  if (const char* q = std::getenv("YOLOCU_TUNE_QUICK"); q && std::string(q) == "1") {
    quick_ = true;
    reps_ = timings_ = 1;
  }
  set_limits(limits);
  YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking));
  YOLOCU_CUDA_CHECK(cudaEventCreate(&ev_[0]));
  YOLOCU_CUDA_CHECK(cudaEventCreate(&ev_[1]));
  YOLOCU_CUDA_CHECK(cudaMalloc(&d_acc_, sizeof(ck::CompareAcc)));
}

void Tuner::set_limits(const TacticLimits& limits) {
  limits_ = limits;
  if (quick_) limits_.max_graph_plans = std::min(limits_.max_graph_plans, kQuickGraphPlans);
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
  r.y = y_ref;
  cudnn_legacy_reference(cudnn_, pb)->run(cudnn_, r, stream_);
}

Tuner::Check Tuner::check(const ConvProblem& pb, const ConvTactic& t, const ConvBuffers& b, void* y_ref) {
  Check c;
  try {
    YOLOCU_CUDA_CHECK(cudaMemsetAsync(b.y, 0xff, out_elems(pb) * (pb.half ? 2 : 4), stream_));  // NaNs
    t.run(cudnn_, b, stream_);
    YOLOCU_CUDA_CHECK(cudaMemsetAsync(d_acc_, 0, sizeof(ck::CompareAcc), stream_));
    ck::compare(b.y, y_ref, pb.half, static_cast<int64_t>(out_elems(pb)), static_cast<ck::CompareAcc*>(d_acc_),
                stream_);
    ck::CompareAcc acc{};
    YOLOCU_CUDA_CHECK(cudaMemcpyAsync(&acc, d_acc_, sizeof acc, cudaMemcpyDeviceToHost, stream_));
    YOLOCU_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const double ref = std::sqrt(acc.sq_ref);
    c.rel_l2 = std::sqrt(acc.sq_diff) / std::max(ref, 1e-30);
    c.max_diff = bits_to_float(acc.max_diff_bits);
    const double scale = std::max(1.0, static_cast<double>(bits_to_float(acc.max_ref_bits)));
    const double tol_l2 = pb.half ? 2e-3 : 1e-5, tol_max = pb.half ? 2e-2 : 1e-4;
    c.ok = acc.non_finite == 0 && c.rel_l2 <= tol_l2 && c.max_diff <= tol_max * scale;
  } catch (const Error&) {
    (void)cudaGetLastError();
    c.ok = false;
  }
  return c;
}

double Tuner::time_us(const ConvTactic& t, const ConvBuffers& b) {
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
    for (int k = 0; k < timings_; ++k) {
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
  const auto t0 = std::chrono::steady_clock::now();
  ++stats_.layers;
  const std::string sig = pb.signature();
  const std::string memo_key = device_key_ + "|" + sig + "|b" + std::to_string(pb.n);
  TunedLayer out;
  bool prepared = false;
  auto ensure_prepared = [&] {
    if (!prepared) prepare(pb, b, y_ref);
    prepared = true;
  };
  auto finish = [&]() -> TunedLayer {
    stats_.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
  };

  // 1: the file's choice: the object this process already checked for it, else built (in
  // parallel by prebuild(), or now) and checked.
  if (const TacticRecord* r = cache_ ? cache_->find(sig, pb.n) : nullptr) {
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
    // 27f3fa0 a warm build restored 14 of the 21 plans that had each restored when chosen.
    if (t && !plan.empty() && !t->restored_from_plan()) {
      if (TacticPtr again = make_tactic(cudnn_, pb, r->tactic, limits_, &plan); again && again->restored_from_plan())
        t = std::move(again);
    }
    if (!t) t = make_tactic(cudnn_, pb, r->tactic, limits_, &plan);
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
        if (!out.tactic->restored_from_plan()) {
          // No plan in the entry (written before plans were kept), or one that no longer loads:
          // store the plan built now, so that the next build restores it.
          std::string text = plan_text(cudnn_, pb, limits_, *out.tactic);
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

  // 3: tune.
  ensure_prepared();
  std::vector<TacticPtr> cands;
  if (auto it = prebuilt_.find(sig + "|b" + std::to_string(pb.n)); it != prebuilt_.end()) {
    cands = std::move(it->second);
    prebuilt_.erase(it);
  } else {
    cands = cudnn_graph_candidates(cudnn_, pb, limits_);
  }
  for (TacticPtr& t : cudnn_legacy_candidates(cudnn_, pb, limits_)) cands.push_back(std::move(t));
  for (TacticPtr& t : own_conv_candidates(pb)) cands.push_back(std::move(t));
  double best = -1;
  for (TacticPtr& t : cands) {
    ++out.candidates;
    const Check c = check(pb, *t, b, y_ref);
    if (!c.ok) {
      ++out.rejected;
      continue;
    }
    const double us = time_us(*t, b);
    if (us < 0) {
      ++out.rejected;
      continue;
    }
    if (best < 0 || us < best) {
      best = us;
      out.tactic = std::move(t);
    }
  }
  stats_.candidates += out.candidates;
  stats_.rejected += out.rejected;
  ++stats_.tuned;
  YOLOCU_CHECK(out.tactic, kUnsupported, "conv ", sig, " batch ", pb.n, ": none of ", out.candidates,
               " candidate tactics passed the check");
  out.us = best;
  TacticRecord chosen{out.tactic->id(), out.tactic->name(), best};
  chosen.plan = plan_text(cudnn_, pb, limits_, *out.tactic);
  if (cache_) cache_->put(sig, pb.n, chosen);
  memo_put(memo_key, chosen, out.tactic);
  return finish();
}

void Tuner::prebuild(const std::vector<ConvProblem>& problems, int device, int threads) {
  // Per problem: either the cached tactic to re-create (ids[i] set) or the candidates to build.
  std::vector<const ConvProblem*> todo;
  std::vector<std::string> keys, ids;
  std::vector<std::vector<uint8_t>> plans;  // the cached tactic's serialised plan, if any
  for (const ConvProblem& pb : problems) {
    const std::string sig = pb.signature(), key = sig + "|b" + std::to_string(pb.n);
    if (std::find(keys.begin(), keys.end(), key) != keys.end() || prebuilt_.count(key) || premade_.count(key)) continue;
    std::string id;
    std::vector<uint8_t> plan;
    if (const TacticRecord* r = cache_ ? cache_->find(sig, pb.n) : nullptr) {
      if (memo_find(device_key_ + "|" + key, &r->tactic, nullptr)) continue;
      id = r->tactic;
      plan = plan_bytes(*r);
    } else if (memo_find(device_key_ + "|" + key, nullptr, nullptr)) {
      continue;
    }
    todo.push_back(&pb);
    keys.push_back(key);
    ids.push_back(id);
    plans.push_back(std::move(plan));
  }
  if (todo.empty()) return;
  std::vector<std::vector<TacticPtr>> built(todo.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    if (cudaSetDevice(device) != cudaSuccess) return;
    cudnnHandle_t h = nullptr;
    if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) return;
    // A non-blocking stream of this thread's own for the handle: on the default (legacy) stream,
    // cudnn-frontend's plan warm-up creates a blocking stream and captures it, and a second thread
    // doing the same (cudnnSetStream records on the legacy stream) invalidates that capture, so the
    // plan does not restore (compute-sanitizer on the H100 at 2fabd44: cudaErrorStreamCaptureImplicit
    // in Graph::warmup on prebuild threads).
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess || cudnnSetStream(h, s) != CUDNN_STATUS_SUCCESS) {
      if (s) cudaStreamDestroy(s);
      cudnnDestroy(h);
      return;
    }
    for (size_t i = next++; i < todo.size(); i = next++) {
      try {
        if (!ids[i].empty()) {
          if (TacticPtr t = make_tactic(h, *todo[i], ids[i], limits_, &plans[i])) built[i].push_back(std::move(t));
        } else {
          built[i] = cudnn_graph_candidates(h, *todo[i], limits_);
        }
      } catch (const std::exception&) {
        built[i].clear();  // choose() builds them again (and reports what fails)
      }
    }
    cudaStreamSynchronize(s);
    cudnnDestroy(h);
    cudaStreamDestroy(s);
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(todo.size())));
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < todo.size(); ++i) {
    if (built[i].empty()) continue;
    if (!ids[i].empty()) premade_[keys[i]] = std::move(built[i].front());
    else prebuilt_[keys[i]] = std::move(built[i]);
  }
}

std::shared_ptr<const ConvTactic> Tuner::derive(const ConvProblem& pb, const std::string& id) {
  if (TacticPtr t = make_tactic(cudnn_, pb, id, limits_)) return t;
  TacticLimits one = limits_;
  one.max_graph_plans = 1;
  auto g = cudnn_graph_candidates(cudnn_, pb, one);
  if (!g.empty()) return std::move(g.front());
  return cudnn_legacy_reference(cudnn_, pb);
}

}  // namespace yolocu::engine

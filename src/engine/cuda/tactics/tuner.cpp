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
#include "engine/cuda/tactics/replay_timing.hpp"
#include "engine/cuda/tactics/tuner_internal.hpp"

namespace yolocu::engine {
namespace tuner_internal {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

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
// of its runtime-compiled ones (about three in four stored plans restore), so each
// plan is restored once here, when it is chosen, and kept only if that works. A warm build then
// restores every plan the file carries. Only restored: a plan that does not restore is not built
// again from its id (that was a second compilation, on the engine's thread, of every chosen plan
// of an engine that cuDNN does not deserialise).
std::string plan_text(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim, const ConvTactic& t) {
  std::vector<uint8_t> bytes;
  try {
    if (!t.serialize_plan(&bytes) || bytes.empty() || bytes.size() > TacticCache::kMaxPlanBytes) return "";
    const TacticPtr back = restore_tactic(cudnn, pb, t.id(), lim, bytes);
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

}  // namespace tuner_internal

namespace {

namespace ck = cuda_kernels;
using namespace tuner_internal;
// Adds the time from construction to destruction to `ms`: on every way out, exceptions included.
struct AddElapsed {
  double& ms;
  Clock::time_point t0 = Clock::now();
  ~AddElapsed() { ms += ms_since(t0); }
};

size_t out_elems(const ConvProblem& pb) { return static_cast<size_t>(pb.n) * pb.p * pb.q * pb.k; }

// Device scratch ordered on one stream: allocated there, freed there when it goes out of scope
// (after the work enqueued before), on every way out.
struct StreamScratch {
  void* p = nullptr;
  cudaStream_t s;
  StreamScratch(size_t bytes, cudaStream_t stream) : s(stream) {
    YOLOCU_CUDA_CHECK(cudaMallocAsync(&p, std::max<size_t>(bytes, 256), s));
  }
  ~StreamScratch() { cudaFreeAsync(p, s); }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(p) + offset; }
};

// Packed copies of a pitched problem's x and residual: their bytes, x's aligned to 256.
size_t packed_x_bytes(const ConvProblem& pb) {
  return (static_cast<size_t>(pb.n) * pb.h * pb.w * pb.c * (pb.half ? 2 : 4) + 255) / 256 * 256;
}
size_t packed_r_bytes(const ConvProblem& pb) { return pb.residual ? out_elems(pb) * (pb.half ? 2 : 4) : 0; }

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
                     " | cudnn ", cudnnGetVersion(), " | cudnn-frontend ", CUDNN_FRONTEND_VERSION, " | tactics 3");
}

TacticPtr make_tactic(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim,
                      const std::vector<uint8_t>* plan) {
  if (id.rfind("cudnn-graph:", 0) == 0) return make_cudnn_graph(cudnn, pb, id, lim, plan);
  if (id.rfind("cudnn:", 0) == 0) return make_cudnn_legacy(cudnn, pb, id, lim);
  if (id.rfind("own:dw-", 0) == 0) return make_own_dwconv(pb, id, lim);
  if (id.rfind("own:thin-", 0) == 0) return make_thin_conv(pb, id, lim);
  if (id.rfind("own:", 0) == 0) return make_own_conv(pb, id);
  if (id.rfind("cutlass:", 0) == 0) return make_cutlass_conv(pb, id, lim);
  if (id.rfind("packin:", 0) == 0) return make_packin(cudnn, pb, id, lim, plan);
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
  // with the cutlass family on or the own:dw family off, the candidates differ: entries of their own
  return device_key_ + "|" + key + (limits_.cutlass ? "|cutlass" : "") + (limits_.own_depthwise ? "" : "|no-dw");
}

const TacticRecord* Tuner::usable_record(const std::string& sig, int batch) const {
  const TacticRecord* r = cache_ ? cache_->find(sig, batch) : nullptr;
  // A CUTLASS or own:dw choice while that family is off: the layer is tuned again without it (no warning).
  if (r && !limits_.cutlass && family_of(r->tactic) == TacticFamily::kCutlass) return nullptr;
  const size_t base = r && r->tactic.rfind("packin:", 0) == 0 ? 7 : 0;  // a packin wrapper: its inner tactic
  if (r && !limits_.own_depthwise && r->tactic.compare(base, 7, "own:dw-") == 0) return nullptr;
  return r;
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
  // x and the residual over their pitched extents (a channel view: its pixels' channels and the
  // other channels between them, all inside the buffer the view lives in).
  const int64_t x_rows = int64_t{pb.n} * pb.h * pb.w, y_rows = int64_t{pb.n} * pb.p * pb.q;
  ck::fill_uniform(const_cast<void*>(b.x), pb.half, (x_rows - 1) * pb.x_pitch() + pb.c, 0x5eed0001u, -1.f, 1.f,
                   stream_);
  if (pb.residual)
    ck::fill_uniform(const_cast<void*>(b.residual), pb.half, (y_rows - 1) * pb.r_pitch() + pb.k, 0x5eed0002u, -1.f,
                     1.f, stream_);
  ConvBuffers r = b;
  r.y = y_ref;  // packed [n, p, q, k], whatever the problem's output pitch
  if (pb.inputs_packed()) {
    cudnn_legacy_reference(cudnn_, pb.packed())->run(cudnn_, r, stream_);
    return;
  }
  // Pitched inputs: the reference reads packed copies of the same data.
  const int64_t es = pb.half ? 2 : 4;
  const StreamScratch scratch(packed_x_bytes(pb) + packed_r_bytes(pb), stream_);
  ck::copy_rows(b.x, pb.x_pitch() * es, scratch.at(0), pb.c * es, x_rows, pb.c * es, stream_);
  r.x = scratch.at(0);
  if (pb.residual) {
    ck::copy_rows(b.residual, pb.r_pitch() * es, scratch.at(packed_x_bytes(pb)), pb.k * es, y_rows, pb.k * es,
                  stream_);
    r.residual = scratch.at(packed_x_bytes(pb));
  }
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
  try {
    return median_replay_us([&](cudaStream_t s) { t.run(cudnn_, b, s); }, reps_, timings, capture_, stream_, ev_[0],
                            ev_[1]);
  } catch (const Error&) {
    (void)cudaGetLastError();
    cudaStreamSynchronize(stream_);
    return -1;
  }
}

// One layer's way through choose(): the problem, its buffers and keys, and what is decided so far.
struct Tuner::Choice {
  Choice(const ConvProblem& p, const ConvBuffers& buffers, void* y)
      : pb(p), b(buffers), y_ref(y), sig(p.signature()), key(sig + "|b" + std::to_string(p.n)) {}
  const ConvProblem& pb;
  const ConvBuffers& b;
  void* y_ref;
  Clock::time_point t0 = Clock::now();
  std::string sig, key, memo_key;  // signature, "<signature>|b<batch>", the process memo's key
  TunedLayer out;
  bool prepared = false;
};

// Random inputs and the reference output, once per layer, only when a check needs them.
void Tuner::ensure_prepared(Choice& c) {
  if (c.prepared) return;
  const auto p0 = Clock::now();
  prepare(c.pb, c.b, c.y_ref);
  stats_.breakdown.prepare_ms += ms_since(p0);  // asynchronous: the first check's synchronisation pays most of it
  c.prepared = true;
}

TunedLayer Tuner::finish(Choice& c) {
  stats_.ms += ms_since(c.t0);
  stats_.breakdown.choose_ms = stats_.ms;
  return c.out;
}

std::string Tuner::serialise(const ConvProblem& pb, const ConvTactic& t) {
  const auto s0 = Clock::now();
  std::string text = plan_text(cudnn_, pb, limits_, t);
  stats_.breakdown.serialise_ms += ms_since(s0);
  ++stats_.breakdown.serialised;
  return text;
}

TunedLayer Tuner::choose(const ConvProblem& pb, const ConvBuffers& b, void* y_ref) {
  ++stats_.layers;
  Choice c(pb, b, y_ref);
  c.memo_key = memo_key_of(c.key);
  if (const TacticRecord* r = usable_record(c.sig, pb.n))
    if (choose_from_cache(c, *r)) return finish(c);
  if (choose_from_memo(c)) return finish(c);
  tune(c);
  return finish(c);
}

// The tactic the file's record names, for that record: the object this process already checked for
// it, else the one prebuild() made, else built now. Null when it no longer builds.
TacticPtr Tuner::cached_tactic(Choice& c, const TacticRecord& r, bool* memo_hit) {
  TuneBreakdown& bd = stats_.breakdown;
  if (auto t = memo_find(c.memo_key, &r.tactic, nullptr)) {
    *memo_hit = true;
    c.out.tactic = std::move(t);
    return nullptr;
  }
  TacticPtr t;
  const std::vector<uint8_t> plan = plan_bytes(r);
  if (auto it = premade_.find(c.key); it != premade_.end()) {
    if (it->second && it->second->id() == r.tactic) t = std::move(it->second);
    premade_.erase(it);
  }
  // A plan that did not restore on prebuild()'s thread (its own cuDNN handle) is tried once more
  // here on the engine's handle before the one built from the id is taken: a warm build restored
  // about two thirds of the plans there that had each restored when chosen. Only a restore: the
  // tactic built from the id is there already.
  if (t && !plan.empty() && !t->restored_from_plan()) {
    const auto r0 = Clock::now();
    if (TacticPtr again = restore_tactic(cudnn_, c.pb, r.tactic, limits_, plan)) t = std::move(again);
    bd.restore_ms += ms_since(r0);
    ++bd.restores;
  }
  if (!t) {
    const auto r0 = Clock::now();
    t = make_tactic(cudnn_, c.pb, r.tactic, limits_, &plan);
    bd.restore_ms += ms_since(r0);
    ++bd.restores;
  }
  return t;
}

// 1: the file's choice: the object this process already checked for it, else built (in parallel by
// prebuild(), or now) and checked. Repeated layers (same signature and batch) find the memo: one
// check per distinct (signature, batch). False (with a warning) when it no longer builds or fails
// the check: the layer is tuned.
bool Tuner::choose_from_cache(Choice& c, const TacticRecord& r) {
  int& hits = r.loaded ? stats_.cache_hits : stats_.memo_hits;  // not loaded: put() earlier in this build
  bool memo_hit = false;
  TacticPtr t = cached_tactic(c, r, &memo_hit);
  if (memo_hit) {
    c.out.us = r.us;
    c.out.plain = r.plain;
    c.out.from_cache = true;
    ++hits;
    return true;
  }
  if (!t) {
    warnings_.push_back(detail::cat("tactic '", r.tactic, "' from the tactic cache for ", c.sig, " batch ", c.pb.n,
                                    " no longer builds: tuning the layer"));
    return false;
  }
  ensure_prepared(c);
  const Check v = check(c.pb, *t, c.b, c.y_ref);
  if (!v.ok) {
    warnings_.push_back(detail::cat("tactic '", r.tactic, "' from the tactic cache for ", c.sig, " batch ", c.pb.n,
                                    " fails the check (rel L2 ", v.rel_l2, ", max |d| ", v.max_diff,
                                    "): tuning the layer"));
    return false;
  }
  if (t->restored_from_plan()) ++stats_.plans_restored;
  c.out.tactic = std::shared_ptr<const ConvTactic>(std::move(t));
  c.out.us = r.us;
  c.out.plain = r.plain;
  c.out.from_cache = true;
  ++hits;
  TacticRecord rec = r;
  if (!c.out.tactic->restored_from_plan() && family_of(r.tactic) == TacticFamily::kCudnnGraph) {
    // No plan in the entry (written before plans were kept), or one that no longer loads: store the
    // plan built now, so that the next build restores it.
    std::string text = serialise(c.pb, *c.out.tactic);
    if (!text.empty() && text != rec.plan) {
      rec.plan = std::move(text);
      cache_->put(c.sig, c.pb.n, rec);
    }
  }
  memo_put(c.memo_key, rec, c.out.tactic);
  return true;
}

// 2: this process's choice (already checked).
bool Tuner::choose_from_memo(Choice& c) {
  TacticRecord rec;
  auto t = memo_find(c.memo_key, nullptr, &rec);
  if (!t) return false;
  c.out.tactic = std::move(t);
  c.out.us = rec.us;
  c.out.plain = rec.plain;
  c.out.from_cache = true;
  ++stats_.memo_hits;
  if (cache_) cache_->put(c.sig, c.pb.n, rec);
  return true;
}

// The tactic of c.pb.packed_inputs() (the same layer reading packed x and residual), chosen like
// any layer's (cache file, memo, else tuned) on packed scratch copies of x and the residual, with
// c's output and workspace; its "packin" wrapper is then a candidate of c. Not counted as a layer
// of its own; null (with a warning) if nothing passed.
std::shared_ptr<const ConvTactic> Tuner::choose_packed_inputs(Choice& c) {
  const ConvProblem inner = c.pb.packed_inputs();
  const bool x_pitched = c.pb.x_pitch() != c.pb.c, r_pitched = c.pb.residual && c.pb.r_pitch() != c.pb.k;
  const size_t xb = x_pitched ? packed_x_bytes(c.pb) : 0;
  const StreamScratch scratch(xb + (r_pitched ? packed_r_bytes(c.pb) : 0), stream_);
  ConvBuffers b = c.b;
  if (x_pitched) b.x = scratch.at(0);
  if (r_pitched) b.residual = scratch.at(xb);
  const int layers = stats_.layers;
  const double ms = stats_.ms;
  std::shared_ptr<const ConvTactic> t;
  try {
    t = choose(inner, b, c.y_ref).tactic;
  } catch (const Error& e) {
    warnings_.push_back(detail::cat("conv ", c.sig, " batch ", c.pb.n, ": no tactic for its packed inputs (",
                                    e.what(), ")"));
  }
  stats_.layers = layers;  // c's choice counts, and its time (c.t0) includes this one's
  stats_.ms = ms;
  stats_.breakdown.choose_ms = ms;
  return t;
}

// Candidates in a fixed order: cuDNN graph configs in heuristic order, legacy cuDNN algorithms, own
// kernels (implicit GEMM, depthwise), CUTLASS (prebuilt ones first built on the pool, else here).
std::vector<TacticPtr> Tuner::candidates(const Choice& c) {
  TuneBreakdown& bd = stats_.breakdown;
  std::vector<TacticPtr> cands;
  if (auto it = prebuilt_.find(c.key); it != prebuilt_.end()) {
    cands = std::move(it->second);
    prebuilt_.erase(it);
  } else {
    for (const std::string& id : cudnn_graph_configs(cudnn_, c.pb, limits_)) {
      if (static_cast<int>(cands.size()) >= limits_.max_graph_plans) break;
      const auto b0 = Clock::now();
      TacticPtr t = make_cudnn_graph(cudnn_, c.pb, id, limits_);
      bd.add_build(id, ms_since(b0), t != nullptr);
      if (t) cands.push_back(std::move(t));
    }
  }
  std::vector<TacticPtr> legacy;
  if (auto it = prelegacy_.find(c.key); it != prelegacy_.end()) {
    legacy = std::move(it->second);
    prelegacy_.erase(it);
  } else {
    const auto b0 = Clock::now();
    legacy = cudnn_legacy_candidates(cudnn_, c.pb, limits_);
    bd.add_builds(TacticFamily::kCudnnLegacy, ms_since(b0), static_cast<int>(legacy.size()));
  }
  for (TacticPtr& t : legacy) cands.push_back(std::move(t));
  const auto o0 = Clock::now();
  std::vector<TacticPtr> own = own_conv_candidates(c.pb);
  for (TacticPtr& t : own_dwconv_candidates(c.pb, limits_)) own.push_back(std::move(t));
  for (TacticPtr& t : thin_conv_candidates(c.pb, limits_)) own.push_back(std::move(t));
  bd.add_builds(TacticFamily::kOwn, ms_since(o0), static_cast<int>(own.size()));
  for (TacticPtr& t : own) cands.push_back(std::move(t));
  const auto c0 = Clock::now();
  std::vector<TacticPtr> cutlass = cutlass_conv_candidates(c.pb, limits_);
  bd.add_builds(TacticFamily::kCutlass, ms_since(c0), static_cast<int>(cutlass.size()));
  for (TacticPtr& t : cutlass) cands.push_back(std::move(t));
  return cands;
}

// Checks every candidate, then times those that pass in the brief sweep (in candidate order).
Tuner::Sweep Tuner::check_and_sweep(Choice& c, std::vector<TacticPtr>& cands) {
  Sweep s;
  for (TacticPtr& t : cands) {
    ++c.out.candidates;
    const Check v = check(c.pb, *t, c.b, c.y_ref);
    if (!v.ok) {
      ++c.out.rejected;
      continue;
    }
    const double us = time_us(*t, c.b, quick_timings_);
    ++stats_.breakdown.quick_timings;
    if (us < 0) {
      ++c.out.rejected;
      continue;
    }
    s.place.push_back(static_cast<int>(&t - cands.data()));
    s.passed.push_back(std::move(t));
    s.brief.push_back(us);
  }
  std::vector<int> graph_place(s.passed.size(), -1);  // graph plans come first in cands, in list order
  for (size_t i = 0; i < s.passed.size(); ++i)
    if (family_of(s.passed[i]->id()) == TacticFamily::kCudnnGraph) graph_place[i] = s.place[i];
  stats_.breakdown.add_cap_costs(s.brief, graph_place);
  return s;
}

// The full sweep of the finalists within TuneTiming::kRetimeMargin of the best brief time
// (tune_select.hpp); the winner's index in s.passed (-1: none passed) and its time in *us.
int Tuner::pick_winner(const Choice& c, const Sweep& s, double* us) {
  const std::vector<size_t> finalists = retime_set(s.brief, TuneTiming::kRetimeMargin);
  *us = -1;
  if (finalists.empty()) return -1;
  std::vector<double> full(finalists.size(), -1.0);
  if (finalists.size() > 1 && !quick_) {
    for (size_t j = 0; j < finalists.size(); ++j) {
      full[j] = time_us(*s.passed[finalists[j]], c.b, timings_);
      ++stats_.breakdown.full_timings;
    }
  }
  const int f = pick_fastest(full);
  if (f >= 0) {
    *us = full[static_cast<size_t>(f)];
    return static_cast<int>(finalists[static_cast<size_t>(f)]);
  }
  // one finalist, quick mode, or every full timing failed: the brief sweep decides
  const int w = pick_fastest(s.brief);
  *us = s.brief[static_cast<size_t>(w)];
  return w;
}

// 3: tune: check every candidate, the brief sweep of those that passed, the full sweep of the
// finalists; the winner goes to the cache file and the process memo.
void Tuner::tune(Choice& c) {
  // A pitched input: the packed problem's choice first. It fills x, the residual and y_ref with its
  // own data, so c's are prepared (again, if a cached choice's check prepared them) afterwards.
  std::shared_ptr<const ConvTactic> packed_best;
  if (!c.pb.inputs_packed()) {
    packed_best = choose_packed_inputs(c);
    c.prepared = false;
  }
  ensure_prepared(c);
  std::vector<TacticPtr> cands = candidates(c);
  if (!c.pb.inputs_packed()) {
    TacticPtr w = wrap_packin(c.pb, packed_best, limits_);
    if (!w) w = make_packin(cudnn_, c.pb, "packin:cudnn:IMPLICIT_GEMM", limits_);  // its workspace did not fit
    if (w) cands.push_back(std::move(w));
  }
  Sweep s = check_and_sweep(c, cands);
  double best = -1;
  const int winner = pick_winner(c, s, &best);
  stats_.candidates += c.out.candidates;
  stats_.rejected += c.out.rejected;
  ++stats_.tuned;
  YOLOCU_CHECK(winner >= 0, kUnsupported, "conv ", c.sig, " batch ", c.pb.n, ": none of ", c.out.candidates,
               " candidate tactics passed the check");
  // Unfit for a derived size: compiling at runtime, or needing more than the floor's workspace. Only a
  // winner that compiles is replaced (its own workspace is the engine's anyway).
  std::vector<bool> unfit;
  for (const TacticPtr& t : s.passed)
    unfit.push_back(t->compiled_at_runtime() || t->workspace() > kDerivedWorkspaceFloor);
  const int plain =
      s.passed[static_cast<size_t>(winner)]->compiled_at_runtime() ? pick_plain(s.brief, unfit, winner) : -1;
  if (plain >= 0) c.out.plain = s.passed[static_cast<size_t>(plain)]->id();
  c.out.tactic = std::move(s.passed[static_cast<size_t>(winner)]);
  stats_.breakdown.add_win(c.out.tactic->id(), s.place[static_cast<size_t>(winner)]);
  c.out.us = best;
  TacticRecord chosen{c.out.tactic->id(), c.out.tactic->name(), best};
  chosen.plain = c.out.plain;
  if (family_of(chosen.tactic) == TacticFamily::kCudnnGraph) chosen.plan = serialise(c.pb, *c.out.tactic);
  if (cache_) cache_->put(c.sig, c.pb.n, chosen);
  memo_put(c.memo_key, chosen, c.out.tactic);
}

}  // namespace yolocu::engine

// Derived batch sizes that started on tactics which compile nothing (CudaEngineOptions::
// derive_without_compiling) get the tuned size's own tactics later, without holding anyone up: a
// thread of their own builds them for each such size (plans compiled on half the cores, or restored
// from the tactic cache file, which then keeps the new ones for the next start), and the next run()
// on the engine's thread swaps them in (that size's CUDA graph is captured again). Sizes prepared
// while it works are queued for it. The replaced tactics and graphs are kept until the engine
// goes: a launch of them may still be in flight.
#include <mutex>

#include "engine/cuda/engine_impl.hpp"
#include "engine/cuda/tactics/batch_sizes.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

// One job in the process at a time: a second engine of the same model (another execution context)
// then finds the first one's tactics in the process memo instead of compiling them again.
std::mutex& upgrade_serial() {
  static std::mutex m;
  return m;
}

using Built = std::map<int, std::vector<std::shared_ptr<const engine::ConvTactic>>>;

// The background thread: its own cuDNN handle, stream, view of the cache file and tuner; the jobs
// one after the other until none is left (or the engine goes).
void upgrade_loop(Upgrades& u, int device, int threads, const std::string& path, const engine::TacticLimits& lim) {
  try {
    YOLOCU_CUDA_CHECK(cudaSetDevice(device));
    cudnnHandle_t raw = nullptr;
    YOLOCU_CUDNN_CHECK(cudnnCreate(&raw));
    const CudnnHandle h(raw);
    cudaStream_t rs = nullptr;
    YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
    const Stream s(rs);
    std::unique_ptr<engine::TacticCache> cache;
    if (!path.empty()) {
      cache = std::make_unique<engine::TacticCache>(engine::tactic_device_key(device));
      std::string w;
      if (!cache->load(path, &w)) cache.reset();
    }
    engine::Tuner tuner(h.get(), lim, cache.get(), device, s.get());
    for (;;) {
      UpgradeJob job;
      {
        const std::lock_guard<std::mutex> lock(u.mutex);
        if (u.jobs.empty() || u.stop) {
          u.running = false;  // decided under the lock: a job queued after this starts a new thread
          return;
        }
        job = std::move(u.jobs.front());
        u.jobs.pop_front();
      }
      const size_t layers = job.problems.size() / std::max<size_t>(1, job.sizes.size());
      Built built;
      std::string warning;
      {
        const std::lock_guard<std::mutex> serial(upgrade_serial());
        const auto tactics = tuner.derive_many(job.problems, job.ids, device, threads);
        for (size_t k = 0; k < job.sizes.size(); ++k)
          built[job.sizes[k]].assign(tactics.begin() + static_cast<std::ptrdiff_t>(k * layers),
                                     tactics.begin() + static_cast<std::ptrdiff_t>((k + 1) * layers));
        if (cache && cache->dirty()) cache->save(path, &warning);
      }
      const std::lock_guard<std::mutex> lock(u.mutex);
      for (auto& [b, t] : built) u.ready[b] = std::move(t);
      if (!warning.empty()) u.warnings.push_back(warning);
      u.pending.store(true, std::memory_order_release);
    }
  } catch (const std::exception& e) {
    const std::lock_guard<std::mutex> lock(u.mutex);
    u.jobs.clear();
    u.warnings.push_back(std::string("derived batch sizes keep the tactics they started with: ") + e.what());
    u.pending.store(true, std::memory_order_release);
    u.running = false;
  }
}

}  // namespace

Upgrades::~Upgrades() {
  {
    const std::lock_guard<std::mutex> lock(mutex);
    stop = true;
  }
  join();
}

void Upgrades::join() {
  if (thread.joinable()) thread.join();
}

void Engine::start_upgrade(const std::vector<int>& sizes) {
  UpgradeJob job;
  job.sizes = sizes;
  for (int b : sizes) {
    const BatchExec& from = *batches[static_cast<size_t>(engine::nearest_tuned(b, tuned))];
    for (size_t c = 0; c < convs.size(); ++c) {
      job.problems.push_back(convs[c].problem(b));
      job.ids.push_back(from.tactics[c]->id());
    }
  }
  Upgrades& u = upgrades;
  {
    const std::lock_guard<std::mutex> lock(u.mutex);
    u.jobs.push_back(std::move(job));
    if (u.running) return;  // the thread takes it after its current one
    u.running = true;
  }
  u.join();  // a thread that has finished its jobs
  u.thread = std::thread(upgrade_loop, std::ref(u), options.device, std::max(1, pool_threads() / 2),
                         tactic_cache_path, tactic_limits);
}

void Engine::apply_upgrades() {
  if (!upgrades.pending.load(std::memory_order_acquire)) return;
  const std::lock_guard<std::mutex> lock(upgrades.mutex);
  for (auto& [b, tactics] : upgrades.ready) {
    auto& slot = batches[static_cast<size_t>(b)];
    if (!slot || tactics.size() != convs.size()) continue;
    auto be = std::make_unique<BatchExec>();
    be->tactics = std::move(tactics);
    be->direct_stem = slot->direct_stem;
    upgrades.retired.push_back(std::move(slot));
    slot = std::move(be);
    ++stats.derived_upgraded;
  }
  upgrades.ready.clear();
  for (std::string& w : upgrades.warnings) stats.warnings.push_back(std::move(w));
  upgrades.warnings.clear();
  upgrades.pending.store(false, std::memory_order_relaxed);
}

void Engine::wait_upgrades() {
  upgrades.join();
  apply_upgrades();
}

}  // namespace yolocu::cuda_engine_internal

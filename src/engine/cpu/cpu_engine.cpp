// CPU executor: runs a Plan as the steps cpu_plan.hpp plans (oneDNN convolutions, blocked-layout
// steps, the fused Detect tail, the reference ops of engine/ops.hpp), each an object of
// cpu/steps/, all activations in one liveness-planned arena. This file: the engine's interface, the
// per-shape cache, memory checks, and the run loop.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/check.hpp"
#include "engine/cpu/cpu_layout.hpp"
#include "engine/cpu/cpu_plan.hpp"
#include "engine/cpu/steps/cpu_step.hpp"
#include "engine/plan.hpp"
#include "engine/quant/fake_quant.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/int8.hpp"

namespace yolocu {
namespace {

// oneDNN reports through dnnl::error and a failed allocation arrives as std::bad_alloc: both become
// yolocu::Error here, the engine's only failure type (found by fuzzing: a dilated convolution
// oneDNN refuses escaped as dnnl::error).
template <typename F>
auto translate_errors(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory)
      detail::fail(ErrorCode::kOutOfMemory, what, ": oneDNN is out of memory (", e.what(), ")");
    detail::fail(ErrorCode::kUnsupported, what, ": oneDNN cannot run this model: ", e.what());
  } catch (const std::bad_alloc&) {
    detail::fail(ErrorCode::kOutOfMemory, what,
                 ": out of host memory (an allocation failed: the machine, a ulimit -v or cgroup limit; "
                 "max_memory bounds what a model may ask for)");
  }
}

// Under an address-space limit (ulimit -v, RLIMIT_AS) Debian's oneDNN 2.6 can crash (SIGSEGV inside
// dnnl_primitive_create: its JIT code buffer's mapping fails) and libgomp aborts when it cannot map
// a thread's stack. Neither reports an error we could catch, so before building the kernels the
// engine checks that the address space they need is there: `bytes` (arena, weights) plus a margin
// for the JIT code and, per OpenMP thread, its stack (8 MiB) and the 64 MiB that glibc's malloc
// reserves for each thread's arena (it counts against the limit). Without a limit this costs nothing.
void check_address_space(uint64_t bytes, const std::string& what) {
  rlimit rl{};
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
  const uint64_t threads = static_cast<uint64_t>(std::max(1, omp_get_max_threads()));
  const uint64_t need = bytes + (uint64_t{32} << 20) + threads * (uint64_t{72} << 20);
  void* p = need < (uint64_t{1} << 46) ? mmap(nullptr, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                                       : MAP_FAILED;
  YOLOCU_CHECK(p != MAP_FAILED, kOutOfMemory, what, ": the address-space limit (ulimit -v: ",
               static_cast<uint64_t>(rl.rlim_cur) >> 20, " MiB) leaves less than ", need >> 20,
               " MiB free, what the CPU engine needs (activations, weights, oneDNN JIT code, ", threads,
               " OpenMP threads' stacks and malloc arenas)");
  munmap(p, need);
}

std::string shape_list(const std::vector<Shape>& shapes) {
  std::string s;
  for (const auto& x : shapes) s += (s.empty() ? "" : ", ") + shape_str(x);
  return s;
}

using engine::Plan;
using engine::cpu::CpuStep;
using engine::cpu::CpuStepKind;
using engine::cpu::CpuStepPlan;

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

// One prepared input shape: the planned steps (cpu_plan.hpp), the arena they run in and the step
// objects (cpu/steps/), which point into both.
struct Prepared {
  CpuStepPlan sp;
  std::unique_ptr<uint8_t[], AlignedFree> arena;
  std::vector<std::unique_ptr<CpuStep>> steps;  // no object for a no-op step
  std::vector<std::vector<int>> step_outs;      // per step object: the values complete after it
  EngineStats stats;
};

// A value of the prepared plan as a plain tensor: a view of its buffer, or a plain copy of a
// blocked one (nChw{B}c, channels padded to a multiple of B).
Tensor plain_value(const Prepared& p, int id, std::vector<float>& scratch) {
  const engine::PlanValue& v = p.sp.plan.values[static_cast<size_t>(id)];
  uint8_t* data = p.arena.get() + p.sp.offset[static_cast<size_t>(id)];
  if (!p.sp.blocked[static_cast<size_t>(id)]) return Tensor::view(v.dtype, v.shape, data);
  const int64_t B = p.sp.block, n = v.shape[0], c = v.shape[1], hw = v.shape[2] * v.shape[3], cb = (c + B - 1) / B;
  scratch.resize(static_cast<size_t>(n * c * hw));
  const float* src = reinterpret_cast<const float*>(data);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t x = 0; x < hw; ++x)
        scratch[static_cast<size_t>((i * c + ch) * hw + x)] = src[((i * cb + ch / B) * hw + x) * B + ch % B];
  return Tensor::view(v.dtype, v.shape, scratch.data());
}

// Where run_observed() reads each name: (step object index or -1 for a graph input, value id).
std::vector<std::pair<int, int>> observation_points(const Prepared& p, const std::vector<std::string>& names) {
  std::vector<std::pair<int, int>> at;
  const auto& values = p.sp.plan.values;
  for (const std::string& name : names) {
    int id = -1;
    for (size_t v = 0; v < values.size() && id < 0; ++v)
      if (values[v].name == name && !values[v].constant && p.sp.offset[v] >= 0) id = static_cast<int>(v);
    int step = -2;
    if (id >= 0 && values[static_cast<size_t>(id)].graph_input) step = -1;
    for (size_t k = 0; id >= 0 && step == -2 && k < p.step_outs.size(); ++k)
      for (int o : p.step_outs[k])
        if (o == id) step = static_cast<int>(k);
    YOLOCU_CHECK(step != -2, kInvalidArgument, "CpuEngine: tensor '", name,
                 "' cannot be observed: the prepared plan holds no buffer of it (not in the model, a constant, or "
                 "fused into another step)");
    at.emplace_back(step, id);
  }
  return at;
}

}  // namespace

struct CpuEngine::Impl {
  std::shared_ptr<const Model> model;
  CpuEngineOptions options;
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::mutex mutex;
  std::map<std::vector<Shape>, std::unique_ptr<Prepared>> cache;
  Prepared* last = nullptr;

  Prepared& prepare(const std::vector<Shape>& shapes);
  std::unique_ptr<Prepared> build(const std::vector<Shape>& shapes);
  void allocate_arena(Prepared& p, const std::vector<Shape>& shapes) const;
  void make_steps(Prepared& p);
};

// Plans the steps (fusions, layouts, arena), checks the memory, allocates the arena and makes the
// step objects over it.
std::unique_ptr<Prepared> CpuEngine::Impl::build(const std::vector<Shape>& shapes) {
  const auto t0 = std::chrono::steady_clock::now();
  auto p = std::make_unique<Prepared>();
  engine::PlanOptions plan_options;
  plan_options.max_memory = options.max_memory;
  engine::cpu::CpuStepOptions step_options;
  step_options.block = engine::cpu::block_size();
  step_options.fuse_detect_head = options.fuse_detect_head;
  p->sp = engine::cpu::plan_cpu_steps(engine::build_plan(*model, shapes, plan_options), step_options);
  if (options.int8) engine::quant::attach_int8_scales(p->sp, *options.int8);
  p->stats.fused_nodes = p->sp.fused_nodes;
  allocate_arena(*p, shapes);
  make_steps(*p);
  p->stats.runtime_nodes = static_cast<int>(p->steps.size());
  p->stats.folded_nodes = p->sp.plan.folded_nodes;
  p->stats.prepare_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

void CpuEngine::Impl::allocate_arena(Prepared& p, const std::vector<Shape>& shapes) const {
  const size_t total = p.sp.arena_bytes;
  const uint64_t budget = options.max_memory ? options.max_memory : default_max_memory();
  YOLOCU_CHECK(total <= budget, kOutOfMemory, "the activation memory for input shapes ", shape_list(shapes), " needs ",
               total, " bytes, above the memory budget of ", budget, " bytes (max_memory, yolocu --max-memory)");
  uint64_t weight_bytes = 0;
  for (const auto& v : p.sp.plan.values)
    if (v.constant) weight_bytes += v.value.nbytes();
  check_address_space(total + weight_bytes, "CpuEngine: input shapes " + shape_list(shapes));
  p.arena.reset(static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(total, 64))));
  YOLOCU_CHECK(p.arena, kOutOfMemory, "cannot allocate ", total, " bytes of activation memory");
  p.stats.arena_bytes = total;
  p.stats.naive_bytes = p.sp.naive_bytes;
}

void CpuEngine::Impl::make_steps(Prepared& p) {
  const engine::cpu::CpuStepBuild b{p.sp, p.arena.get(), eng, strm, p.stats};
  for (const engine::cpu::CpuStepSpec& s : p.sp.steps)
    if (s.kind != CpuStepKind::kNoop) {
      p.steps.push_back(engine::cpu::make_cpu_step(s, b));
      p.step_outs.push_back(s.out);
    } else if (!p.step_outs.empty()) {  // an in-place Concat: complete once the step before it ran
      p.step_outs.back().insert(p.step_outs.back().end(), s.out.begin(), s.out.end());
    }
}

Prepared& CpuEngine::Impl::prepare(const std::vector<Shape>& shapes) {
  auto it = cache.find(shapes);
  if (it == cache.end()) {
    if (cache.size() >= 8) cache.erase(cache.begin());  // bounded: dynamic-shape users
    it = cache.emplace(shapes, build(shapes)).first;
  }
  last = it->second.get();
  return *it->second;
}

CpuEngine::CpuEngine(std::shared_ptr<const Model> model, const CpuEngineOptions& options)
    : impl_(std::make_unique<Impl>()) {
  YOLOCU_CHECK(model, kInvalidArgument, "CpuEngine: null model");
  YOLOCU_CHECK(options.num_threads >= 0, kInvalidArgument, "CpuEngine: num_threads must be >= 0");
  impl_->model = std::move(model);
  impl_->options = options;
}

CpuEngine::~CpuEngine() = default;

const Model& CpuEngine::model() const { return *impl_->model; }

void CpuEngine::prepare(const std::vector<Shape>& input_shapes) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  translate_errors("CpuEngine::prepare", [&] { impl_->prepare(input_shapes); });
}

EngineStats CpuEngine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->last ? impl_->last->stats : EngineStats{};
}

std::vector<Tensor> CpuEngine::run(const std::vector<Tensor>& inputs) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return translate_errors("CpuEngine::run", [&] { return run_locked(inputs, nullptr, nullptr); });
}

std::vector<Tensor> CpuEngine::run_observed(const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                                            const std::function<void(size_t, const Tensor&)>& observe) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return translate_errors("CpuEngine::run", [&] { return run_locked(inputs, &names, &observe); });
}

std::vector<Tensor> CpuEngine::run_locked(const std::vector<Tensor>& inputs, const std::vector<std::string>* names,
                                          const Observer* observe) {
  const Model& m = *impl_->model;
  YOLOCU_CHECK(inputs.size() == m.graph.inputs.size(), kInvalidArgument, "the model takes ", m.graph.inputs.size(),
               " input(s), ", inputs.size(), " given");
  std::vector<Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    YOLOCU_CHECK(!inputs[i].empty() || inputs[i].numel() == 0, kInvalidArgument, "input '", m.graph.inputs[i].name, "' is empty");
    YOLOCU_CHECK(inputs[i].dtype() == m.graph.inputs[i].dtype, kInvalidArgument, "input '", m.graph.inputs[i].name,
                 "' must be ", dtype_name(m.graph.inputs[i].dtype), ", got ", dtype_name(inputs[i].dtype()));
    shapes.push_back(inputs[i].shape());
  }
  if (impl_->options.num_threads > 0) omp_set_num_threads(impl_->options.num_threads);
  Prepared& p = impl_->prepare(shapes);
  const Plan& plan = p.sp.plan;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = plan.inputs[i];
    if (p.sp.offset[static_cast<size_t>(id)] < 0) continue;  // input unused
    uint8_t* dst = p.arena.get() + p.sp.offset[static_cast<size_t>(id)];
    if (inputs[i].dtype() == plan.values[static_cast<size_t>(id)].dtype) {
      std::memcpy(dst, inputs[i].data(), inputs[i].nbytes());
    } else {
      const Tensor c = cast_tensor(inputs[i], plan.values[static_cast<size_t>(id)].dtype);
      std::memcpy(dst, c.data(), c.nbytes());
    }
  }
  std::vector<std::pair<int, int>> watch;
  std::vector<float> scratch;
  if (names) watch = observation_points(p, *names);
  const auto observe_after = [&](int step) {
    if (!watch.empty() && step >= 0) impl_->strm.wait();
    for (size_t k = 0; k < watch.size(); ++k)
      if (watch[k].first == step) (*observe)(k, plain_value(p, watch[k].second, scratch));
  };
  observe_after(-1);
  static const bool profile = std::getenv("YOLOCU_PROFILE") != nullptr;
  std::map<std::string, double> prof;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const auto& st = p.steps[k];
    const auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    st->run(impl_->strm);
    observe_after(static_cast<int>(k));
    if (profile) {
      impl_->strm.wait();
      prof[st->profile_name()] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  impl_->strm.wait();
  if (profile)
    for (const auto& kv : prof) std::fprintf(stderr, "[profile] %-12s %8.2f ms\n", kv.first.c_str(), kv.second);
  std::vector<Tensor> outs;
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const int id = plan.outputs[i];
    const auto& v = plan.values[static_cast<size_t>(id)];
    // cast_tensor copies (and converts where the model's output dtype differs): one copy per output
    outs.push_back(cast_tensor(v.constant ? v.value : Tensor::view(v.dtype, v.shape, p.arena.get() + p.sp.offset[static_cast<size_t>(id)]),
                               plan.output_dtypes[i]));
  }
  return outs;
}

uint64_t default_max_memory() {
  static const uint64_t kDefault = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t{16} << 30;
  }();
  return kDefault;
}

}  // namespace yolocu

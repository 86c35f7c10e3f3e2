// The GPU engine's internals shared by its translation units (private: included only by
// cuda_engine.cpp, engine_setup.cpp, engine_build.cpp, engine_exec.cpp and engine_stem.cpp): RAII wrappers, the
// per-step data and CudaEngine::Impl.
//   engine_setup.cpp  per step: weights (plain, space-to-depth, padded), tables, constants
//   engine_build.cpp  the build: plan, arena, tactics per tuned batch size, derived batch sizes
//   engine_exec.cpp   execution: input conversion, each step's launch, CUDA graph capture / replay
//   engine_stem.cpp   the direct stem kernel: setup, per-batch choice (checked, timed, cached), run
//   cuda_engine.cpp   the public API (argument checks, host convenience, profile)
#pragma once

#include "yolocu/cuda_engine.hpp"

#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <map>
#include <thread>
#include <type_traits>

#include "core/cuda_check.hpp"
#include "core/device_budget.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/gpu_steps.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/stem_conv_kernel.hpp"
#include "engine/cuda/tactics/tactic_cache.hpp"
#include "engine/cuda/tactics/tuner.hpp"
#include "engine/detect_tail.hpp"
#include "engine/ops.hpp"
#include "engine/plan.hpp"

namespace yolocu {
namespace cuda_engine_internal {

using engine::GpuStep;
using engine::GpuStepKind;
using engine::GpuStepPlan;
using engine::Layout;
namespace ck = cuda_kernels;

// ---- RAII ------------------------------------------------------------------------------------
// Frees, and refunds the budget the bytes were charged to (if any).
struct CudaFree {
  detail::DeviceBudget* budget = nullptr;
  size_t bytes = 0;
  void operator()(void* p) const noexcept {
    cudaFree(p);
    if (budget) budget->refund(bytes);
  }
};
using DeviceMem = std::unique_ptr<void, CudaFree>;

// `bytes` charged to `budget` first (kOutOfMemory over max_device_memory, nothing allocated), then
// allocated (kOutOfMemory when the device has no room).
inline DeviceMem device_alloc(size_t bytes, const char* what, detail::DeviceBudget* budget) {
  if (bytes == 0) return DeviceMem();
  if (budget) budget->charge(bytes, std::string("the engine's ") + what);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess && budget) budget->refund(bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    detail::fail(ErrorCode::kOutOfMemory, "cannot allocate ", bytes, " bytes of device memory for ", what);
  }
  YOLOCU_CUDA_CHECK(e);
  return DeviceMem(p, CudaFree{budget, bytes});
}

template <typename T, void (*Destroy)(T)>
struct Deleter {
  void operator()(std::remove_pointer_t<T>* p) const noexcept { Destroy(p); }
};
template <typename T, void (*Destroy)(T)>
using Handle = std::unique_ptr<std::remove_pointer_t<T>, Deleter<T, Destroy>>;

inline void destroy_cudnn(cudnnHandle_t h) { cudnnDestroy(h); }
inline void destroy_stream(cudaStream_t s) { cudaStreamDestroy(s); }
inline void destroy_event(cudaEvent_t e) { cudaEventDestroy(e); }
inline void destroy_graph(cudaGraph_t g) { cudaGraphDestroy(g); }
inline void destroy_graph_exec(cudaGraphExec_t g) { cudaGraphExecDestroy(g); }

using CudnnHandle = Handle<cudnnHandle_t, destroy_cudnn>;
using Stream = Handle<cudaStream_t, destroy_stream>;
using Event = Handle<cudaEvent_t, destroy_event>;
using CudaGraph = Handle<cudaGraph_t, destroy_graph>;
using GraphExec = Handle<cudaGraphExec_t, destroy_graph_exec>;

inline Event make_event(unsigned flags) {
  cudaEvent_t e = nullptr;
  YOLOCU_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags));
  return Event(e);
}

// Makes `device` current for a scope and restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    YOLOCU_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) YOLOCU_CUDA_CHECK(cudaSetDevice(device));
    else prev_ = -1;
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// ---- per-step data ---------------------------------------------------------------------------
// Channels of the space-to-depth stem's input: 4 * 3 = 12, padded to 16 (32-byte pixels).
constexpr int kStemChannels = 16;

struct ConvInfo {
  int step = -1;
  int x = -1, y = -1, residual = -1;
  engine::ConvProblem pb;  // at max_batch; n is set per batch (problem())
  bool s2d = false;        // the space-to-depth stem: x is the engine's stem buffer
  DeviceMem d_w, d_bias;   // KRSC in the activation dtype (padded), float32 bias [pb.k]
  DeviceMem d_bias_act;    // fp16 engines: the bias in fp16 too (the cutlass family's epilogue reads it)
  std::string name;
  engine::ConvProblem problem(int batch) const {
    engine::ConvProblem p = pb;
    p.n = batch;
    return p;
  }
};

struct BatchExec {
  std::vector<std::shared_ptr<const engine::ConvTactic>> tactics;  // per ConvInfo
  bool direct_stem = false;  // the stem (Impl::direct_conv) runs as the direct kernel, from the input
  std::vector<GraphExec> graphs;  // the forward's graphs (CudaEngineOptions::graph_segments), in order
  bool graph_failed = false;
  int runs = 0;
};

struct StepAux {
  int conv = -1;                  // index into convs
  DeviceMem d_sy, d_sx;           // resize tables
  ck::PoolParams pool{};          // maxpool (n filled at launch)
  std::vector<int64_t> start, step;  // slice: per input axis
  std::vector<int64_t> perm;      // transpose
  int64_t split_start = 0;        // split: offset along axis
  int axis = 0;                   // split / concat axis
  std::vector<DeviceMem> tail_tables;            // Detect tail: per level, the 5 constant tables
  std::vector<engine::tail::Level> tail_levels;  // (tables pointing at tail_tables)
};

inline int64_t numel(const Shape& s) { return shape_numel(s); }

inline Shape row_major_strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// Is `ci` YOLOv5's stem (6x6, stride 2, pads 2, 3 channels) on the network input, alone?
inline bool is_s2d_stem(const ConvInfo& ci, int input_value, int readers, int h, int w) {
  const engine::ConvProblem& p = ci.pb;
  return ci.x == input_value && readers == 1 && p.c == 3 && p.group == 1 && p.r == 6 && p.s == 6 && p.str_h == 2 &&
         p.str_w == 2 && p.pad_h == 2 && p.pad_w == 2 && p.dil_h == 1 && p.dil_w == 1 && h % 2 == 0 && w % 2 == 0 &&
         p.p == h / 2 && p.q == w / 2;
}


}  // namespace cuda_engine_internal

using namespace cuda_engine_internal;  // NOLINT: private header of the engine's own files

struct CudaEngine::Impl {
  std::shared_ptr<const Model> model;
  CudaEngineOptions options;
  // Declared before every DeviceMem member: they refund it when destroyed.
  detail::DeviceBudget budget{0, "max_device_memory"};
  bool half = true;
  size_t es = 2;
  int in_c = 3, in_h = 0, in_w = 0;
  GpuStepPlan sp;
  std::vector<StepAux> aux;
  std::vector<ConvInfo> convs;
  std::map<int, DeviceMem> consts;  // value id -> float32 device copy
  DeviceMem arena, workspace, staging;
  DeviceMem stem_input;  // the space-to-depth stem's input [max_batch, H/2, W/2, kStemChannels]
  int stem_conv = -1;    // index into convs, -1: no space-to-depth stem
  // The direct stem kernel (engine_stem.cpp): the conv it can compute (-1: none), its packed weights
  // and its arguments at max_batch (x, y and n set per run).
  int direct_conv = -1;
  DeviceMem direct_w;
  engine::StemConvArgs direct_args;
  engine::StemConvLaunch direct_launch;
  int input_readers = 0; // steps reading the network input
  size_t workspace_bytes = 0;
  std::vector<int> tuned;               // tuned batch sizes, ascending
  std::unique_ptr<engine::Tuner> tuner; // kept for the batch sizes derived later
  CudnnHandle cudnn;
  Stream stream;          // run_host / profile
  Stream capture_stream;  // graph capture only (never executes work)
  std::vector<std::unique_ptr<BatchExec>> batches;  // index = batch size
  CudaEngineStats stats;

  const engine::PlanValue& val(int id) const { return sp.plan.values[static_cast<size_t>(id)]; }
  Shape shape_at(int id, int batch) const {
    Shape s = val(id).shape;
    if (!val(id).constant && !s.empty()) s[0] = s[0] / options.max_batch * batch;
    return s;
  }
  void* ptr(int id) const {
    if (val(id).constant) {
      auto it = consts.find(id);
      YOLOCU_CHECK(it != consts.end(), kInternal, "constant '", val(id).name, "' not on the device");
      return it->second.get();
    }
    const int64_t off = sp.offset[static_cast<size_t>(id)];
    YOLOCU_CHECK(off >= 0, kInternal, "value '", val(id).name, "' has no buffer");
    return static_cast<uint8_t*>(arena.get()) + off;
  }
  float* fptr(int id) const { return static_cast<float*>(ptr(id)); }
  DeviceMem alloc(size_t bytes, const char* what) { return device_alloc(bytes, what, &budget); }

  void build();
  void check_batch_scaling(const engine::Plan& big);
  void setup_step(size_t i);
  void upload_const(int id);
  void choose_tactics();
  engine::ConvBuffers conv_buffers(const ConvInfo& ci) const;
  // The input conversion, or with be.direct_stem the direct stem kernel (which reads the input).
  void convert_input(const BatchExec& be, const void* d_input, int batch, cudaStream_t s);
  // engine_stem.cpp: setup (per conv, with its OIHW float weights), the per-batch choice, the run.
  void setup_direct_stem(const ConvInfo& ci, int conv, const float* oihw, int k);
  void choose_direct_stem(BatchExec& be, int batch, void* y_ref);
  void run_direct_stem(const void* d_input, int batch, cudaStream_t s);
  BatchExec& batch_exec(int batch);
  // The tactic cache of the build (null: none), kept for the plans of derived batch sizes.
  std::unique_ptr<engine::TacticCache> tactic_cache;
  std::string tactic_cache_path;
  // Host threads that build cuDNN plans at once (prebuild, derived batch sizes): the cores, at most 16.
  static int pool_threads() { return static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency()))); }
  // Steps [first, last) of the forward (all by default) on stream s.
  void enqueue_steps(BatchExec& be, int batch, cudaStream_t s, size_t first = 0, size_t last = SIZE_MAX);
  void exec_step(BatchExec& be, size_t i, int batch, cudaStream_t s);
  void capture(BatchExec& be, int batch);
  void run(const void* d_input, int batch, cudaStream_t s);
};


}  // namespace yolocu

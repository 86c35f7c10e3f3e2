// CUDA multi-tensor EMA and SGD: one launch per step over all tensors, driven by a chunk table
// built once and a pointer table re-uploaded only when tensor addresses change.
#include <cstdint>
#include <cstring>
#include <vector>

#include "training/cuda_check.hpp"
#include "training/sgd_math.hpp"
#include "yolocu/training/multi_tensor.hpp"

namespace yolocu::training {
namespace {

constexpr int kBlock = 256;
constexpr int kChunk = 4096;  // elements per thread block: 4 float4 per thread per list
constexpr int kMaxLists = 3;

struct Chunk {
  int32_t tensor;  // index into the pointer table columns
  int32_t start;   // first element (a multiple of kChunk, so 16-byte aligned if the base is)
  int32_t len;     // 1..kChunk
  int32_t group;   // SGD hyper-parameter group
};

// RAII device / pinned buffers.
struct DeviceBytes {
  void* p = nullptr;
  explicit DeviceBytes(size_t n) { YOLOCU_TRAIN_CUDA_CHECK(cudaMalloc(&p, n > 0 ? n : 1)); }
  ~DeviceBytes() { cudaFree(p); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
};
struct PinnedBytes {
  void* p = nullptr;
  explicit PinnedBytes(size_t n) { YOLOCU_TRAIN_CUDA_CHECK(cudaMallocHost(&p, n > 0 ? n : 1)); }
  ~PinnedBytes() { cudaFreeHost(p); }
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;
};
struct Event {
  cudaEvent_t e = nullptr;
  Event() { YOLOCU_TRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

}  // namespace

struct MultiTensorTable::Impl {
  int num_lists = 0, num_tensors = 0, num_chunks = 0;
  int64_t total = 0;
  int device = -1;
  std::unique_ptr<DeviceBytes> d_chunks;
  std::unique_ptr<DeviceBytes> d_ptrs;   // void*[num_lists][num_tensors]
  std::unique_ptr<PinnedBytes> h_stage;  // staging for d_ptrs uploads
  Event staged;                          // recorded after the last upload from h_stage
  std::vector<void*> last;               // the pointers currently on the device
  bool uploaded = false;
};

MultiTensorTable::MultiTensorTable(int num_lists, const std::vector<int64_t>& numel, const std::vector<int>& group)
    : impl_(std::make_unique<Impl>()) {
  YOLOCU_CHECK(num_lists >= 1 && num_lists <= kMaxLists, kInvalidArgument, "MultiTensorTable: num_lists ",
               num_lists);
  YOLOCU_CHECK(group.empty() || group.size() == numel.size(), kInvalidArgument,
               "MultiTensorTable: group has ", group.size(), " entries for ", numel.size(), " tensors");
  Impl& m = *impl_;
  YOLOCU_TRAIN_CUDA_CHECK(cudaGetDevice(&m.device));
  m.num_lists = num_lists;
  m.num_tensors = static_cast<int>(numel.size());
  std::vector<Chunk> chunks;
  for (size_t t = 0; t < numel.size(); ++t) {
    YOLOCU_CHECK(numel[t] > 0 && numel[t] < (int64_t{1} << 31) - kChunk, kInvalidArgument,
                 "MultiTensorTable: tensor ", t, " has ", numel[t], " elements");
    const int g = group.empty() ? 0 : group[t];
    YOLOCU_CHECK(g >= 0 && g < kMaxSgdGroups, kInvalidArgument, "MultiTensorTable: group ", g);
    for (int64_t s = 0; s < numel[t]; s += kChunk)
      chunks.push_back({static_cast<int32_t>(t), static_cast<int32_t>(s),
                        static_cast<int32_t>(numel[t] - s < kChunk ? numel[t] - s : kChunk), g});
    m.total += numel[t];
  }
  m.num_chunks = static_cast<int>(chunks.size());
  m.d_chunks = std::make_unique<DeviceBytes>(chunks.size() * sizeof(Chunk));
  YOLOCU_TRAIN_CUDA_CHECK(
      cudaMemcpy(m.d_chunks->p, chunks.data(), chunks.size() * sizeof(Chunk), cudaMemcpyHostToDevice));
  const size_t ptr_bytes = static_cast<size_t>(num_lists) * numel.size() * sizeof(void*);
  m.d_ptrs = std::make_unique<DeviceBytes>(ptr_bytes);
  m.h_stage = std::make_unique<PinnedBytes>(ptr_bytes);
  m.last.assign(static_cast<size_t>(num_lists) * numel.size(), nullptr);
}

MultiTensorTable::~MultiTensorTable() = default;
int MultiTensorTable::num_lists() const noexcept { return impl_->num_lists; }
int MultiTensorTable::num_tensors() const noexcept { return impl_->num_tensors; }
int MultiTensorTable::num_chunks() const noexcept { return impl_->num_chunks; }
int64_t MultiTensorTable::total_elements() const noexcept { return impl_->total; }

void MultiTensorTable::set_pointers(void* const* ptrs, cudaStream_t stream) {
  Impl& m = *impl_;
  const size_t n = m.last.size();
  for (size_t i = 0; i < n; ++i)
    YOLOCU_CHECK(ptrs[i] != nullptr, kInvalidArgument, "MultiTensorTable: null pointer at ", i);
  if (m.uploaded && std::memcmp(m.last.data(), ptrs, n * sizeof(void*)) == 0) return;
  // The previous upload may still be reading the staging buffer.
  YOLOCU_TRAIN_CUDA_CHECK(cudaEventSynchronize(m.staged.e));
  std::memcpy(m.h_stage->p, ptrs, n * sizeof(void*));
  YOLOCU_TRAIN_CUDA_CHECK(
      cudaMemcpyAsync(m.d_ptrs->p, m.h_stage->p, n * sizeof(void*), cudaMemcpyHostToDevice, stream));
  YOLOCU_TRAIN_CUDA_CHECK(cudaEventRecord(m.staged.e, stream));
  std::memcpy(m.last.data(), ptrs, n * sizeof(void*));
  m.uploaded = true;
}

namespace {

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// One thread block per chunk (<= kChunk elements of one tensor). Threads stride through the chunk
// in float4 steps (thread t handles elements 4t, 4t+4*kBlock, ...) when every list's base pointer is
// 16-byte aligned; otherwise element by element. All lists are read and written at the same index.
__global__ void ema_kernel(const Chunk* __restrict__ chunks, void* const* __restrict__ ptrs, int num_tensors,
                           float d, float one_minus_d) {
  const Chunk c = chunks[blockIdx.x];
  float* e = static_cast<float*>(ptrs[c.tensor]) + c.start;
  const float* m = static_cast<const float*>(ptrs[num_tensors + c.tensor]) + c.start;
  if (aligned16(e) && aligned16(m)) {
    const int nv = c.len / 4;
    for (int v = threadIdx.x; v < nv; v += kBlock) {
      float4 a = reinterpret_cast<const float4*>(e)[v];
      const float4 b = reinterpret_cast<const float4*>(m)[v];
      a.x = detail::ema_element(a.x, b.x, d, one_minus_d);
      a.y = detail::ema_element(a.y, b.y, d, one_minus_d);
      a.z = detail::ema_element(a.z, b.z, d, one_minus_d);
      a.w = detail::ema_element(a.w, b.w, d, one_minus_d);
      reinterpret_cast<float4*>(e)[v] = a;
    }
    for (int i = nv * 4 + threadIdx.x; i < c.len; i += kBlock) e[i] = detail::ema_element(e[i], m[i], d, one_minus_d);
  } else {
    for (int i = threadIdx.x; i < c.len; i += kBlock) e[i] = detail::ema_element(e[i], m[i], d, one_minus_d);
  }
}

struct SgdArgs {
  detail::SgdConsts groups[kMaxSgdGroups];
  int first_step;
};

// Same chunk mapping as ema_kernel, over three lists (param, grad, momentum buffer).
__global__ void sgd_kernel(const Chunk* __restrict__ chunks, void* const* __restrict__ ptrs, int num_tensors,
                           SgdArgs args) {
  const Chunk c = chunks[blockIdx.x];
  const detail::SgdConsts k = args.groups[c.group];
  const bool first = args.first_step != 0;
  float* p = static_cast<float*>(ptrs[c.tensor]) + c.start;
  const float* g = static_cast<const float*>(ptrs[num_tensors + c.tensor]) + c.start;
  float* b = static_cast<float*>(ptrs[2 * num_tensors + c.tensor]) + c.start;
  if (aligned16(p) && aligned16(g) && aligned16(b)) {
    const int nv = c.len / 4;
    for (int v = threadIdx.x; v < nv; v += kBlock) {
      float4 pv = reinterpret_cast<const float4*>(p)[v];
      const float4 gv = reinterpret_cast<const float4*>(g)[v];
      float4 bv = reinterpret_cast<const float4*>(b)[v];
      detail::sgd_element(pv.x, gv.x, bv.x, k, first);
      detail::sgd_element(pv.y, gv.y, bv.y, k, first);
      detail::sgd_element(pv.z, gv.z, bv.z, k, first);
      detail::sgd_element(pv.w, gv.w, bv.w, k, first);
      reinterpret_cast<float4*>(p)[v] = pv;
      if (k.momentum != 0.0f) reinterpret_cast<float4*>(b)[v] = bv;
    }
    for (int i = nv * 4 + threadIdx.x; i < c.len; i += kBlock) detail::sgd_element(p[i], g[i], b[i], k, first);
  } else {
    for (int i = threadIdx.x; i < c.len; i += kBlock) detail::sgd_element(p[i], g[i], b[i], k, first);
  }
}

}  // namespace

void ema_update_cuda(MultiTensorTable& table, double d, cudaStream_t stream) {
  MultiTensorTable::Impl& m = table.impl();
  YOLOCU_CHECK(m.num_lists == 2, kInvalidArgument, "ema_update: the table needs 2 lists, has ", m.num_lists);
  YOLOCU_CHECK(m.uploaded, kInvalidArgument, "ema_update: set_pointers() was never called");
  if (m.num_chunks == 0) return;
  ema_kernel<<<m.num_chunks, kBlock, 0, stream>>>(static_cast<const Chunk*>(m.d_chunks->p),
                                                  static_cast<void* const*>(m.d_ptrs->p), m.num_tensors,
                                                  static_cast<float>(d), static_cast<float>(1.0 - d));
  YOLOCU_TRAIN_CHECK_LAUNCH();
}

void sgd_step_cuda(MultiTensorTable& table, const SgdGroup* groups, int num_groups, bool first_step,
                   cudaStream_t stream) {
  MultiTensorTable::Impl& m = table.impl();
  YOLOCU_CHECK(m.num_lists == 3, kInvalidArgument, "sgd_step: the table needs 3 lists, has ", m.num_lists);
  YOLOCU_CHECK(m.uploaded, kInvalidArgument, "sgd_step: set_pointers() was never called");
  YOLOCU_CHECK(num_groups >= 1 && num_groups <= kMaxSgdGroups, kInvalidArgument, "sgd_step: num_groups ",
               num_groups);
  SgdArgs args{};
  for (int i = 0; i < num_groups; ++i)
    args.groups[i] = {static_cast<float>(groups[i].lr), static_cast<float>(groups[i].momentum),
                      static_cast<float>(1.0 - groups[i].dampening), static_cast<float>(groups[i].weight_decay),
                      groups[i].nesterov ? 1 : 0};
  args.first_step = first_step ? 1 : 0;
  if (m.num_chunks == 0) return;
  sgd_kernel<<<m.num_chunks, kBlock, 0, stream>>>(static_cast<const Chunk*>(m.d_chunks->p),
                                                  static_cast<void* const*>(m.d_ptrs->p), m.num_tensors, args);
  YOLOCU_TRAIN_CHECK_LAUNCH();
}

}  // namespace yolocu::training

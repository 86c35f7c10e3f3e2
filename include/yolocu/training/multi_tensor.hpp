// yolocu/training/multi_tensor.hpp - horizontally fused updates over many float32 tensors:
// the YOLOv5 model EMA and SGD (momentum, Nesterov, per-group lr / momentum / weight decay).
//
// EMA, per element, with the same two roundings as ultralytics' `v *= d; v += (1 - d) * m`:
//   e = fl(fl(e * float(d)) + fl(float(1 - d) * m))       ((1 - d) is formed in double)
// SGD, per element, as torch.optim.SGD (foreach path) does it for a group (lr, mu, tau, wd):
//   g = grad + wd * p                    (if wd != 0)
//   b = first_step ? g : mu * b + (1 - tau) * g
//   g = nesterov ? g + mu * b : b        (if mu != 0; otherwise g unchanged and b untouched)
//   p = p - lr * g
// The gradient tensors are only read (torch's foreach SGD may overwrite p.grad; we do not).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "yolocu/training/common.hpp"

namespace yolocu::training {

struct SgdGroup {
  double lr = 0.0;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

constexpr int kMaxSgdGroups = 8;

// ---- CPU references (host pointers); `count` tensors of numel[i] floats each ------------------
void ema_update_cpu(float* const* ema, const float* const* model, const int64_t* numel, int count,
                    double d);
// group[i] in [0, num_groups) selects the hyper-parameters of tensor i.
void sgd_step_cpu(float* const* params, const float* const* grads, float* const* bufs,
                  const int64_t* numel, const int* group, int count, const SgdGroup* groups,
                  int num_groups, bool first_step);

// ---- CUDA --------------------------------------------------------------------------------------
// A device-side description of `num_lists` parallel lists of `numel.size()` tensors (EMA: 2 lists
// ema/model; SGD: 3 lists param/grad/buf), built once: the chunk table (which tensor and element
// range each thread block updates) is uploaded in the constructor and never changes. The tensor
// addresses are set per call with set_pointers(); they are uploaded (one small async copy from
// pinned memory) only when they differ from the last ones, so a training loop whose tensors keep
// their storage pays no copy at all. Owns its device and pinned buffers (RAII); not thread-safe;
// one table serves one CUDA device, and its uploads and launches must be ordered on one stream
// (or synchronised between streams): the device pointer table is rewritten in stream order.
class MultiTensorTable {
 public:
  // numel[i] > 0 elements (< 2^31) for tensor i; group[i] (empty: all 0) for SGD.
  MultiTensorTable(int num_lists, const std::vector<int64_t>& numel, const std::vector<int>& group = {});
  ~MultiTensorTable();
  MultiTensorTable(const MultiTensorTable&) = delete;
  MultiTensorTable& operator=(const MultiTensorTable&) = delete;

  int num_lists() const noexcept;
  int num_tensors() const noexcept;
  int num_chunks() const noexcept;
  int64_t total_elements() const noexcept;
  // ptrs[list * num_tensors() + i] is the device address of tensor i of list `list`.
  void set_pointers(void* const* ptrs, cudaStream_t stream);

  struct Impl;
  Impl& impl() noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// table: 2 lists (ema, model). One launch.
void ema_update_cuda(MultiTensorTable& table, double d, cudaStream_t stream);
// table: 3 lists (params, grads, bufs); groups[g] for group index g. One launch.
void sgd_step_cuda(MultiTensorTable& table, const SgdGroup* groups, int num_groups, bool first_step,
                   cudaStream_t stream);

}  // namespace yolocu::training

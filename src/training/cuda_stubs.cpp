// Built only without CUDA (YOLOCU_CUDA=OFF): the *_cuda entry points report kUnsupported.
#include "core/check.hpp"
#include "yolocu/training/ciou.hpp"
#include "yolocu/training/multi_tensor.hpp"
#include "yolocu/training/upsample.hpp"

namespace yolocu::training {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  ::yolocu::detail::fail(ErrorCode::kUnsupported, what, ": this build of yolocu_training has no CUDA kernels");
}
}  // namespace

void upsample2x_forward_cuda(FloatType, const void*, void*, const Upsample2xShape&, cudaStream_t) {
  no_cuda("upsample2x_forward_cuda");
}
void upsample2x_backward_cuda(FloatType, const void*, void*, const Upsample2xShape&, cudaStream_t) {
  no_cuda("upsample2x_backward_cuda");
}
void ciou_forward_cuda(FloatType, const CiouLevel*, int, void* const*, double, cudaStream_t) {
  no_cuda("ciou_forward_cuda");
}
void ciou_backward_cuda(FloatType, const CiouLevel*, int, const void* const*, void* const*, double, cudaStream_t) {
  no_cuda("ciou_backward_cuda");
}
struct MultiTensorTable::Impl {};
MultiTensorTable::MultiTensorTable(int, const std::vector<int64_t>&, const std::vector<int>&) {
  no_cuda("MultiTensorTable");
}
MultiTensorTable::~MultiTensorTable() = default;
int MultiTensorTable::num_lists() const noexcept { return 0; }
int MultiTensorTable::num_tensors() const noexcept { return 0; }
int MultiTensorTable::num_chunks() const noexcept { return 0; }
int64_t MultiTensorTable::total_elements() const noexcept { return 0; }
void MultiTensorTable::set_pointers(void* const*, cudaStream_t) { no_cuda("MultiTensorTable::set_pointers"); }
void ema_update_cuda(MultiTensorTable&, double, cudaStream_t) { no_cuda("ema_update_cuda"); }
void sgd_step_cuda(MultiTensorTable&, const SgdGroup*, int, bool, cudaStream_t) { no_cuda("sgd_step_cuda"); }

}  // namespace yolocu::training

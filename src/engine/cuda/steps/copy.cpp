// Step kCopy: a plain float32 copy (a Cast between float types).
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class CopyStep final : public Step {
 public:
  using Step::Step;
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    YOLOCU_CUDA_CHECK(cudaMemcpyAsync(ctx.ptr(st_.out[0]), ctx.ptr(st_.in[0]),
                                      static_cast<size_t>(shape_numel(ctx.shape_at(st_.out[0]))) * 4,
                                      cudaMemcpyDeviceToDevice, s));
  }
};

}  // namespace

std::unique_ptr<Step> make_copy_step(const engine::GpuStep& st) { return std::make_unique<CopyStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kView: Reshape / Flatten / Squeeze / Unsqueeze / Identity. Its output aliases its input's
// buffer (planning/buffers.cpp): no work.
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class ViewStep final : public Step {
 public:
  using Step::Step;
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    (void)ctx;
    (void)s;
  }
  int kernels(const LaunchContext& ctx) const override {
    (void)ctx;
    return 0;
  }
};

}  // namespace

std::unique_ptr<Step> make_view_step(const engine::GpuStep& st) { return std::make_unique<ViewStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kConcatNhwc: a channel Concat of NHWC values, a strided row copy per input; inputs that
// their producers wrote in place (copy-free Concat, planning/buffers.cpp) are not copied.
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class ConcatNhwcStep final : public Step {
 public:
  using Step::Step;
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const int64_t es = static_cast<int64_t>(ctx.es);
    const Shape ys = ctx.shape_at(st_.out[0]);
    const int64_t rows = ys[0] * ys[2] * ys[3];
    int64_t off = 0;
    for (int id : st_.in) {
      const int64_t c = ctx.val(id).shape[1];
      if (engine::written_in_place(ctx.sp, id, st_.out[0])) {
        off += c;
        continue;
      }
      // an input's own pixel pitch (a channel view of another buffer reads with that buffer's)
      ck::copy_rows(ctx.ptr(id), ctx.sp.channel_pitch[static_cast<size_t>(id)] * es,
                    static_cast<uint8_t*>(ctx.ptr(st_.out[0])) + off * es, ys[1] * es, rows, c * es, s);
      off += c;
    }
  }
  // Only the inputs not written in place.
  int kernels(const LaunchContext& ctx) const override {
    int k = 0;
    for (int id : st_.in) k += engine::written_in_place(ctx.sp, id, st_.out[0]) ? 0 : 1;
    return k;
  }
};

}  // namespace

std::unique_ptr<Step> make_concat_nhwc_step(const engine::GpuStep& st) { return std::make_unique<ConcatNhwcStep>(st); }

}  // namespace yolocu::cuda_engine_internal

// Step kMatMul: numpy.matmul of plain float32 values with broadcast batch axes (YOLO11's attention).
#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {
namespace {

namespace ck = cuda_kernels;

class MatMulStep final : public Step {
 public:
  using Step::Step;
  void setup(SetupContext& ctx) override {
    for (int id : st_.in) ctx.upload_const(id);
  }
  void launch(const LaunchContext& ctx, cudaStream_t s) const override {
    const Node& n = ctx.node(st_).node;
    const Shape as = ctx.shape_at(st_.in[0]), bs = ctx.shape_at(st_.in[1]), ys = ctx.shape_at(st_.out[0]);
    ck::MatMulParams p;
    p.m = static_cast<int>(as[as.size() - 2]);
    p.k = static_cast<int>(as.back());
    p.n = static_cast<int>(bs.back());
    YOLOCU_CHECK(bs[bs.size() - 2] == p.k, kInvalidArgument, n.describe(), ": shapes do not multiply");
    p.batch_rank = static_cast<int>(ys.size()) - 2;
    YOLOCU_CHECK(p.batch_rank <= ck::kMaxRank - 2, kUnsupported, n.describe(), ": too many batch axes");
    // Batch strides (in matrices) of each operand, 0 where it broadcasts.
    for (int k = 0; k < 2; ++k) {
      const Shape& xs = k == 0 ? as : bs;
      const int lead = p.batch_rank - (static_cast<int>(xs.size()) - 2);
      int64_t stride = 1;
      for (int d = p.batch_rank; d-- > 0;) {
        int64_t v = 0;
        if (d >= lead) {
          const int64_t dim = xs[static_cast<size_t>(d - lead)];
          v = dim == 1 && ys[static_cast<size_t>(d)] != 1 ? 0 : stride;
          stride *= dim;
        }
        (k == 0 ? p.a_batch_stride : p.b_batch_stride)[d] = v;
      }
    }
    for (int d = 0; d < p.batch_rank; ++d) p.batch_dims[d] = ys[static_cast<size_t>(d)];
    ck::matmul_plain(ctx.fptr(st_.in[0]), ctx.fptr(st_.in[1]), ctx.fptr(st_.out[0]), p, s);
  }
};

}  // namespace

std::unique_ptr<Step> make_matmul_step(const engine::GpuStep& st) { return std::make_unique<MatMulStep>(st); }

}  // namespace yolocu::cuda_engine_internal

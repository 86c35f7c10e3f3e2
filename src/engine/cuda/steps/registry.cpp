// The step registry: the factory of every engine::GpuStepKind, each defined in its own file here.
#include <iterator>
#include <memory>

#include "core/check.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {

using engine::GpuStep;
using engine::GpuStepKind;
using StepFactory = std::unique_ptr<Step> (*)(const GpuStep&);

std::unique_ptr<Step> make_conv_step(const GpuStep&);
std::unique_ptr<Step> make_to_nhwc_step(const GpuStep&);
std::unique_ptr<Step> make_to_plain_step(const GpuStep&);
std::unique_ptr<Step> make_eltwise_nhwc_step(const GpuStep&);
std::unique_ptr<Step> make_concat_nhwc_step(const GpuStep&);
std::unique_ptr<Step> make_split_nhwc_step(const GpuStep&);
std::unique_ptr<Step> make_maxpool_step(const GpuStep&);
std::unique_ptr<Step> make_sppf_step(const GpuStep&);
std::unique_ptr<Step> make_resize_step(const GpuStep&);
std::unique_ptr<Step> make_unary_step(const GpuStep&);
std::unique_ptr<Step> make_binary_step(const GpuStep&);
std::unique_ptr<Step> make_gather_step(const GpuStep&);
std::unique_ptr<Step> make_concat_step(const GpuStep&);
std::unique_ptr<Step> make_softmax_step(const GpuStep&);
std::unique_ptr<Step> make_matmul_step(const GpuStep&);
std::unique_ptr<Step> make_copy_step(const GpuStep&);
std::unique_ptr<Step> make_view_step(const GpuStep&);
std::unique_ptr<Step> make_detect_tail_step(const GpuStep&);

namespace {

struct Entry {
  GpuStepKind kind;
  StepFactory make;
};

constexpr Entry kRegistry[] = {
    {GpuStepKind::kConv, make_conv_step},
    {GpuStepKind::kToNhwc, make_to_nhwc_step},
    {GpuStepKind::kToPlain, make_to_plain_step},
    {GpuStepKind::kEltwiseNhwc, make_eltwise_nhwc_step},
    {GpuStepKind::kConcatNhwc, make_concat_nhwc_step},
    {GpuStepKind::kSplitNhwc, make_split_nhwc_step},
    {GpuStepKind::kMaxPool, make_maxpool_step},
    {GpuStepKind::kSppf, make_sppf_step},
    {GpuStepKind::kResize, make_resize_step},
    {GpuStepKind::kUnary, make_unary_step},
    {GpuStepKind::kBinary, make_binary_step},
    {GpuStepKind::kGather, make_gather_step},
    {GpuStepKind::kConcat, make_concat_step},
    {GpuStepKind::kSoftmax, make_softmax_step},
    {GpuStepKind::kMatMul, make_matmul_step},
    {GpuStepKind::kCopy, make_copy_step},
    {GpuStepKind::kView, make_view_step},
    {GpuStepKind::kDetectTail, make_detect_tail_step},
};

}  // namespace

std::unique_ptr<Step> make_step(const GpuStep& st) {
  for (const Entry& e : kRegistry)
    if (e.kind == st.kind) return e.make(st);
  detail::fail(ErrorCode::kInternal, "GPU engine: no step implementation for kind ", engine::gpu_step_kind_name(st.kind),
               " (", st.label, ")");
}

}  // namespace yolocu::cuda_engine_internal

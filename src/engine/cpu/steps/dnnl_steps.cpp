// Steps that are one oneDNN primitive besides the convolution: the layout reorder, Sigmoid as
// oneDNN's JIT logistic (vectorised exp), MatMul and Softmax of plain values (YOLO11's C2PSA
// attention, which the reference ops would compute element by element).
#include "engine/cpu/cpu_layout.hpp"
#include "engine/cpu/steps/cpu_step.hpp"

namespace yolocu::engine::cpu {

// A layout twin: blocked -> plain or plain -> blocked, the same shape.
std::unique_ptr<CpuStep> make_reorder_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  const Shape& shape = b.value(spec.in[0]).shape;
  dnnl::memory src(act_md(shape, b.blocked(spec.in[0])), b.eng, b.ptr(spec.in[0]));
  dnnl::memory dst(act_md(shape, b.blocked(spec.out[0])), b.eng, b.ptr(spec.out[0]));
  dnnl::reorder prim(src, dst);
  return std::make_unique<PrimitiveStep>(std::move(prim),
                                         std::unordered_map<int, dnnl::memory>{{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}},
                                         "Reorder");
}

// Sigmoid over the whole buffer, either layout (a padded blocked buffer has the same size).
std::unique_ptr<CpuStep> make_eltwise_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  const PlanNode& pn = b.sp.plan.nodes[static_cast<size_t>(spec.node)];
  const size_t bytes = cpu_value_bytes(b.sp, spec.in[0]);
  const dnnl::memory::desc md({static_cast<dnnl::memory::dim>(bytes / 4)}, dnnl::memory::data_type::f32,
                              dnnl::memory::format_tag::x);
  const dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_logistic, md, 0.f,
                                      0.f);
  const dnnl::eltwise_forward::primitive_desc pd(d, b.eng);
  return std::make_unique<PrimitiveStep>(
      dnnl::eltwise_forward(pd),
      std::unordered_map<int, dnnl::memory>{{DNNL_ARG_SRC, dnnl::memory(md, b.eng, b.ptr(spec.in[0]))},
                                            {DNNL_ARG_DST, dnnl::memory(md, b.eng, b.ptr(spec.out[0]))}},
      pn.node.op_type.c_str());
}

// MatMul of two plain operands with the same batch axes (cpu_plan.cpp's matmul_on_dnnl).
std::unique_ptr<CpuStep> make_matmul_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  const dnnl::memory::desc a = act_md(b.value(spec.in[0]).shape, false), w = act_md(b.value(spec.in[1]).shape, false),
                           y = act_md(b.value(spec.out[0]).shape, false);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, w, y), b.eng);
  return std::make_unique<PrimitiveStep>(
      dnnl::matmul(pd),
      std::unordered_map<int, dnnl::memory>{{DNNL_ARG_SRC, dnnl::memory(a, b.eng, b.ptr(spec.in[0]))},
                                            {DNNL_ARG_WEIGHTS, dnnl::memory(w, b.eng, b.ptr(spec.in[1]))},
                                            {DNNL_ARG_DST, dnnl::memory(y, b.eng, b.ptr(spec.out[0]))}},
      "MatMul");
}

// Softmax over the last axis of a plain value (cpu_plan.cpp's softmax_on_dnnl takes no other).
std::unique_ptr<CpuStep> make_softmax_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  const Shape& shape = b.value(spec.in[0]).shape;
  const dnnl::memory::desc md = act_md(shape, false);
  const dnnl::softmax_forward::primitive_desc pd(
      dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, md, static_cast<int>(shape.size()) - 1), b.eng);
  return std::make_unique<PrimitiveStep>(
      dnnl::softmax_forward(pd),
      std::unordered_map<int, dnnl::memory>{{DNNL_ARG_SRC, dnnl::memory(md, b.eng, b.ptr(spec.in[0]))},
                                            {DNNL_ARG_DST, dnnl::memory(md, b.eng, b.ptr(spec.out[0]))}},
      "Softmax");
}

}  // namespace yolocu::engine::cpu

// The convolution step: one oneDNN convolution with SiLU (swish), the Detect head's sigmoid
// (logistic) and a residual Add (binary add) as post-ops, reading and writing either layout; its
// weights reordered once, at build time, into the layout the chosen kernel wants. Simulated INT8
// (CpuStepSpec::int8_x_scale > 0): weights quantised -> dequantised before that reorder, and the
// input quantised -> dequantised into the step's own buffer before each run (quant/fake_quant.hpp).
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/check.hpp"
#include "engine/cpu/cpu_layout.hpp"
#include "engine/cpu/steps/cpu_step.hpp"
#include "engine/quant/fake_quant.hpp"

namespace yolocu::engine::cpu {
namespace {

using dnnl::memory;

struct ConvDescs {
  memory::desc src, dst, w_user, w_any, bias, residual;
};

ConvDescs conv_descs(const CpuStepSpec& spec, const CpuStepBuild& b) {
  const PlanNode& pn = b.sp.plan.nodes[static_cast<size_t>(spec.node)];
  const int64_t group = pn.node.attr_int("group", 1);
  const Shape& ws = b.value(pn.in[1]).shape;
  ConvDescs d;
  d.src = act_md(b.value(pn.in[0]).shape, b.blocked(spec.in[0]));
  d.dst = act_md(b.value(spec.out[0]).shape, b.blocked(spec.out[0]));
  memory::dims wdims = to_dims(ws);
  memory::format_tag wtag = memory::format_tag::oihw;
  if (group > 1) {
    wdims = {group, ws[0] / group, ws[1], ws[2], ws[3]};
    wtag = memory::format_tag::goihw;
  }
  d.w_user = memory::desc(wdims, memory::data_type::f32, wtag);
  d.w_any = memory::desc(wdims, memory::data_type::f32, memory::format_tag::any);
  d.bias = memory::desc({ws[0]}, memory::data_type::f32, memory::format_tag::x);
  if (spec.residual >= 0) d.residual = act_md(b.value(spec.residual).shape, b.blocked(spec.residual));
  return d;
}

dnnl::convolution_forward::primitive_desc conv_primitive_desc(const CpuStepSpec& spec, const CpuStepBuild& b,
                                                              const ConvDescs& d, int* post_ops) {
  const PlanNode& pn = b.sp.plan.nodes[static_cast<size_t>(spec.node)];
  const Node& n = pn.node;
  const bool has_bias = pn.in.size() > 2 && pn.in[2] >= 0;
  const auto s = n.attr_ints("strides", {1, 1});
  const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
  const auto dl = n.attr_ints("dilations", {1, 1});
  dnnl::primitive_attr attr;
  dnnl::post_ops po;
  if (spec.fused_silu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
  if (spec.fused_logistic) po.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
  if (spec.residual >= 0) po.append_binary(dnnl::algorithm::binary_add, d.residual);
  attr.set_post_ops(po);
  *post_ops = po.len();
  const memory::dims strides{s[0], s[1]}, dil{dl[0] - 1, dl[1] - 1}, pl{pads[0], pads[1]}, pr{pads[2], pads[3]};
  const auto desc = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                              dnnl::algorithm::convolution_direct, d.src, d.w_any,
                                                              d.bias, d.dst, strides, dil, pl, pr)
                             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                              dnnl::algorithm::convolution_direct, d.src, d.w_any,
                                                              d.dst, strides, dil, pl, pr);
  return dnnl::convolution_forward::primitive_desc(desc, attr, b.eng);
}

struct FreeFloats {
  void operator()(float* p) const { std::free(p); }
};

// The convolution of simulated INT8: its input quantised -> dequantised into `src_` first.
class FakeQuantConvStep : public CpuStep {
 public:
  FakeQuantConvStep(dnnl::primitive prim, std::unordered_map<int, memory> args, const char* name, const float* input,
                    std::unique_ptr<float, FreeFloats> src, size_t numel, float scale)
      : prim_(std::move(prim)), args_(std::move(args)), name_(name), input_(input), src_(std::move(src)),
        numel_(numel), scale_(scale) {}
  void run(dnnl::stream& strm) override {
    quant::fake_quantize_tensor(input_, src_.get(), numel_, scale_);
    prim_.execute(strm, args_);
  }
  const char* profile_name() const override { return name_; }

 private:
  dnnl::primitive prim_;
  std::unordered_map<int, memory> args_;
  const char* name_;
  const float* input_;
  std::unique_ptr<float, FreeFloats> src_;
  size_t numel_;
  float scale_;
};

}  // namespace

std::unique_ptr<CpuStep> make_conv_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  const PlanNode& pn = b.sp.plan.nodes[static_cast<size_t>(spec.node)];
  const ConvDescs d = conv_descs(spec, b);
  int post_ops = 0;
  const auto pd = conv_primitive_desc(spec, b, d, &post_ops);
  dnnl::convolution_forward prim(pd);
  std::unordered_map<int, memory> args;
  // Weights reordered once into the layout the chosen kernel wants (simulated INT8: a quantised ->
  // dequantised copy).
  const bool int8 = spec.int8_x_scale > 0;
  const Tensor& weights = b.value(pn.in[1]).value;
  std::vector<float> wq;
  if (int8) {
    wq.assign(weights.data_as<float>(), weights.data_as<float>() + weights.numel());
    const int64_t k = weights.shape()[0];
    quant::fake_quantize_weights(wq.data(), k, weights.numel() / k, spec.int8_w_scales.data());
  }
  memory w_user(d.w_user, b.eng, int8 ? static_cast<void*>(wq.data()) : const_cast<void*>(weights.data()));
  memory w_mem(pd.weights_desc(), b.eng);
  dnnl::reorder(w_user, w_mem).execute(b.strm, w_user, w_mem);
  b.stats.weight_bytes += pd.weights_desc().get_size();
  std::unique_ptr<float, FreeFloats> src;
  const size_t src_numel = cpu_value_bytes(b.sp, spec.in[0]) / sizeof(float);
  if (int8) {
    src.reset(static_cast<float*>(std::aligned_alloc(64, (src_numel * sizeof(float) + 63) / 64 * 64)));
    YOLOCU_CHECK(src, kOutOfMemory, "cannot allocate the simulated INT8 input of ", pn.node.describe());
  }
  args[DNNL_ARG_SRC] = memory(d.src, b.eng, int8 ? static_cast<void*>(src.get()) : b.ptr(spec.in[0]));
  args[DNNL_ARG_WEIGHTS] = w_mem;
  if (pn.in.size() > 2 && pn.in[2] >= 0) {
    memory bias(d.bias, b.eng);
    std::memcpy(bias.get_data_handle(), b.value(pn.in[2]).value.data(), d.bias.get_size());
    args[DNNL_ARG_BIAS] = bias;
  }
  args[DNNL_ARG_DST] = memory(d.dst, b.eng, b.ptr(spec.out[0]));
  if (spec.residual >= 0)
    args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_ops - 1) | DNNL_ARG_SRC_1] = memory(d.residual, b.eng, b.ptr(spec.residual));
  b.strm.wait();
  if (int8)
    return std::make_unique<FakeQuantConvStep>(std::move(prim), std::move(args), pn.node.op_type.c_str(),
                                               b.fptr(spec.in[0]), std::move(src), src_numel, spec.int8_x_scale);
  return std::make_unique<PrimitiveStep>(std::move(prim), std::move(args), pn.node.op_type.c_str());
}

}  // namespace yolocu::engine::cpu

// Simulated INT8 (fake_quant.hpp).
#include "engine/quant/fake_quant.hpp"

#include <cstdint>

#include "core/check.hpp"
#include "engine/quant/int8_math.hpp"

namespace yolocu::engine::quant {

int attach_int8_scales(engine::cpu::CpuStepPlan& sp, const Int8Calibration& c) {
  int simulated = 0;
  for (engine::cpu::CpuStepSpec& s : sp.steps) {
    if (s.kind != engine::cpu::CpuStepKind::kConv) continue;
    const PlanNode& pn = sp.plan.nodes[static_cast<size_t>(s.node)];
    const Int8ConvScales* conv = c.conv(pn.node.name);
    YOLOCU_CHECK(conv, kInvalidArgument, "the INT8 calibration has no scales for ", pn.node.describe(),
                 " (made for another model?)");
    if (conv->keep_float) continue;
    const Int8TensorScale* x = c.tensor(conv->input);
    YOLOCU_CHECK(x, kInvalidArgument, "the INT8 calibration has no scale for tensor '", conv->input, "', the input of ",
                 pn.node.describe());
    const Shape& ws = sp.plan.values[static_cast<size_t>(pn.in[1])].shape;
    YOLOCU_CHECK(!ws.empty() && static_cast<int64_t>(conv->weight_scales.size()) == ws[0], kInvalidArgument,
                 "the INT8 calibration has ", conv->weight_scales.size(), " weight scales for ", pn.node.describe(),
                 ", which has ", ws.empty() ? 0 : ws[0], " output channels");
    s.int8_x_scale = x->scale;
    s.int8_w_scales = conv->weight_scales;
    ++simulated;
  }
  return simulated;
}

void fake_quantize_weights(float* w, int64_t k, int64_t per_channel, const float* scales) {
  for (int64_t i = 0; i < k; ++i) {
    const float scale = scales[i];
    for (int64_t j = 0; j < per_channel; ++j) w[i * per_channel + j] = fake_quantize(w[i * per_channel + j], scale);
  }
}

void fake_quantize_tensor(const float* src, float* dst, size_t n, float scale) {
  const int64_t count = static_cast<int64_t>(n);
#pragma omp parallel for schedule(static) if (count > 65536)
  for (int64_t i = 0; i < count; ++i) dst[i] = fake_quantize(src[i], scale);
}

}  // namespace yolocu::engine::quant

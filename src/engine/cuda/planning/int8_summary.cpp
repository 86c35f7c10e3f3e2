// plan_int8_engine (yolocu/int8.hpp): the GPU engine's INT8 planning of a model and calibration,
// without a GPU, as the engine plans it with its default options on a Hopper GPU.
#include "core/check.hpp"
#include "engine/cuda/gpu_steps.hpp"
#include "engine/plan.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"

namespace yolocu {

Int8EnginePlan plan_int8_engine(const Model& model, const Int8Calibration& c, int height, int width) {
  check_int8_calibration(c, model);
  YOLOCU_CHECK(model.graph.inputs.size() == 1 && model.graph.inputs[0].dims.size() == 4, kUnsupported,
               "plan_int8_engine: the model has no single N, C, H, W input");
  const ValueInfo& in = model.graph.inputs[0];
  const int64_t channels = in.dims[1].is_static() ? in.dims[1].value : 3;
  engine::GpuStepOptions o;
  o.act_elem_size = 2;
  o.fuse_detect_tail = o.fuse_v8_tail = o.fuse_attention = true;
  o.attention_smem = size_t{227} << 10;  // a Hopper GPU's shared memory per block (the engine asks its device)
  o.int8 = &c;
  const engine::GpuStepPlan sp = engine::plan_gpu_steps(
      engine::build_plan(model, {{1, channels, engine::planned_input_dim(in.dims[2], height),
                                  engine::planned_input_dim(in.dims[3], width)}}),
      o);
  Int8EnginePlan p;
  for (const engine::GpuStep& st : sp.steps)
    if (st.kind == engine::GpuStepKind::kConvInt8) p.int8_convs.push_back(sp.plan.nodes[static_cast<size_t>(st.node)].node.name);
  for (const engine::Int8FloatConv& f : sp.int8_float_convs)
    p.float_convs.emplace_back(sp.plan.nodes[static_cast<size_t>(f.node)].node.name, f.why);
  p.quantize_steps = sp.quantize_steps;
  p.int8_concats = sp.int8_concats;
  return p;
}

}  // namespace yolocu

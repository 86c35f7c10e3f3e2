// CPU references of the multi-tensor EMA and SGD: loops over tensors and elements.
#include "core/check.hpp"
#include "training/sgd_math.hpp"
#include "yolocu/training/multi_tensor.hpp"

namespace yolocu::training {

void ema_update_cpu(float* const* ema, const float* const* model, const int64_t* numel, int count, double d) {
  YOLOCU_CHECK(count >= 0, kInvalidArgument, "ema_update: negative count");
  const float df = static_cast<float>(d), omd = static_cast<float>(1.0 - d);
  for (int t = 0; t < count; ++t)
    for (int64_t i = 0; i < numel[t]; ++i) ema[t][i] = detail::ema_element(ema[t][i], model[t][i], df, omd);
}

void sgd_step_cpu(float* const* params, const float* const* grads, float* const* bufs, const int64_t* numel,
                  const int* group, int count, const SgdGroup* groups, int num_groups, bool first_step) {
  YOLOCU_CHECK(count >= 0 && num_groups >= 1 && num_groups <= kMaxSgdGroups, kInvalidArgument,
               "sgd_step: count ", count, ", num_groups ", num_groups);
  for (int t = 0; t < count; ++t) {
    const int gi = group ? group[t] : 0;
    YOLOCU_CHECK(gi >= 0 && gi < num_groups, kInvalidArgument, "sgd_step: tensor ", t, " has group ", gi);
    const SgdGroup& s = groups[gi];
    const detail::SgdConsts k{static_cast<float>(s.lr), static_cast<float>(s.momentum),
                              static_cast<float>(1.0 - s.dampening), static_cast<float>(s.weight_decay),
                              s.nesterov ? 1 : 0};
    for (int64_t i = 0; i < numel[t]; ++i) {
      float dummy = 0.0f;
      float& b = bufs && bufs[t] ? bufs[t][i] : dummy;
      detail::sgd_element(params[t][i], grads[t][i], b, k, first_step);
    }
  }
}

}  // namespace yolocu::training

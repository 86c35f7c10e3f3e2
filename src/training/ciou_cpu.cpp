// CPU reference of the fused CIoU: a loop over the box pairs of each level.
#include "core/check.hpp"
#include "training/ciou_math.hpp"
#include "yolocu/training/ciou.hpp"

namespace yolocu::training {
namespace {

void check_levels(FloatType type, const CiouLevel* levels, int num_levels) {
  YOLOCU_CHECK(type == FloatType::kFloat32 || type == FloatType::kFloat64, kUnsupported,
               "ciou: only float32 and float64 are supported, got ", float_type_name(type));
  YOLOCU_CHECK(num_levels >= 0 && num_levels <= kCiouMaxLevels, kInvalidArgument, "ciou: num_levels ",
               num_levels, " outside [0, ", kCiouMaxLevels, "]");
  for (int l = 0; l < num_levels; ++l)
    YOLOCU_CHECK(levels[l].n >= 0 && (levels[l].n == 0 || (levels[l].pbox && levels[l].tbox)),
                 kInvalidArgument, "ciou: level ", l, " has n = ", levels[l].n, " or null boxes");
}

template <typename T>
void forward(const CiouLevel* levels, int num_levels, void* const* out, double eps) {
  for (int l = 0; l < num_levels; ++l) {
    const T* p = static_cast<const T*>(levels[l].pbox);
    const T* t = static_cast<const T*>(levels[l].tbox);
    T* o = static_cast<T*>(out[l]);
    for (int64_t i = 0; i < levels[l].n; ++i)
      o[i] = detail::ciou_terms<T>(p + 4 * i, t + 4 * i, eps).ciou;
  }
}

template <typename T>
void backward(const CiouLevel* levels, int num_levels, const void* const* grad, void* const* grad_pbox,
              double eps) {
  for (int l = 0; l < num_levels; ++l) {
    const T* p = static_cast<const T*>(levels[l].pbox);
    const T* t = static_cast<const T*>(levels[l].tbox);
    const T* g = static_cast<const T*>(grad[l]);
    T* o = static_cast<T*>(grad_pbox[l]);
    for (int64_t i = 0; i < levels[l].n; ++i)
      detail::ciou_grad<T>(p + 4 * i, t + 4 * i, eps, g[i], o + 4 * i);
  }
}

}  // namespace

void ciou_forward_cpu(FloatType type, const CiouLevel* levels, int num_levels, void* const* ciou,
                      double eps) {
  check_levels(type, levels, num_levels);
  if (type == FloatType::kFloat32)
    forward<float>(levels, num_levels, ciou, eps);
  else
    forward<double>(levels, num_levels, ciou, eps);
}

void ciou_backward_cpu(FloatType type, const CiouLevel* levels, int num_levels,
                       const void* const* grad_ciou, void* const* grad_pbox, double eps) {
  check_levels(type, levels, num_levels);
  if (type == FloatType::kFloat32)
    backward<float>(levels, num_levels, grad_ciou, grad_pbox, eps);
  else
    backward<double>(levels, num_levels, grad_ciou, grad_pbox, eps);
}

}  // namespace yolocu::training

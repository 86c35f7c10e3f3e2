#include "yolocu/training/common.hpp"

namespace yolocu::training {

const char* float_type_name(FloatType t) noexcept {
  switch (t) {
    case FloatType::kFloat32: return "float32";
    case FloatType::kFloat16: return "float16";
    case FloatType::kBFloat16: return "bfloat16";
    case FloatType::kFloat64: return "float64";
  }
  return "?";
}

int float_type_size(FloatType t) noexcept {
  switch (t) {
    case FloatType::kFloat32: return 4;
    case FloatType::kFloat16: return 2;
    case FloatType::kBFloat16: return 2;
    case FloatType::kFloat64: return 8;
  }
  return 0;
}

bool have_cuda_kernels() noexcept {
#ifdef YOLOCU_TRAINING_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace yolocu::training

// conv_int8_sm90.hpp in a build without CUTLASS 3.5+ (or without its tools/util headers): no
// kernels, every problem refused with the reason.
#include <string>
#include <vector>

#include "core/check.hpp"
#include "engine/cuda/int8/conv_int8_sm90.hpp"

namespace yolocu::engine {

const std::vector<std::string>& int8_sm90_kernels() {
  static const std::vector<std::string> none;
  return none;
}

std::string int8_sm90_unsupported(const Int8ConvArgs& /*a*/, int /*kernel*/) {
  return "this build has no sm90 INT8 kernels (they need CUTLASS 3.5 or later)";
}

void int8_sm90_run(const Int8ConvArgs& a, int kernel, cudaStream_t /*stream*/) {
  YOLOCU_CHECK(false, kUnsupported, "int8_sm90_run: ", int8_sm90_unsupported(a, kernel));
}

}  // namespace yolocu::engine

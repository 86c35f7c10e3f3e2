#include "engine/cpu/cpu_layout.hpp"

#include <cstdlib>
#include <cstring>

namespace yolocu::engine::cpu {

int block_size() {
  static const int b = [] {
    const char* env = std::getenv("YOLOCU_CPU_BLOCK");
    if (env && (std::strcmp(env, "8") == 0 || std::strcmp(env, "16") == 0)) return std::atoi(env);
    return __builtin_cpu_supports("avx512f") ? 16 : 8;
  }();
  return b;
}

dnnl::memory::desc act_md(const Shape& s, bool blocked) {
  const auto tag = !blocked ? dnnl::memory::format_tag::nchw
                   : block_size() == 16 ? dnnl::memory::format_tag::nChw16c
                                        : dnnl::memory::format_tag::nChw8c;
  return dnnl::memory::desc(to_dims(s), dnnl::memory::data_type::f32, tag);
}

}  // namespace yolocu::engine::cpu

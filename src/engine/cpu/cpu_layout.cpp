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
  using tag = dnnl::memory::format_tag;
  // plain: row-major by its format tag (abcd = nchw), for which oneDNN picks its JIT kernels
  static constexpr tag kPlain[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  const tag t = !blocked ? kPlain[s.size() - 1] : block_size() == 16 ? tag::nChw16c : tag::nChw8c;
  return dnnl::memory::desc(to_dims(s), dnnl::memory::data_type::f32, t);
}

}  // namespace yolocu::engine::cpu

#include "engine/cuda/tactics/conv_problem.hpp"

#include <cstdio>
#include <string>

namespace yolocu::engine {

std::string ConvProblem::signature() const {
  char b[192];
  std::snprintf(b, sizeof b, "%s x%dx%dx%d w%dx%dx%d p%dx%d s%dx%d d%dx%d g%d%s%s%s", half ? "fp16" : "fp32", c, h, w,
                k, r, s, pad_h, pad_w, str_h, str_w, dil_h, dil_w, group, bias ? "+bias" : "", silu ? "+silu" : "",
                residual ? "+res" : "");
  std::string sig = b;
  if (!y_packed()) sig += " yp" + std::to_string(y_pitch());
  if (x_pitch() != c) sig += " xp" + std::to_string(x_pitch());
  if (residual && r_pitch() != k) sig += " rp" + std::to_string(r_pitch());
  return sig;
}

double ConvProblem::flops() const {
  return 2.0 * n * p * q * k * static_cast<double>(c / group) * r * s;
}

double ConvProblem::min_bytes() const {
  const double es = half ? 2 : 4;
  const double x = static_cast<double>(n) * h * w * c, wt = static_cast<double>(k) * (c / group) * r * s,
               y = static_cast<double>(n) * p * q * k;
  return es * (x + wt + y * (residual ? 2 : 1));
}

}  // namespace yolocu::engine

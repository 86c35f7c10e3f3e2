// Host side of the INT8 convolution (conv_int8_kernel.hpp): what the kernel refuses, tile ids, the
// weights' channel padding.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "engine/cuda/int8/conv_int8_kernel.hpp"

namespace yolocu::engine {
namespace {

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
bool finite_positive(float v) { return v > 0.f && v <= 3.4e38f; }

std::string shape_problem(const Int8ConvArgs& a) {
  if (a.n <= 0 || a.c <= 0 || a.h <= 0 || a.w_ <= 0 || a.k <= 0 || a.r <= 0 || a.s <= 0 || a.p <= 0 || a.q <= 0)
    return "sizes must be positive";
  if (a.str_h < 1 || a.str_w < 1 || a.dil_h < 1 || a.dil_w < 1 || a.pad_h < 0 || a.pad_w < 0)
    return "strides and dilations must be >= 1, pads >= 0";
  if (a.c % 16 != 0) return "input channels " + std::to_string(a.c) + " not a multiple of 16 (pad them with zeros)";
  if (a.k % 8 != 0) return "output channels " + std::to_string(a.k) + " not a multiple of 8";
  const int64_t p = (int64_t{a.h} + 2 * a.pad_h - int64_t{a.dil_h} * (a.r - 1) - 1) / a.str_h + 1;
  const int64_t q = (int64_t{a.w_} + 2 * a.pad_w - int64_t{a.dil_w} * (a.s - 1) - 1) / a.str_w + 1;
  if (p != a.p || q != a.q)
    return "output " + std::to_string(a.p) + "x" + std::to_string(a.q) + " does not match the input, filter, pads and strides (" +
           std::to_string(p) + "x" + std::to_string(q) + ")";
  if (a.y_pitch != 0 && (a.y_pitch < a.k || a.y_pitch % 8 != 0))
    return "output pitch " + std::to_string(a.y_pitch) + " must be 0 or a multiple of 8 >= k";
  const int64_t kd = int64_t{a.r} * a.s * a.c;
  if (int64_t{a.n} * a.p * a.q >= (int64_t{1} << 31) || kd * a.k >= (int64_t{1} << 31) ||
      int64_t{a.n} * a.h * a.w_ * a.c >= (int64_t{1} << 40) || (a.p + int64_t{a.r} * a.dil_h) * a.str_h >= (1 << 28) ||
      (a.q + int64_t{a.s} * a.dil_w) * a.str_w >= (1 << 28))
    return "problem too large";
  return {};
}

}  // namespace

std::string int8_conv_unsupported(const Int8ConvArgs& a) {
  std::string why = shape_problem(a);
  if (!why.empty()) return why;
  if (!a.x || !a.w || !a.scale || !a.y) return "x, w, scale and y are required";
  if (!aligned(a.x, 16) || !aligned(a.w, 16)) return "x and w must be 16-byte aligned";
  const bool has_res = a.residual_type != Int8Residual::kNone;
  if (has_res != (a.residual != nullptr)) return "residual pointer and residual type disagree";
  // the epilogue moves 4 channels at once
  const uintptr_t y_align = a.out == Int8Out::kInt32 ? 16 : a.out == Int8Out::kHalf ? 8 : 4;
  if (!aligned(a.y, y_align)) return "y not aligned to " + std::to_string(y_align) + " bytes";
  if (has_res && !aligned(a.residual, a.residual_type == Int8Residual::kHalf ? 8 : 4)) return "residual misaligned";
  if (a.out == Int8Out::kInt8 && !finite_positive(a.y_scale)) return "y_scale must be positive and finite";
  if (a.y2) {
    if (a.out == Int8Out::kInt32 || a.out2 == Int8Out::kInt32) return "a second output beside int32 sums, or of them";
    if (!aligned(a.y2, a.out2 == Int8Out::kHalf ? 8 : 4)) return "y2 misaligned";
    const int pitch2 = a.y2_pitch ? a.y2_pitch : a.k;
    if (pitch2 < a.k || pitch2 % 8 != 0) return "y2_pitch " + std::to_string(pitch2) + " (a multiple of 8, >= k)";
    if (a.out2 == Int8Out::kInt8 && !finite_positive(a.y2_scale)) return "y2_scale must be positive and finite";
  }
  if (a.residual_type == Int8Residual::kInt8 && !finite_positive(a.residual_scale))
    return "residual_scale must be positive and finite";
  if (a.split_k < 1 || a.split_k > 64) return "split_k " + std::to_string(a.split_k) + " not in 1..64";
  const size_t ws = int8_conv_workspace(a);
  if (ws > 0 && (!a.workspace || !aligned(a.workspace, 16) || a.workspace_bytes < ws))
    return "split_k " + std::to_string(a.split_k) + " needs a 16-byte aligned workspace of " + std::to_string(ws) + " bytes";
  return {};
}

size_t int8_conv_workspace(const Int8ConvArgs& a) {
  if (a.split_k <= 1 || !shape_problem(a).empty()) return 0;
  return static_cast<size_t>(a.split_k) * static_cast<size_t>(a.n) * a.p * a.q * a.k * sizeof(int32_t);
}

std::string int8_tile_id(const Int8Tile& t) {
  return "int8:tb" + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "-w" + std::to_string(t.warps_m) + "x" +
         std::to_string(t.warps_n) + "-s" + std::to_string(t.stages);
}

std::vector<int8_t> int8_pad_krsc(const int8_t* w, int k, int r, int s, int c, int c_pad) {
  YOLOCU_CHECK(k > 0 && r > 0 && s > 0 && c > 0 && c_pad >= c, kInvalidArgument, "int8_pad_krsc: bad sizes k ", k,
               " r ", r, " s ", s, " c ", c, " c_pad ", c_pad);
  const size_t taps = static_cast<size_t>(k) * r * s;
  std::vector<int8_t> out(taps * static_cast<size_t>(c_pad), 0);
  for (size_t t = 0; t < taps; ++t) std::memcpy(out.data() + t * c_pad, w + t * c, static_cast<size_t>(c));
  return out;
}

}  // namespace yolocu::engine

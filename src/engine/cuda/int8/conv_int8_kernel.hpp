// yolocu's INT8 convolution (conv_int8_kernel.cu): an implicit GEMM on sm_80+ tensor cores
// (mma.sync m16n8k32, int8 x int8 -> int32), for one fused layer
//   y = act(conv(x, w) * scale + bias) (+ residual), int32 accumulation, then int8 or fp16 out.
// The epilogue's float math is int8_math.hpp's (bit-identical on host and device but for SiLU,
// which the device approximates within int8::kSiluDeviceTolerance).
//
// Layouts and what the caller owns:
//   x   NHWC int8 [n, h, w, c], c a multiple of 16 (pad the channels with zeros: int8_convert.hpp's
//       quantise kernel writes a padded layout; int8_pad_krsc pads the weights to match);
//   w   KRSC int8 [k, r, s, c] (the same padded c);
//   scale float32 [k]: x_scale * w_scale[k] (per-output-channel weight scales; symmetric, zero points 0);
//   bias  float32 [k] or null;
//   residual NHWC [n, p, q, k] packed, int8 (with residual_scale) or fp16, or null;
//   y   NHWC [n, p, q], pixels y_pitch elements apart (0: k), int8 (y_scale), fp16 or int32 (the raw
//       accumulators, for tests); k a multiple of 8, y_pitch a multiple of 8 >= k;
//   y2  optional: the same values again, int8 (y2_scale) or fp16 (Int8ConvArgs::y2).
// Alignment (cudaMalloc's is enough): x and w 16 bytes; y 4 (int8), 8 (fp16) or 16 (int32) bytes;
// residual 4 (int8) or 8 (fp16) bytes.
// Every launch runs on the caller's stream, never synchronises, and is capturable in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace yolocu::engine {

enum class Int8Out { kInt8, kHalf, kInt32 };
enum class Int8Residual { kNone, kInt8, kHalf };

struct Int8ConvArgs {
  const int8_t* x = nullptr;
  const int8_t* w = nullptr;
  const float* scale = nullptr;
  const float* bias = nullptr;
  const void* residual = nullptr;
  void* y = nullptr;
  Int8Residual residual_type = Int8Residual::kNone;
  Int8Out out = Int8Out::kInt8;
  float residual_scale = 1.f;  // int8 residual: its real value is r * residual_scale
  float y_scale = 1.f;         // int8 output: q = saturate(round_half_even(v / y_scale))
  int n = 0, c = 0, h = 0, w_ = 0, k = 0, r = 1, s = 1, p = 0, q = 0;
  int y_pitch = 0;
  int pad_h = 0, pad_w = 0, str_h = 1, str_w = 1, dil_h = 1, dil_w = 1;
  bool silu = false;
  // Split-K: the reduction in up to split_k slices run side by side (1..64; for layers whose grid
  // is too small for the GPU), their int32 sums in `workspace` (int8_conv_workspace bytes, 16-byte
  // aligned), then a second launch adds them and runs the epilogue. Same results as split_k = 1.
  int split_k = 1;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // A second output of the same values (null: none), for a layer whose readers need two forms
  // (engine/quant/int8_regions.hpp): int8 at y2_scale or fp16, NHWC [n, p, q], pixels y2_pitch
  // elements apart (0: k), aligned like y. Its own format and scale; int32 is not offered.
  void* y2 = nullptr;
  Int8Out out2 = Int8Out::kHalf;
  float y2_scale = 1.f;
  int y2_pitch = 0;
};

// One block shape of the GEMM: bm output pixels x bn output channels, warps_m x warps_n warps, a
// reduction step of 64 bytes, `stages` steps in flight (cp.async).
struct Int8Tile {
  int bm, bn, warps_m, warps_n, stages;
};
// The instantiated shapes; an index into this list names a tile in int8_conv_run. Ids:
// "int8:tb<bm>x<bn>-w<warps_m>x<warps_n>-s<stages>".
const std::vector<Int8Tile>& int8_conv_tiles();
std::string int8_tile_id(const Int8Tile& t);

// Empty if the kernel runs this problem, else what it refuses (c % 16, k % 8, pitch, sizes...).
std::string int8_conv_unsupported(const Int8ConvArgs& a);
// Workspace bytes int8_conv_run needs for a.split_k (0 when split_k is 1).
size_t int8_conv_workspace(const Int8ConvArgs& a);
// Dynamic shared memory of one block of tile `tile` (an index into int8_conv_tiles()).
size_t int8_conv_smem(int tile);
// Raises the tile's dynamic shared-memory limit on the current device (host call, once per process
// and device; int8_conv_run does it too, so call it before capturing a tile's first launch).
void int8_conv_prepare(int tile);
// Enqueues the launch (two with split-K); throws yolocu::Error(kInvalidArgument) for an unsupported problem,
// Error(kCuda) if the launch fails.
void int8_conv_run(const Int8ConvArgs& a, int tile, cudaStream_t stream);

// Host helpers.
inline int int8_padded_channels(int c) { return (c + 15) / 16 * 16; }
// KRSC weights [k, r, s, c] -> [k, r, s, c_pad] with zeros in the added channels (c_pad >= c).
std::vector<int8_t> int8_pad_krsc(const int8_t* w, int k, int r, int s, int c, int c_pad);

}  // namespace yolocu::engine

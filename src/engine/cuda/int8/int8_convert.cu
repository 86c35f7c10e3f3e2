// fp16 <-> int8 activation conversion (int8_convert.hpp). Grid-stride loops over the output:
// quantise: one thread = 4 int8 channels of one pixel (one 4-byte store; reads of the fp16 source
// are 2 bytes each, the source may be a pitched channel slice); dequantise: one thread = one channel.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "engine/cuda/int8/int8_convert.hpp"
#include "engine/cuda/int8/int8_math.hpp"

namespace yolocu::engine {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t work) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads, 65535 * 8)));
}

__global__ void quantize_kernel(const __half* x, int x_pitch, int c_src, char4* y, int c_dst4, int64_t total,
                                float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t pix = i / c_dst4;
    const int c0 = static_cast<int>(i - pix * c_dst4) * 4;
    const __half* src = x + pix * x_pitch;
    int8_t q[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) q[e] = c0 + e < c_src ? int8::quantize(__half2float(src[c0 + e]), scale) : int8_t{0};
    y[i] = make_char4(q[0], q[1], q[2], q[3]);
  }
}

__global__ void dequantize_kernel(const int8_t* x, int c, __half* y, int y_pitch, int64_t total, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t pix = i / c;
    const int ch = static_cast<int>(i - pix * c);
    y[pix * y_pitch + ch] = __float2half_rn(int8::dequantize(x[i], scale));
  }
}

bool scale_ok(float s) { return s > 0.f && s <= 3.4e38f; }

}  // namespace

void int8_quantize_run(const void* x, int x_pitch, int c_src, int8_t* y, int c_dst, int64_t pixels, float scale,
                       cudaStream_t stream) {
  YOLOCU_CHECK(x && y && c_src > 0 && x_pitch >= c_src && c_dst >= c_src && c_dst % 4 == 0 && pixels >= 0 &&
                   reinterpret_cast<uintptr_t>(y) % 4 == 0 && scale_ok(scale),
               kInvalidArgument, "int8_quantize: bad arguments (c_src ", c_src, ", x_pitch ", x_pitch, ", c_dst ", c_dst,
               ", pixels ", pixels, ", scale ", scale, ")");
  const int64_t total = pixels * (c_dst / 4);
  if (total == 0) return;
  quantize_kernel<<<grid_for(total), kThreads, 0, stream>>>(static_cast<const __half*>(x), x_pitch, c_src,
                                                            reinterpret_cast<char4*>(y), c_dst / 4, total, scale);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

void int8_dequantize_run(const int8_t* x, int c, void* y, int y_pitch, int64_t pixels, float scale,
                         cudaStream_t stream) {
  YOLOCU_CHECK(x && y && c > 0 && y_pitch >= c && pixels >= 0 && scale_ok(scale), kInvalidArgument,
               "int8_dequantize: bad arguments (c ", c, ", y_pitch ", y_pitch, ", pixels ", pixels, ", scale ", scale,
               ")");
  const int64_t total = pixels * c;
  if (total == 0) return;
  dequantize_kernel<<<grid_for(total), kThreads, 0, stream>>>(x, c, static_cast<__half*>(y), y_pitch, total, scale);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::engine

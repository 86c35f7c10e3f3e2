// fp16 <-> int8 activation conversion (int8_convert.hpp). Grid-stride loops over the output:
// quantise: a packed tensor 16 values a thread; otherwise one thread = 4 int8 channels of one pixel
// (one 4-byte store; the fp16 source, maybe a pitched channel slice, in one 8-byte load where
// aligned, else 2 bytes at a time); dequantise: one thread = 4 channels (4-byte load, 8-byte store)
// where aligned, else one channel.
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

// vec: x 8-byte aligned, x_pitch and c_src multiples of 4: 4 source channels in one 8-byte load.
__global__ void quantize_kernel(const __half* x, int x_pitch, int c_src, char4* y, int c_dst4, int64_t total,
                                int8::Scale scale, bool vec) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t pix = i / c_dst4;
    const int c0 = static_cast<int>(i - pix * c_dst4) * 4;
    const __half* src = x + pix * x_pitch + c0;
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    if (vec && c0 < c_src) {
      const uint2 raw = *reinterpret_cast<const uint2*>(src);
      const __half2 a = *reinterpret_cast<const __half2*>(&raw.x), b = *reinterpret_cast<const __half2*>(&raw.y);
      v[0] = __low2float(a), v[1] = __high2float(a), v[2] = __low2float(b), v[3] = __high2float(b);
    } else if (!vec) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (c0 + e < c_src) v[e] = __half2float(src[e]);
    }
    // channels past c_src: quantize(0) = 0
    y[i] = make_char4(int8::quantize(v[0], scale), int8::quantize(v[1], scale), int8::quantize(v[2], scale),
                      int8::quantize(v[3], scale));
  }
}

// Packed (x_pitch == c_src == c_dst, both 16-byte aligned): the tensor as one array, 16 values a
// thread (two 16-byte loads, one 16-byte store); the last n % 16 values one by one.
__global__ void quantize_flat_kernel(const __half* x, int8_t* y, int64_t n16, int64_t n, int8::Scale scale) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n16; i += stride) {
    const uint4 a = __ldcs(reinterpret_cast<const uint4*>(x) + 2 * i);
    const uint4 b = __ldcs(reinterpret_cast<const uint4*>(x) + 2 * i + 1);
    const __half* h0 = reinterpret_cast<const __half*>(&a);
    const __half* h1 = reinterpret_cast<const __half*>(&b);
    union {
      uint4 v;
      int8_t q[16];
    } out;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      out.q[e] = int8::quantize(__half2float(h0[e]), scale);
      out.q[e + 8] = int8::quantize(__half2float(h1[e]), scale);
    }
    reinterpret_cast<uint4*>(y)[i] = out.v;
  }
  for (int64_t e = n16 * 16 + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n; e += stride)
    y[e] = int8::quantize(__half2float(x[e]), scale);
}

// vec: c and y_pitch multiples of 4, y 8-byte aligned: one thread = 4 channels (4-byte load, 8-byte
// store); else one thread = one channel.
__global__ void dequantize_kernel(const int8_t* x, int c, __half* y, int y_pitch, int64_t total, float scale,
                                  bool vec) {
  const int per = vec ? 4 : 1;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t e0 = i * per, pix = e0 / c;
    const int ch = static_cast<int>(e0 - pix * c);
    __half* dst = y + pix * y_pitch + ch;
    if (!vec) {
      *dst = __float2half_rn(int8::dequantize(x[e0], scale));
      continue;
    }
    const char4 q = *reinterpret_cast<const char4*>(x + e0);
    uint2 out;
    *reinterpret_cast<__half2*>(&out.x) =
        __halves2half2(__float2half_rn(int8::dequantize(q.x, scale)), __float2half_rn(int8::dequantize(q.y, scale)));
    *reinterpret_cast<__half2*>(&out.y) =
        __halves2half2(__float2half_rn(int8::dequantize(q.z, scale)), __float2half_rn(int8::dequantize(q.w, scale)));
    *reinterpret_cast<uint2*>(dst) = out;
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
  if (x_pitch == c_src && c_src == c_dst && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(y) % 16 == 0) {
    const int64_t n = pixels * c_dst;
    quantize_flat_kernel<<<grid_for(std::max<int64_t>(n / 16, 1)), kThreads, 0, stream>>>(
        static_cast<const __half*>(x), y, n / 16, n, int8::make_scale(scale));
    YOLOCU_CUDA_CHECK_LAUNCH();
    return;
  }
  const bool vec = reinterpret_cast<uintptr_t>(x) % 8 == 0 && x_pitch % 4 == 0 && c_src % 4 == 0;
  quantize_kernel<<<grid_for(total), kThreads, 0, stream>>>(static_cast<const __half*>(x), x_pitch, c_src,
                                                            reinterpret_cast<char4*>(y), c_dst / 4, total,
                                                            int8::make_scale(scale), vec);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

void int8_dequantize_run(const int8_t* x, int c, void* y, int y_pitch, int64_t pixels, float scale,
                         cudaStream_t stream) {
  YOLOCU_CHECK(x && y && c > 0 && y_pitch >= c && pixels >= 0 && scale_ok(scale), kInvalidArgument,
               "int8_dequantize: bad arguments (c ", c, ", y_pitch ", y_pitch, ", pixels ", pixels, ", scale ", scale,
               ")");
  const bool vec = c % 4 == 0 && y_pitch % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(x) % 4 == 0;
  const int64_t total = pixels * c / (vec ? 4 : 1);
  if (total == 0) return;
  dequantize_kernel<<<grid_for(total), kThreads, 0, stream>>>(x, c, static_cast<__half*>(y), y_pitch, total, scale,
                                                              vec);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::engine

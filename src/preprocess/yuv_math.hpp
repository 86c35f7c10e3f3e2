// Internal: 8-bit YUV 4:2:0 -> BGR exactly as FFmpeg 5.1's libswscale converts it without scaling,
// written once for the CPU reference (nv12_cpu.cpp) and the CUDA letterbox (letterbox_nv12_cuda.cu;
// every function is __host__ __device__ under nvcc).
//
// What swscale does (libswscale/yuv2rgb.c ff_yuv2rgb_c_init_tables, x86/yuv_2_rgb.asm): a YUV420P
// (or yuvj420p) -> BGR24 context of the same size, without SWS_ACCURATE_RND and with an even
// height, takes the "unscaled" converter, the x86 SIMD code on every x86-64 CPU (SSSE3, MMXEXT):
//   coefficients, from ff_yuv2rgb_coeffs[SWS_CS_DEFAULT] (BT.601) = {crv 104597, cbu 132201,
//   cgu 25675, cgv 53279} (16.16) and the range:
//     limited: cy = (1 << 16) * 255 / 219, oy = 16 << 16;   full: cy = 1 << 16, oy = 0 and the four
//     chroma coefficients scaled by 224 / 255 (integer division, truncating);
//     then brightness 0, contrast and saturation 1.0 leave them as they are; the SIMD constants are
//     roundToInt16(c * 8192) and roundToInt16(oy * 8) with roundToInt16(f) = (f + 0x8000) >> 16;
//   per pixel, in 16-bit lanes (no lane ever saturates for 8-bit input):
//     y  = pmulhw((Y << 3) - y_offset, y_coeff)              pmulhw(a, b) = (a * b) >> 16 (floor)
//     u  = (U << 3) - 1024,  v = (V << 3) - 1024
//     B = clamp(y + pmulhw(u, ub)),  R = clamp(y + pmulhw(v, vr)),
//     G = clamp(y + (pmulhw(u, ug) + pmulhw(v, vg)))          clamp to 0..255 (packuswb)
//   chroma of pixel (x, y) is the sample (x / 2, y / 2): no interpolation.
// The C fallback (non-x86 builds of FFmpeg) rounds through tables and can differ by one level;
// odd heights take swscale's scaler path (bicubic chroma), which this is not. H.264 and HEVC
// pictures always have even coded heights.
#pragma once

#include <cstdint>

#include "yolocu/geometry.hpp"  // YOLOCU_HD

namespace yolocu::detail {

struct YuvCoeffs {
  int32_t y_coeff, y_offset, vr, ub, ug, vg;
};

// swscale's roundToInt16 (libswscale/yuv2rgb.c), as the signed value the SIMD code uses.
YOLOCU_HD int32_t sws_round_to_int16(int64_t f) {
  const int64_t r = (f + (1 << 15)) >> 16;  // arithmetic shift, as FFmpeg's int arithmetic
  if (r < -0x7FFF) return -0x8000;
  if (r > 0x7FFF) return 0x7FFF;
  return static_cast<int32_t>(r);
}

// The coefficients of the BT.601 conversion (SWS_CS_DEFAULT) for limited or full range input.
YOLOCU_HD YuvCoeffs sws_bt601_coeffs(bool full_range) {
  int64_t crv = 104597, cbu = 132201, cgu = -25675, cgv = -53279;
  int64_t cy = 1 << 16, oy = 0;
  if (!full_range) {
    cy = (cy * 255) / 219;
    oy = 16 << 16;
  } else {
    crv = (crv * 224) / 255;
    cbu = (cbu * 224) / 255;
    cgu = (cgu * 224) / 255;
    cgv = (cgv * 224) / 255;
  }
  // contrast = saturation = 1 << 16, brightness = 0: (c * contrast) >> 16 and
  // (c * contrast * saturation) >> 32 leave every coefficient unchanged
  YuvCoeffs c;
  c.y_coeff = sws_round_to_int16(cy * (1 << 13));
  c.vr = sws_round_to_int16(crv * (1 << 13));
  c.ub = sws_round_to_int16(cbu * (1 << 13));
  c.vg = sws_round_to_int16(cgv * (1 << 13));
  c.ug = sws_round_to_int16(cgu * (1 << 13));
  c.y_offset = sws_round_to_int16(oy * (1 << 3));
  return c;
}

// pmulhw: the high 16 bits of the signed 16 x 16 product.
YOLOCU_HD int32_t pmulhw(int32_t a, int32_t b) { return (a * b) >> 16; }

YOLOCU_HD int32_t clamp_255(int32_t v) { return v < 0 ? 0 : (v > 255 ? 255 : v); }

// One pixel: bgr[0..2] = B, G, R.
YOLOCU_HD void yuv_to_bgr(int32_t Y, int32_t U, int32_t V, const YuvCoeffs& c, int32_t bgr[3]) {
  const int32_t y = pmulhw((Y << 3) - c.y_offset, c.y_coeff);
  const int32_t u = (U << 3) - 1024, v = (V << 3) - 1024;
  bgr[0] = clamp_255(y + pmulhw(u, c.ub));
  bgr[1] = clamp_255(y + (pmulhw(u, c.ug) + pmulhw(v, c.vg)));
  bgr[2] = clamp_255(y + pmulhw(v, c.vr));
}

// Pixel (x, y) of an NV12 picture (luma plane + interleaved U, V plane at half resolution).
YOLOCU_HD void nv12_pixel(const uint8_t* luma, uint64_t luma_pitch, const uint8_t* chroma, uint64_t chroma_pitch,
                          int x, int y, const YuvCoeffs& c, int32_t bgr[3]) {
  const uint8_t* uv = chroma + static_cast<uint64_t>(y >> 1) * chroma_pitch + 2 * (x >> 1);
  yuv_to_bgr(luma[static_cast<uint64_t>(y) * luma_pitch + x], uv[0], uv[1], c, bgr);
}

}  // namespace yolocu::detail

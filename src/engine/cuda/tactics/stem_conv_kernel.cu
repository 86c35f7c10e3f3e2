// The direct stem convolution (stem_conv_kernel.hpp): implicit GEMM on tensor cores straight from
// the NCHW input.
//
// Block = 8 output rows (one per warp) x 64 output columns of one image, all k (16 or 32) channels.
//   1. The input patch the block reads (every channel, 14 + r rows, 2 * 63 + window columns) goes
//      into shared memory as 32-bit words, each two neighbouring fp16 pixels of a row (zeros
//      outside the image). Patch rows are 16 words apart modulo 32 banks and channel planes a
//      multiple of 32: the fragment loads below are conflict-free.
//   2. GEMM view: A[pixel][k] with k = (channel, ky, kxw) over a window kxw of even width sw (the
//      filter's s columns, one zero column in front after an odd pad, rounded up to even), so that
//      the two k of a fragment register are two neighbouring pixels of one patch row: one aligned
//      32-bit shared load, at (2 * oy + ky) * row + ox + kxw / 2. Fragment entries past the filter
//      (the window's padding, k past c * r * sw) are masked to zero (not only their weights: an
//      infinite input there would otherwise give NaN), and their weights are zeros.
//   3. Each warp: 4 tiles of 16 pixels of its row; per tile ks k-steps of nt mma.sync m16n8k16
//      (fp16 in, fp32 accumulators), the weights' B fragments held in registers for the whole
//      block (packed on the host in fragment order: one 64-bit load per k-step and n-tile).
//   4. Epilogue from the accumulators: + bias, SiLU in float32, two channels per 32-bit store.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "yolocu/tensor.hpp"
#include "engine/cuda/tactics/stem_conv_kernel.hpp"

namespace yolocu::engine {
namespace {

constexpr int kTileW = 64;  // output columns per block
constexpr int kTileH = 8;   // output rows per block: one per warp
constexpr int kThreads = 32 * kTileH;
constexpr int kMaxReduction = 112;  // c * r * sw: at most 7 k-steps of 16

struct Geometry {
  int shift = 0, sw = 0, kd = 0, ks = 0;    // odd-pad shift, window width, reduction, k-steps
  int ph = 0, need_w = 0, pww = 0, pl = 0;  // patch rows, words per row needed / allocated, words per plane
  size_t smem = 0;
};

Geometry geometry(const StemConvArgs& a) {
  Geometry g;
  g.shift = a.pad_w & 1;
  g.sw = (a.s + g.shift + 1) / 2 * 2;
  g.kd = a.c * a.r * g.sw;
  g.ks = (g.kd + 15) / 16;
  g.ph = (kTileH - 1) * 2 + a.r;
  g.need_w = ((kTileW - 1) * 2 + g.sw) / 2;
  g.pww = g.need_w;
  while (g.pww % 32 != 16) ++g.pww;
  g.pl = (g.ph * g.pww + 31) / 32 * 32;
  g.smem = static_cast<size_t>(a.c) * static_cast<size_t>(g.pl) * 4;
  return g;
}

struct Params {
  const uint32_t* x;  // the input as words (two fp16 pixels of a row)
  const uint2* w;     // B fragments [ks][nt][32 lanes]
  const float* bias;
  __half* y;
  int c, h, w2, p, q, yp, r, s, sw, shift, pad_h, padw_e;
  int ph, need_w, pww, pl;
  bool silu;
};

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int KS, int NT>
__global__ void __launch_bounds__(kThreads, 2) stem_conv_kernel(Params P) {
  extern __shared__ uint32_t patch[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int ox0 = static_cast<int>(blockIdx.x) * kTileW, oy0 = static_cast<int>(blockIdx.y) * kTileH;
  const int img = static_cast<int>(blockIdx.z);

  // 1. the patch: rows of every channel, 8 at a time per warp (loads before stores: in flight together)
  {
    const int iy0 = 2 * oy0 - P.pad_h, jx0 = ox0 - P.padw_e / 2;
    const uint32_t* xi = P.x + static_cast<size_t>(img) * P.c * P.h * P.w2;
    const int rows = P.c * P.ph;
    for (int base = warp; base < rows; base += 4 * kTileH) {
      uint32_t v[4][3];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int row = base + u * kTileH;
        const int cc = row / P.ph, iy = iy0 + row - cc * P.ph;
        const bool rok = row < rows && iy >= 0 && iy < P.h;
        const uint32_t* src = xi + (static_cast<size_t>(cc) * P.h + (rok ? iy : 0)) * P.w2;
#pragma unroll
        for (int e = 0; e < 3; ++e) {
          const int jx = jx0 + lane + 32 * e;
          v[u][e] = rok && lane + 32 * e < P.need_w && jx >= 0 && jx < P.w2 ? __ldg(src + jx) : 0u;
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int row = base + u * kTileH;
        if (row >= rows) break;
        const int cc = row / P.ph, py = row - cc * P.ph;
        uint32_t* dst = patch + cc * P.pl + py * P.pww;
#pragma unroll
        for (int e = 0; e < 3; ++e)
          if (lane + 32 * e < P.need_w) dst[lane + 32 * e] = v[u][e];
      }
    }
  }
  // B fragments, k offsets and masks of this thread
  uint32_t b[KS][NT][2];
  int koff[KS][2];
  uint32_t msk[KS][2];
#pragma unroll
  for (int s = 0; s < KS; ++s) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint2 v = __ldg(P.w + (s * NT + nt) * 32 + lane);
      b[s][nt][0] = v.x;
      b[s][nt][1] = v.y;
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int k = 16 * s + 2 * t4 + 8 * j, rs = P.r * P.sw;
      const int cc = k / rs, rem = k - cc * rs, ky = rem / P.sw, kxw = rem - ky * P.sw;
      const int kx = kxw - P.shift;
      const bool in = cc < P.c;
      const bool lo = in && kx >= 0 && kx < P.s, hi = in && kx + 1 >= 0 && kx + 1 < P.s;
      koff[s][j] = in ? cc * P.pl + ky * P.pww + kxw / 2 : 0;
      msk[s][j] = (lo ? 0x0000FFFFu : 0u) | (hi ? 0xFFFF0000u : 0u);
    }
  }
  __syncthreads();

  const int oy = oy0 + warp;
  if (oy >= P.p) return;
  float bias[NT][2];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int ch = nt * 8 + 2 * t4;
    bias[nt][0] = P.bias ? P.bias[ch] : 0.f;
    bias[nt][1] = P.bias ? P.bias[ch + 1] : 0.f;
  }
  __half* yrow = P.y + (static_cast<size_t>(img) * P.p + oy) * P.q * P.yp;
  const int rbase = 2 * warp * P.pww + g;
#pragma unroll 1
  for (int t = 0; t < kTileW / 16; ++t) {
    if (ox0 + 16 * t >= P.q) break;
    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    const int rb = rbase + 16 * t;
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const uint32_t a0 = patch[rb + koff[s][0]] & msk[s][0];
      const uint32_t a1 = patch[rb + 8 + koff[s][0]] & msk[s][0];
      const uint32_t a2 = patch[rb + koff[s][1]] & msk[s][1];
      const uint32_t a3 = patch[rb + 8 + koff[s][1]] & msk[s][1];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma16816(acc[nt], a0, a1, a2, a3, b[s][nt][0], b[s][nt][1]);
    }
#pragma unroll
    for (int half_i = 0; half_i < 2; ++half_i) {
      const int ox = ox0 + 16 * t + g + 8 * half_i;
      if (ox >= P.q) continue;
      __half* yp = yrow + static_cast<size_t>(ox) * P.yp + 2 * t4;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float v0 = acc[nt][2 * half_i] + bias[nt][0], v1 = acc[nt][2 * half_i + 1] + bias[nt][1];
        if (P.silu) {
          v0 = v0 / (1.f + expf(-v0));
          v1 = v1 / (1.f + expf(-v1));
        }
        *reinterpret_cast<__half2*>(yp + nt * 8) = __floats2half2_rn(v0, v1);
      }
    }
  }
}

using KernelFn = void (*)(Params);

template <int NT>
KernelFn kernel_for_ks(int ks) {
  switch (ks) {
    case 1: return stem_conv_kernel<1, NT>;
    case 2: return stem_conv_kernel<2, NT>;
    case 3: return stem_conv_kernel<3, NT>;
    case 4: return stem_conv_kernel<4, NT>;
    case 5: return stem_conv_kernel<5, NT>;
    case 6: return stem_conv_kernel<6, NT>;
    default: return stem_conv_kernel<7, NT>;
  }
}

// The weight of reduction index k (window order) and output channel o; 0 in the padding.
float window_weight(const StemConvArgs& a, const Geometry& g, const float* oihw, int k, int o) {
  const int rs = a.r * g.sw;
  const int cc = k / rs, rem = k - cc * rs, ky = rem / g.sw, kx = rem - ky * g.sw - g.shift;
  if (o >= a.k || cc >= a.c || kx < 0 || kx >= a.s) return 0.f;
  return oihw[((static_cast<size_t>(o) * a.c + cc) * a.r + ky) * a.s + kx];
}

}  // namespace

std::string stem_conv_unsupported(const StemConvArgs& a) {
  if (a.n < 1 || a.c < 1 || a.h < 1 || a.w_ < 1 || a.r < 1 || a.s < 1) return "empty shape";
  if (a.k != 16 && a.k != 32) return "output channels " + std::to_string(a.k) + " (16 or 32)";
  if (a.r > 7 || a.s > 7) return "filter " + std::to_string(a.r) + "x" + std::to_string(a.s) + " (at most 7x7)";
  if (a.pad_h < 0 || a.pad_w < 0 || a.pad_h > 3 || a.pad_w > 3) return "pads over 3";
  const Geometry g = geometry(a);
  if (g.kd > kMaxReduction)
    return "reduction c * r * window " + std::to_string(g.kd) + " (at most " + std::to_string(kMaxReduction) + ")";
  if (a.w_ % 2 != 0) return "odd input width " + std::to_string(a.w_);
  if (a.p != (a.h + 2 * a.pad_h - a.r) / 2 + 1 || a.q != (a.w_ + 2 * a.pad_w - a.s) / 2 + 1 || a.p < 1 || a.q < 1)
    return "output size is not the stride-2 convolution's";
  if (a.y_pitch != 0 && (a.y_pitch < a.k || a.y_pitch % 2 != 0)) return "output pitch " + std::to_string(a.y_pitch);
  if (a.n > 65535) return "batch over 65535";
  return "";
}

std::vector<uint16_t> stem_conv_pack(const StemConvArgs& a, const float* oihw) {
  const std::string why = stem_conv_unsupported(a);
  YOLOCU_CHECK(why.empty(), kInternal, "stem_conv_pack: ", why);
  const Geometry g = geometry(a);
  const int nt_count = a.k / 8;
  std::vector<uint16_t> out(static_cast<size_t>(g.ks) * nt_count * 32 * 4);
  size_t at = 0;
  for (int s = 0; s < g.ks; ++s)
    for (int nt = 0; nt < nt_count; ++nt)
      for (int lane = 0; lane < 32; ++lane) {
        const int o = nt * 8 + lane / 4;
        for (int j = 0; j < 2; ++j) {
          const int k = 16 * s + 2 * (lane % 4) + 8 * j;
          out[at++] = float_to_half(window_weight(a, g, oihw, k, o));
          out[at++] = float_to_half(window_weight(a, g, oihw, k + 1, o));
        }
      }
  return out;
}

void stem_conv_run(const StemConvArgs& a, cudaStream_t stream) {
  const std::string why = stem_conv_unsupported(a);
  YOLOCU_CHECK(why.empty(), kInternal, "stem_conv_run: ", why);
  const Geometry g = geometry(a);
  Params P;
  P.x = static_cast<const uint32_t*>(a.x);
  P.w = static_cast<const uint2*>(a.w);
  P.bias = a.bias;
  P.y = static_cast<__half*>(a.y);
  P.c = a.c;
  P.h = a.h;
  P.w2 = a.w_ / 2;
  P.p = a.p;
  P.q = a.q;
  P.yp = a.y_pitch > 0 ? a.y_pitch : a.k;
  P.r = a.r;
  P.s = a.s;
  P.sw = g.sw;
  P.shift = g.shift;
  P.pad_h = a.pad_h;
  P.padw_e = a.pad_w + g.shift;
  P.ph = g.ph;
  P.need_w = g.need_w;
  P.pww = g.pww;
  P.pl = g.pl;
  P.silu = a.silu;
  const dim3 grid(static_cast<unsigned>((a.q + kTileW - 1) / kTileW), static_cast<unsigned>((a.p + kTileH - 1) / kTileH),
                  static_cast<unsigned>(a.n));
  const KernelFn fn = a.k == 16 ? kernel_for_ks<2>(g.ks) : kernel_for_ks<4>(g.ks);
  fn<<<grid, kThreads, g.smem, stream>>>(P);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::engine

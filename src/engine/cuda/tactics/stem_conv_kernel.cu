// The direct stem convolution (stem_conv_kernel.hpp): implicit GEMM on tensor cores straight from
// the NCHW input.
//
// Tile = 8 output rows (one per warp) x 64 output columns of one image, all k (16 or 32) channels.
// Blocks are persistent (two per SM): each loops over tiles (gridDim.x apart, stepped in tile
// columns / rows / images without divisions), the next tile's input patch loading (cp.async)
// while the current one computes.
//   1. The patch of a tile (every channel, 14 + r rows, 2 * 63 + window columns) lies in shared
//      memory as 32-bit words, each two neighbouring fp16 pixels of a row (zeros outside the image).
//      Its rows start at an input word that is a multiple of 4 (the columns needed begin `off`
//      words in): with the input width a multiple of 8 and the input 16-byte aligned, the patch
//      loads as 16-byte copies (a warp per patch row, a lane per 4 words), each wholly inside or
//      wholly outside the image. Patch rows are 16 words apart modulo 32 banks and channel planes
//      a multiple of 32: the fragment loads below are conflict-free. After the c planes of each
//      patch buffer one plane of zeros.
//   2. GEMM view: A[pixel][k] with k = (channel, ky, kxw) over a window kxw of even width sw (the
//      filter's s columns, one zero column in front after an odd pad, rounded up to even), so that
//      the two k of a fragment register are two neighbouring pixels of one patch row: one aligned
//      32-bit shared load, at (2 * oy + ky) * row + ox + kxw / 2. Fragment entries past the
//      reduction (k past c * r * sw) read the zero plane; with MASK, the halves that fall in the
//      window's padding are masked to zero (not only their weights: an infinite input there would
//      otherwise give NaN). Their weights are zeros.
//   3. Each warp: 4 tiles of 16 pixels of its row (unrolled: the shared addresses of a k-step's
//      fragments are found once per tile); per tile ks k-steps of nt mma.sync m16n8k16 (fp16 in,
//      fp32 accumulators starting from the bias), the weights' B fragments held in registers for
//      the block's whole life (packed on the host in fragment order: one 64-bit load per k-step
//      and n-tile).
//   4. Epilogue: SiLU in float32 (x / (1 + 2^(-x log2 e)) with the hardware's exp2 and reciprocal:
//      relative error ~1e-6, far below the fp16 output's 2^-11), into the warp's staging rows
//      (padded: conflict-free), then 16-byte stores of whole pixels.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "yolocu/tensor.hpp"
#include "engine/cuda/tactics/smem_limit.hpp"
#include "engine/cuda/tactics/stem_conv_kernel.hpp"

namespace yolocu::engine {
namespace {

constexpr int kTileW = 64;  // output columns per block
constexpr int kTileH = 8;   // output rows per block: one per warp
constexpr int kThreads = 32 * kTileH;
constexpr int kMaxReduction = 112;  // c * r * sw: at most 7 k-steps of 16

struct Geometry {
  int shift = 0, sw = 0, kd = 0, ks = 0;    // odd-pad shift, window width, reduction, k-steps
  int off = 0;                              // words from a patch row's start to the first one needed
  int ph = 0, need_w = 0, pww = 0, pl = 0;  // patch rows, words per row loaded (a multiple of 4) / allocated, per plane
  int buf_words = 0;                        // one patch buffer: c planes and the zero plane
  int stage_words = 0;                      // a warp's staged outputs: 16 pixels, k / 2 + 4 words each
  bool mask = false;                        // some fragment half lies in the window's padding
  size_t smem = 0;
};

Geometry geometry(const StemConvArgs& a) {
  Geometry g;
  g.shift = a.pad_w & 1;
  g.sw = (a.s + g.shift + 1) / 2 * 2;
  g.kd = a.c * a.r * g.sw;
  g.ks = (g.kd + 15) / 16;
  g.ph = (kTileH - 1) * 2 + a.r;
  // A tile's first needed word is ox0 - (pad_w + shift) / 2 with ox0 a multiple of 64: the patch
  // row starts at the multiple of 4 below it.
  const int lead = (a.pad_w + g.shift) / 2;
  g.off = (4 - lead % 4) % 4;
  g.need_w = (g.off + ((kTileW - 1) * 2 + g.sw) / 2 + 3) / 4 * 4;
  g.pww = g.need_w;
  while (g.pww % 32 != 16) ++g.pww;
  g.pl = (g.ph * g.pww + 31) / 32 * 32;
  g.buf_words = (a.c + 1) * g.pl;
  g.stage_words = 16 * (a.k / 2 + 4);
  g.mask = g.shift != 0 || g.sw != a.s;
  g.smem = (2 * static_cast<size_t>(g.buf_words) + static_cast<size_t>(kTileH) * g.stage_words) * 4;
  return g;
}

struct Params {
  const uint32_t* x;  // the input as words (two fp16 pixels of a row)
  const uint2* w;     // B fragments [ks][nt][32 lanes]
  const float* bias;
  __half* y;
  int c, h, w2, p, q, yp, r, s, sw, shift;
  int pad_h, lead;                 // a tile's patch rows start at input row 2 * oy0 - pad_h, word ox0 - lead
  int ph, chunks, pww, pl, buf_words, off;
  int tiles_x, tiles_y, tiles;     // tile columns, rows (per image), all tiles
  int gx, gy, gi;                  // gridDim.x as tile columns, rows, images (the step between a block's tiles)
  int row_step_g, plane_step_g;    // load_patch's steps in the input: 8 rows; from a plane's end to the next
  int row_step_s, plane_step_s;    // the same in the patch
  bool silu;
};

__device__ __forceinline__ float exp2f_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 16 bytes global -> shared (L2 only: nothing of the input is read twice by one SM soon); src_bytes
// 0: zeros.
__device__ __forceinline__ void cp_async16(uint32_t* dst, const uint32_t* src, int src_bytes) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_one() { asm volatile("cp.async.wait_group 1;\n" ::); }

struct Tile {
  int img, ty, tx;  // image, tile row, tile column
};
__device__ __forceinline__ Tile tile_of(const Params& P, int t) {
  const int per_image = P.tiles_x * P.tiles_y;
  Tile r;
  r.img = t / per_image;
  const int rem = t - r.img * per_image;
  r.ty = rem / P.tiles_x;
  r.tx = rem - r.ty * P.tiles_x;
  return r;
}
// The tile gridDim.x further: a sum in mixed radix (gx < tiles_x, gy < tiles_y: one carry each).
__device__ __forceinline__ Tile tile_after(const Params& P, const Tile& t) {
  Tile r;
  r.tx = t.tx + P.gx;
  const int c1 = r.tx >= P.tiles_x;
  r.tx -= c1 ? P.tiles_x : 0;
  r.ty = t.ty + P.gy + c1;
  const int c2 = r.ty >= P.tiles_y;
  r.ty -= c2 ? P.tiles_y : 0;
  r.img = t.img + P.gi + c2;
  return r;
}

// The tile's input patch into `buf` (every channel's rows; zeros outside the image), asynchronously:
// the warp's rows warp, warp + 8, ... of the c * ph, a lane per 16 bytes of a row.
__device__ __forceinline__ void load_patch(const Params& P, uint32_t* buf, const Tile& t, int warp, int lane) {
  if (lane >= P.chunks) return;  // (no copy past the row's end)
  const int iy0 = 2 * kTileH * t.ty - P.pad_h, jx = kTileW * t.tx - P.lead + 4 * lane;
  const bool col_ok = static_cast<unsigned>(jx) < static_cast<unsigned>(P.w2);
  const uint32_t* xi = P.x + static_cast<size_t>(t.img) * P.c * P.h * P.w2 + jx;
  int g = (iy0 + warp) * P.w2;  // the row's first word in xi (32 bits: c * h * w2 < 2^31)
  uint32_t* dst = buf + warp * P.pww + 4 * lane;
  for (int cc = 0, py = warp; cc < P.c;) {
    const bool ok = col_ok && static_cast<unsigned>(iy0 + py) < static_cast<unsigned>(P.h);
    cp_async16(dst, ok ? xi + g : P.x, ok ? 16 : 0);
    py += kTileH, g += P.row_step_g, dst += P.row_step_s;
    if (py >= P.ph) py -= P.ph, ++cc, g += P.plane_step_g, dst += P.plane_step_s;  // (ph > 8: one wrap)
  }
}

// Persistent blocks: tile after tile (8 output rows x 64 columns of one image), the next tile's
// patch loading while this one computes.
template <int KS, int NT, bool MASK>
__global__ void __launch_bounds__(kThreads, 2) stem_conv_kernel(Params P) {
  extern __shared__ __align__(16) uint32_t smem[];
  constexpr int kStageRow = NT * 4 + 4;  // words per staged pixel (k / 2 + 4: conflict-free)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;
  uint32_t* stage = smem + 2 * P.buf_words + warp * 16 * kStageRow;

  int tile = static_cast<int>(blockIdx.x);
  if (tile >= P.tiles) return;
  Tile t = tile_of(P, tile);
  load_patch(P, smem, t, warp, lane);
  cp_async_commit();
  // the zero planes (never loaded into)
  for (int i = tid; i < P.pl; i += kThreads) smem[P.c * P.pl + i] = smem[P.buf_words + P.c * P.pl + i] = 0u;

  // B fragments, the fragments' word offsets in a patch buffer (rows of this thread's first pixel)
  // and masks of this thread (for every tile)
  uint32_t b[KS][NT][2];
  int aoff[KS][2];
  uint32_t msk[KS][2];
  const int rbase = 2 * warp * P.pww + g;
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
      aoff[s][j] = rbase + (in ? cc * P.pl + ky * P.pww + P.off + kxw / 2 : P.c * P.pl);  // (else the zero plane)
      msk[s][j] = (lo ? 0x0000FFFFu : 0u) | (hi ? 0xFFFF0000u : 0u);
    }
  }
  float bias[NT][2];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int ch = nt * 8 + 2 * t4;
    bias[nt][0] = P.bias ? P.bias[ch] : 0.f;
    bias[nt][1] = P.bias ? P.bias[ch + 1] : 0.f;
  }

  for (int cur = 0; tile < P.tiles; cur ^= 1) {
    const int next = tile + static_cast<int>(gridDim.x);
    const Tile tn = tile_after(P, t);
    if (next < P.tiles) load_patch(P, smem + (cur ^ 1) * P.buf_words, tn, warp, lane);
    cp_async_commit();  // (empty without a next tile: one group per iteration)
    cp_async_wait_one();
    __syncthreads();
    const uint32_t* patch = smem + cur * P.buf_words;
    const int oy = kTileH * t.ty + warp, ox0 = kTileW * t.tx;
    if (oy < P.p) {
      __half* yrow = P.y + (static_cast<size_t>(t.img) * P.p + oy) * P.q * P.yp;
#pragma unroll
      for (int m = 0; m < kTileW / 16; ++m) {
        const int px0 = ox0 + 16 * m;
        if (px0 >= P.q) break;
        float acc[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          acc[nt][0] = acc[nt][2] = bias[nt][0];
          acc[nt][1] = acc[nt][3] = bias[nt][1];
        }
#pragma unroll
        for (int s = 0; s < KS; ++s) {
          const uint32_t* p0 = patch + aoff[s][0] + 16 * m;
          const uint32_t* p1 = patch + aoff[s][1] + 16 * m;
          uint32_t a0 = p0[0], a1 = p0[8], a2 = p1[0], a3 = p1[8];
          if (MASK) a0 &= msk[s][0], a1 &= msk[s][0], a2 &= msk[s][1], a3 &= msk[s][1];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma16816(acc[nt], a0, a1, a2, a3, b[s][nt][0], b[s][nt][1]);
        }
        // epilogue: SiLU, into the warp's stage (pixel rows), then 16-byte stores
#pragma unroll
        for (int hi = 0; hi < 2; ++hi)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            float v0 = acc[nt][2 * hi], v1 = acc[nt][2 * hi + 1];
            if (P.silu) {  // (x very negative: exp2 gives inf, the quotient -0)
              v0 = __fdividef(v0, 1.f + exp2f_approx(-v0 * 1.4426950408889634f));
              v1 = __fdividef(v1, 1.f + exp2f_approx(-v1 * 1.4426950408889634f));
            }
            const __half2 h = __floats2half2_rn(v0, v1);
            stage[(g + 8 * hi) * kStageRow + nt * 4 + t4] = *reinterpret_cast<const uint32_t*>(&h);
          }
        __syncwarp();
        constexpr int kChunks = 16 * NT;  // 16-byte chunks: 16 pixels x NT (8 channels each)
#pragma unroll
        for (int c = lane; c < kChunks; c += 32) {
          const int px = c / NT, part = c - px * NT;
          if (px0 + px < P.q)
            *reinterpret_cast<uint4*>(yrow + static_cast<size_t>(px0 + px) * P.yp + part * 8) =
                *reinterpret_cast<const uint4*>(stage + px * kStageRow + part * 4);
        }
        __syncwarp();
      }
    }
    __syncthreads();  // every warp is done with this patch before the next iteration loads into it
    tile = next;
    t = tn;
  }
}

using KernelFn = void (*)(Params);

template <int NT, bool MASK>
KernelFn kernel_for_ks(int ks) {
  switch (ks) {
    case 1: return stem_conv_kernel<1, NT, MASK>;
    case 2: return stem_conv_kernel<2, NT, MASK>;
    case 3: return stem_conv_kernel<3, NT, MASK>;
    case 4: return stem_conv_kernel<4, NT, MASK>;
    case 5: return stem_conv_kernel<5, NT, MASK>;
    case 6: return stem_conv_kernel<6, NT, MASK>;
    default: return stem_conv_kernel<7, NT, MASK>;
  }
}
KernelFn kernel_for(int k, int ks, bool mask) {
  if (k == 16) return mask ? kernel_for_ks<2, true>(ks) : kernel_for_ks<2, false>(ks);
  return mask ? kernel_for_ks<4, true>(ks) : kernel_for_ks<4, false>(ks);
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
  if (a.w_ % 8 != 0) return "input width " + std::to_string(a.w_) + " (a multiple of 8)";  // (16-byte copies)
  if (static_cast<int64_t>(a.c) * a.h * a.w_ >= (int64_t{1} << 31)) return "image over 2^31 values";
  if (a.p != (a.h + 2 * a.pad_h - a.r) / 2 + 1 || a.q != (a.w_ + 2 * a.pad_w - a.s) / 2 + 1 || a.p < 1 || a.q < 1)
    return "output size is not the stride-2 convolution's";
  if (a.y_pitch != 0 && (a.y_pitch < a.k || a.y_pitch % 8 != 0)) return "output pitch " + std::to_string(a.y_pitch);
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

StemConvLaunch stem_conv_prepare(const StemConvArgs& a) {
  const std::string why = stem_conv_unsupported(a);
  YOLOCU_CHECK(why.empty(), kInternal, "stem_conv_prepare: ", why);
  const Geometry g = geometry(a);
  StemConvLaunch l;
  l.smem = g.smem;
  int device = 0, sms = 0;
  YOLOCU_CUDA_CHECK(cudaGetDevice(&device));
  YOLOCU_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const KernelFn fn = kernel_for(a.k, g.ks, g.mask);
  raise_smem_limit(reinterpret_cast<const void*>(fn), g.smem);  // two patch buffers: over 48 KiB
  int per_sm = 0;
  YOLOCU_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, g.smem));
  YOLOCU_CHECK(per_sm > 0, kCuda, "stem_conv_prepare: no block fits an SM (", g.smem, " bytes of shared memory)");
  l.kernel = reinterpret_cast<const void*>(fn);
  l.blocks = per_sm * sms;
  l.k = a.k, l.c = a.c, l.h = a.h, l.w = a.w_, l.r = a.r, l.s = a.s, l.pad_h = a.pad_h, l.pad_w = a.pad_w;
  return l;
}

void stem_conv_run(const StemConvLaunch& l, const StemConvArgs& a, cudaStream_t stream) {
  YOLOCU_CHECK(l.kernel && a.k == l.k && a.c == l.c && a.h == l.h && a.w_ == l.w && a.r == l.r && a.s == l.s &&
                   a.pad_h == l.pad_h && a.pad_w == l.pad_w,
               kInternal, "stem_conv_run: the launch was prepared for another shape");
  const std::string why = stem_conv_unsupported(a);
  YOLOCU_CHECK(why.empty(), kInternal, "stem_conv_run: ", why);
  YOLOCU_CHECK(reinterpret_cast<uintptr_t>(a.x) % 16 == 0, kInvalidArgument,
               "stem_conv_run: the input is not 16-byte aligned");
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
  P.lead = (a.pad_w + g.shift) / 2 + g.off;
  P.ph = g.ph;
  P.chunks = g.need_w / 4;
  P.pww = g.pww;
  P.pl = g.pl;
  P.buf_words = g.buf_words;
  P.off = g.off;
  P.tiles_x = (a.q + kTileW - 1) / kTileW;
  P.tiles_y = (a.p + kTileH - 1) / kTileH;
  P.tiles = P.tiles_x * P.tiles_y * a.n;
  const int blocks = std::min(P.tiles, l.blocks);  // persistent: each a loop over tiles
  P.gi = blocks / (P.tiles_x * P.tiles_y);
  P.gy = (blocks - P.gi * P.tiles_x * P.tiles_y) / P.tiles_x;
  P.gx = blocks - (P.gi * P.tiles_y + P.gy) * P.tiles_x;
  P.row_step_g = kTileH * P.w2;
  P.plane_step_g = (a.h - g.ph) * P.w2;
  P.row_step_s = kTileH * g.pww;
  P.plane_step_s = g.pl - g.ph * g.pww;
  P.silu = a.silu;
  const auto fn = reinterpret_cast<KernelFn>(const_cast<void*>(l.kernel));
  fn<<<static_cast<unsigned>(blocks), kThreads, l.smem, stream>>>(P);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

void stem_conv_run(const StemConvArgs& a, cudaStream_t stream) { stem_conv_run(stem_conv_prepare(a), a, stream); }

}  // namespace yolocu::engine

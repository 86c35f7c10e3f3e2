// yolocu's thin 3x3 convolution (thin_conv_kernel.hpp): an implicit GEMM on mma.m16n8k16 over a
// shared-memory halo tile, so each input pixel is read from memory about once.
//
// GEMM view per block tile: C[128 pixels x K] = A[128 x 9C] * B[9C x K], the reduction tap-major,
// channel-minor (the KRSC weights' order), padded to a multiple of 16 (C = 8: the tenth "tap" reads
// a zero chunk).
//   1. the block copies the layer's weights into shared memory once ([K][9C + pad], cp.async) and
//      its bias (zeros without one), then loops over output tiles (TH x TW pixels of one image,
//      TH * TW = 128; blocks = what fits the device at once); each tile's input halo ((TH - 1) S + 3
//      rows x (TW - 1) S + 3 columns x C, zeros outside the image) is copied with cp.async while
//      the previous tile computes (two buffers);
//   2. in the halo a pixel takes C halves, its 16-byte channel chunks swizzled (chunk j of halo
//      pixel x stored at j ^ ((x / (128 bytes / 2C)) mod C/8)), so the 8 consecutive pixels one
//      ldmatrix reads fall into 8 different 16-byte bank groups without padding; with stride 2 the
//      even input columns are stored before the odd ones, so that consecutive output pixels read
//      consecutive stored columns again;
//   3. warp w takes two m16 tiles (16 consecutive output pixels of a row each): per k16 step one
//      ldmatrix.x4 per m tile (each lane names the halo address of its pixel and tap), the weights'
//      B fragments as 32-bit shared loads, fp32 accumulators;
//   4. epilogue from the accumulators: + bias, SiLU (fast exponential and division: the output is
//      fp16), + residual in fp32, two channels a store.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "engine/cuda/mma_ptx.cuh"
#include "engine/cuda/tactics/smem_limit.hpp"
#include "engine/cuda/tactics/thin_conv_kernel.hpp"

namespace yolocu::engine {
namespace {

namespace ptx = cuda_kernels::ptx;

constexpr int kThreads = 128;  // 4 warps
constexpr int kPixels = 128;   // output pixels per tile

template <int C, int NT>
struct Cfg {
  static constexpr int kKd = 9 * C;                        // reduction
  static constexpr int kKp = (kKd + 15) / 16 * 16;         // padded to whole k16 steps
  static constexpr int kWp = kKp + 8;                      // weight row pitch (halves)
  static constexpr int kK = NT * 8;
  static constexpr int kWeightHalves = kK * kWp + 8;       // + the zero chunk
  static constexpr int kHaloOffset = kWeightHalves * 2 + kK * 4;  // bytes: weights, zero chunk, bias
};

// Where chunk `chunk` (16 bytes) of halo pixel `pix` is stored, in halves from the halo's start:
// the chunk index XOR the pixel's place among the 128 / 2C pixel groups of its 128 bytes' line.
template <int C>
__device__ __forceinline__ int halo_at(int pix, int chunk) {
  constexpr int kChunks = C / 8, kShift = C == 8 ? 3 : C == 16 ? 2 : 1;  // log2 of the pixels in 128 bytes
  return pix * C + ((chunk ^ ((pix >> kShift) & (kChunks - 1))) << 3);
}

struct Params {
  const __half* x;
  const __half* w;
  const float* bias;
  const __half* res;
  __half* y;
  int h, w_, p, q, pad_h, pad_w, s, xp, yp, rp;
  int tw, tw_log2, th, ih, iw;  // tile, halo
  int step_dy, step_dx;         // a thread's step through the halo's pixels (kThreads / (C / 8)), as rows + columns
  int tiles_x, tiles_y, tiles;
  int halo_halves;  // one halo buffer
  bool silu;
};

struct TileAt {
  int img, oy0, ox0;
};
__device__ __forceinline__ TileAt tile_at(const Params& P, int t) {
  const int per_image = P.tiles_x * P.tiles_y;
  const int img = t / per_image, r = t - img * per_image, ty = r / P.tiles_x;
  return {img, ty * P.th, (r - ty * P.tiles_x) * P.tw};
}

// Stored halo column of input column hx (stride 2: even columns first).
__device__ __forceinline__ int halo_col(const Params& P, int hx) {
  return P.s == 1 ? hx : ((hx & 1) ? P.tw + 1 + (hx >> 1) : (hx >> 1));
}

// The thread copies chunk threadIdx.x % (C / 8) of every (kThreads / (C / 8))-th halo pixel,
// stepping through the rows without a division per pixel.
template <int C>
__device__ __forceinline__ void load_halo(const Params& P, int t, __half* halo) {
  constexpr int kChunks = C / 8;
  const TileAt at = tile_at(P, t);
  const int iy0 = at.oy0 * P.s - P.pad_h, ix0 = at.ox0 * P.s - P.pad_w;
  const int chunk = threadIdx.x % kChunks, first = threadIdx.x / kChunks;
  int hy = first / P.iw, hx = first - hy * P.iw;
  const __half* image = P.x + static_cast<int64_t>(at.img) * P.h * P.w_ * P.xp + chunk * 8;
  for (; hy < P.ih;) {
    const int iy = iy0 + hy, ix = ix0 + hx;
    const bool valid = iy >= 0 && iy < P.h && ix >= 0 && ix < P.w_;
    const __half* src = valid ? image + (static_cast<int64_t>(iy) * P.w_ + ix) * P.xp : P.x;
    ptx::cp_async16(ptx::smem_u32(halo + halo_at<C>(hy * P.iw + halo_col(P, hx), chunk)), src, valid);
    hx += P.step_dx;
    hy += P.step_dy;
    if (hx >= P.iw) {
      hx -= P.iw;
      ++hy;
    }
  }
}

template <int C, int NT>
__global__ void __launch_bounds__(kThreads) thin_conv_kernel(Params P) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // mma.m16n8k16, cp.async: thin_conv_unsupported() refuses older devices
#else
  using G = Cfg<C, NT>;
  extern __shared__ __align__(16) unsigned char smem[];
  __half* ws = reinterpret_cast<__half*>(smem);
  __half* zero = ws + G::kK * G::kWp;
  float* bias = reinterpret_cast<float*>(smem + G::kWeightHalves * 2);
  __half* halos = reinterpret_cast<__half*>(smem + G::kHaloOffset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, tq = lane % 4;
  // 1. the weights (zeros past the reduction), the zero chunk and the first tile's halo
  constexpr int kRowChunks = G::kKp / 8;
  for (int e = threadIdx.x; e < G::kK * kRowChunks; e += kThreads) {
    const int co = e / kRowChunks, kk = (e - co * kRowChunks) * 8;
    const bool valid = kk < G::kKd;
    ptx::cp_async16(ptx::smem_u32(ws + co * G::kWp + kk), P.w + (valid ? co * G::kKd + kk : 0), valid);
  }
  if (threadIdx.x == 0) *reinterpret_cast<uint4*>(zero) = make_uint4(0, 0, 0, 0);
  for (int i = threadIdx.x; i < G::kK; i += kThreads) bias[i] = P.bias ? P.bias[i] : 0.f;
  // (read after the loop's first __syncthreads)
  int t = blockIdx.x;
  if (t < P.tiles) load_halo<C>(P, t, halos);
  ptx::cp_async_commit();
  // this lane's row of the ldmatrix.x4 A tiles: pixel prow of the m16 tile, channels 8 khalf ..
  const int prow = (lane & 7) + ((lane >> 3) & 1) * 8, khalf = lane >> 4;
  for (int i = 0; t < P.tiles; ++i, t += gridDim.x) {
    const int next = t + gridDim.x;
    if (next < P.tiles) {
      load_halo<C>(P, next, halos + ((i + 1) & 1) * P.halo_halves);
      ptx::cp_async_commit();
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();
    const __half* halo = halos + (i & 1) * P.halo_halves;
    // 3. the warp's two m16 tiles
    int oyl[2], oxl[2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      const int m0 = (warp * 2 + mi) * 16;
      oyl[mi] = m0 >> P.tw_log2;
      oxl[mi] = m0 & (P.tw - 1);
    }
    float acc[2][NT][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) acc[mi][nt][0] = acc[mi][nt][1] = acc[mi][nt][2] = acc[mi][nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < G::kKp / 16; ++ks) {
      const int kk = ks * 16 + khalf * 8, tap = kk / C, ch = kk - tap * C;
      uint32_t a[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const __half* src = zero;
        if (tap < 9) {
          const int ty = tap / 3, tx = tap - ty * 3, ox = oxl[mi] + prow;
          const int col = P.s == 1 ? ox + tx : (tx == 1 ? P.tw + 1 + ox : ox + (tx >> 1));
          src = halo + halo_at<C>((oyl[mi] * P.s + ty) * P.iw + col, ch >> 3);
        }
        ptx::ldmatrix_x4(a[mi], ptx::smem_u32(src));
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const __half* wrow = ws + (nt * 8 + gr) * G::kWp + ks * 16 + 2 * tq;
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(wrow), b1 = *reinterpret_cast<const uint32_t*>(wrow + 8);
        ptx::mma_f16(acc[0][nt], a[0], b0, b1);
        ptx::mma_f16(acc[1][nt], a[1], b0, b1);
      }
    }
    // 4. epilogue: rows gr and gr + 8 of each m16 tile, channels 2 tq, 2 tq + 1 of each n8 tile
    const TileAt at = tile_at(P, t);
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      const int oy = at.oy0 + oyl[mi];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int ox = at.ox0 + oxl[mi] + gr + 8 * hh;
        if (oy >= P.p || ox >= P.q) continue;
        const int64_t pix = (static_cast<int64_t>(at.img) * P.p + oy) * P.q + ox;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int co = nt * 8 + 2 * tq;
          const float2 b = *reinterpret_cast<const float2*>(bias + co);
          float v0 = acc[mi][nt][2 * hh] + b.x, v1 = acc[mi][nt][2 * hh + 1] + b.y;
          if (P.silu) {
            v0 = __fdividef(v0, 1.f + __expf(-v0));
            v1 = __fdividef(v1, 1.f + __expf(-v1));
          }
          if (P.res) {
            const float2 r = __half22float2(*reinterpret_cast<const __half2*>(P.res + pix * P.rp + co));
            v0 += r.x;
            v1 += r.y;
          }
          *reinterpret_cast<__half2*>(P.y + pix * P.yp + co) = __floats2half2_rn(v0, v1);
        }
      }
    }
    __syncthreads();  // the next iteration's copy overwrites this halo buffer
  }
#endif
}

using Kernel = void (*)(Params);

template <int C>
Kernel kernel_c(int k) {
  switch (k) {
    case 8: return &thin_conv_kernel<C, 1>;
    case 16: return &thin_conv_kernel<C, 2>;
    case 32: return &thin_conv_kernel<C, 4>;
    case 64: return &thin_conv_kernel<C, 8>;
    default: return nullptr;
  }
}
Kernel kernel_for(const ThinConvArgs& a) {
  switch (a.c) {
    case 8: return kernel_c<8>(a.k);
    case 16: return kernel_c<16>(a.k);
    case 32: return kernel_c<32>(a.k);
    default: return nullptr;
  }
}

int log2_of(int tw) { return tw == 16 ? 4 : tw == 32 ? 5 : 6; }

Params params_of(const ThinConvArgs& a, int tw) {
  Params P{};
  P.x = static_cast<const __half*>(a.x);
  P.w = static_cast<const __half*>(a.w);
  P.bias = a.bias;
  P.res = static_cast<const __half*>(a.residual);
  P.y = static_cast<__half*>(a.y);
  P.h = a.h;
  P.w_ = a.w_;
  P.p = a.p;
  P.q = a.q;
  P.pad_h = a.pad_h;
  P.pad_w = a.pad_w;
  P.s = a.stride;
  P.xp = a.x_pitch > 0 ? a.x_pitch : a.c;
  P.yp = a.y_pitch > 0 ? a.y_pitch : a.k;
  P.rp = a.r_pitch > 0 ? a.r_pitch : a.k;
  P.tw = tw;
  P.tw_log2 = log2_of(tw);
  P.th = kPixels / tw;
  P.ih = (P.th - 1) * a.stride + 3;
  P.iw = (tw - 1) * a.stride + 3;
  const int step = kThreads / (a.c / 8);  // load_halo's pixels a step
  P.step_dy = step / P.iw;
  P.step_dx = step % P.iw;
  P.tiles_x = (a.q + tw - 1) / tw;
  P.tiles_y = (a.p + P.th - 1) / P.th;
  P.tiles = a.n * P.tiles_x * P.tiles_y;
  P.halo_halves = P.ih * P.iw * a.c;  // whole 16-byte chunks (c is a multiple of 8)
  P.silu = a.silu;
  return P;
}

size_t weight_bytes(const ThinConvArgs& a) {  // Cfg::kHaloOffset: the weights, the zero chunk, the bias
  const int kp = (9 * a.c + 15) / 16 * 16;
  return (static_cast<size_t>(a.k) * (kp + 8) + 8) * 2 + static_cast<size_t>(a.k) * 4;
}

void check_tw(int tw) {
  YOLOCU_CHECK(tw == 16 || tw == 32 || tw == 64, kInternal, "thin_conv: tile width ", tw);
}

}  // namespace

std::string thin_conv_unsupported(const ThinConvArgs& a) {
  if (kernel_for(a) == nullptr) return "channels in / out not in {8, 16, 32} / {8, 16, 32, 64}";
  if (a.stride != 1 && a.stride != 2) return "stride not 1 or 2";
  const int xp = a.x_pitch > 0 ? a.x_pitch : a.c, yp = a.y_pitch > 0 ? a.y_pitch : a.k,
            rp = a.r_pitch > 0 ? a.r_pitch : a.k;
  if (xp < a.c || xp % 8 != 0 || yp < a.k || yp % 2 != 0 || rp < a.k || rp % 2 != 0) return "pixel pitches";
  if (a.n < 1 || a.h < 1 || a.w_ < 1 || a.p < 1 || a.q < 1 || int64_t{a.n} * a.p * a.q >= (int64_t{1} << 31))
    return "sizes";
  if (a.pad_h < 0 || a.pad_w < 0 || a.pad_h > 2 || a.pad_w > 2) return "padding";
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "no CUDA device";
  }
  return major >= 8 ? "" : "needs sm_80 or newer";
}

size_t thin_conv_smem(const ThinConvArgs& a, int tw) {
  check_tw(tw);
  return weight_bytes(a) + 2 * static_cast<size_t>(params_of(a, tw).halo_halves) * 2;
}

int thin_conv_prepare(const ThinConvArgs& a, int tw) {
  const Kernel k = kernel_for(a);
  YOLOCU_CHECK(k != nullptr, kInternal, "thin_conv: ", thin_conv_unsupported(a));
  const size_t bytes = thin_conv_smem(a, tw);
  raise_smem_limit(reinterpret_cast<const void*>(k), bytes);
  int device = 0, sms = 0, per_sm = 0;
  YOLOCU_CUDA_CHECK(cudaGetDevice(&device));
  YOLOCU_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  YOLOCU_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads, bytes));
  YOLOCU_CHECK(per_sm > 0, kUnsupported, "thin_conv: a block of ", bytes, " bytes of shared memory does not fit");
  return std::max(1, std::min(per_sm * sms, params_of(a, tw).tiles));
}

void thin_conv_run(const ThinConvArgs& a, int tw, int blocks, cudaStream_t stream) {
  check_tw(tw);
  const Kernel k = kernel_for(a);
  YOLOCU_CHECK(k != nullptr, kInternal, "thin_conv: ", thin_conv_unsupported(a));
  const Params P = params_of(a, tw);
  k<<<static_cast<unsigned>(std::max(1, blocks)), kThreads, thin_conv_smem(a, tw), stream>>>(P);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::engine

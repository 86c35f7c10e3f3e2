// CUDA letterbox: one launch for a batch of differently sized images (descriptors in a device
// array), uint8 BGR in, planar RGB float32 / float16 out. The exact mode shares its arithmetic with
// the CPU reference through resize_math.hpp.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/check.hpp"
#include "preprocess/letterbox_device.cuh"
#include "preprocess/resize_math.hpp"
#include "yolocu/letterbox.hpp"  // kLetterboxPad
#include "yolocu/letterbox_cuda.hpp"

namespace yolocu {
namespace {

using detail::LinearTap;
using detail::ResizeMode;

constexpr int kBlockX = 32, kBlockY = 8;
constexpr int kMaxSide = 32768;

using cuda_half::from_f;
using letterbox_device::unit;

// Bit-exact OpenCV INTER_LINEAR / 2x area / copy for pixel (x, y) of the resized image: bgr[3].
__device__ __forceinline__ void exact_pixel(const LetterboxCudaDesc& d, int x, int y, int bgr[3]) {
  const uint8_t* base = d.src;
  const int mode = d.resize_mode;
  if (mode == static_cast<int>(ResizeMode::kCopy)) {
    const uint8_t* p = base + static_cast<size_t>(y) * d.pitch_bytes + 3 * x;
    bgr[0] = p[0];
    bgr[1] = p[1];
    bgr[2] = p[2];
  } else if (mode == static_cast<int>(ResizeMode::kArea2x)) {
    const uint8_t* a = base + static_cast<size_t>(2 * y) * d.pitch_bytes + 6 * x;
    const uint8_t* b = a + d.pitch_bytes;
    for (int c = 0; c < 3; ++c) bgr[c] = detail::area2x_mean(a[c], a[c + 3], b[c], b[c + 3]);
  } else {
    const LinearTap tx = detail::linear_tap_x(x, d.scale_x, d.src_w);
    const LinearTap ty = detail::linear_tap_y(y, d.scale_y, d.src_h);
    const uint8_t* r0 = base + static_cast<size_t>(ty.i0) * d.pitch_bytes;
    const uint8_t* r1 = base + static_cast<size_t>(ty.i1) * d.pitch_bytes;
    for (int c = 0; c < 3; ++c) {
      const int h0 = r0[3 * tx.i0 + c] * tx.w0 + r0[3 * tx.i1 + c] * tx.w1;
      const int h1 = r1[3 * tx.i0 + c] * tx.w0 + r1[3 * tx.i1 + c] * tx.w1;
      bgr[c] = detail::vertical_mix(h0, h1, ty.w0, ty.w1);
    }
  }
}

// Float bilinear with aligned pixel centres, clamped at the borders, rounded to 8-bit levels.
__device__ __forceinline__ void fast_pixel(const LetterboxCudaDesc& d, int x, int y, int bgr[3]) {
  const float sx = static_cast<float>(d.src_w) / d.new_w, sy = static_cast<float>(d.src_h) / d.new_h;
  const float fx = fminf(fmaxf((x + 0.5f) * sx - 0.5f, 0.f), static_cast<float>(d.src_w - 1));
  const float fy = fminf(fmaxf((y + 0.5f) * sy - 0.5f, 0.f), static_cast<float>(d.src_h - 1));
  const int x0 = static_cast<int>(fx), y0 = static_cast<int>(fy);
  const int x1 = min(x0 + 1, d.src_w - 1), y1 = min(y0 + 1, d.src_h - 1);
  const float ax = fx - x0, ay = fy - y0;
  const uint8_t* r0 = d.src + static_cast<size_t>(y0) * d.pitch_bytes;
  const uint8_t* r1 = d.src + static_cast<size_t>(y1) * d.pitch_bytes;
  for (int c = 0; c < 3; ++c) {
    const float top = r0[3 * x0 + c] + ax * (r0[3 * x1 + c] - r0[3 * x0 + c]);
    const float bot = r1[3 * x0 + c] + ax * (r1[3 * x1 + c] - r1[3 * x0 + c]);
    bgr[c] = __float2int_rn(top + ay * (bot - top));
  }
}

// Stores kPix consecutive values of one plane: 16-byte (float) or 8-byte (half) vector stores
// when kPix == 4, scalar stores otherwise.
template <typename T, int kPix>
__device__ __forceinline__ void store_run(T* out, const float (&v)[kPix]) {
  if constexpr (kPix == 4 && sizeof(T) == 4) {
    *reinterpret_cast<float4*>(out) = make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (kPix == 4 && sizeof(T) == 2) {
    const __half2 lo = __floats2half2_rn(v[0], v[1]), hi = __floats2half2_rn(v[2], v[3]);
    uint2 packed;
    packed.x = *reinterpret_cast<const unsigned int*>(&lo);
    packed.y = *reinterpret_cast<const unsigned int*>(&hi);
    *reinterpret_cast<uint2*>(out) = packed;
  } else {
    for (int k = 0; k < kPix; ++k) out[k] = from_f<T>(v[k]);
  }
}

// Thread mapping: blockIdx.z is the image of the batch; each thread owns kPix consecutive
// destination pixels (x0 .. x0+kPix-1, y) of that image's dst_w x dst_h letterbox and writes them
// to the R, G and B planes with one vector store per plane (coalesced along x). Pixels in the
// border take the pad value; the others gather their 2x2 source neighbourhood (read-only, through
// L1) and resize in registers. No shared memory, no sync.
template <typename T, bool kExactMode, int kPix>
__global__ void letterbox_kernel(const LetterboxCudaDesc* __restrict__ descs, int dst_w, int dst_h,
                                 T* __restrict__ dst) {
  const int x0 = (blockIdx.x * kBlockX + threadIdx.x) * kPix;
  const int y = blockIdx.y * kBlockY + threadIdx.y;
  if (x0 >= dst_w || y >= dst_h) return;
  const LetterboxCudaDesc d = descs[blockIdx.z];
  const size_t plane = static_cast<size_t>(dst_w) * dst_h;
  T* out = dst + static_cast<size_t>(blockIdx.z) * 3 * plane + static_cast<size_t>(y) * dst_w + x0;
  const int ry = y - d.top;
  float r[kPix], g[kPix], b[kPix];
#pragma unroll
  for (int k = 0; k < kPix; ++k) {
    const int rx = x0 + k - d.left;
    int bgr[3] = {kLetterboxPad, kLetterboxPad, kLetterboxPad};
    if (rx >= 0 && rx < d.new_w && ry >= 0 && ry < d.new_h) {
      if (kExactMode) {
        exact_pixel(d, rx, ry, bgr);
      } else {
        fast_pixel(d, rx, ry, bgr);
      }
    }
    r[k] = unit(bgr[2]);
    g[k] = unit(bgr[1]);
    b[k] = unit(bgr[0]);
  }
  store_run<T, kPix>(out, r);
  store_run<T, kPix>(out + plane, g);
  store_run<T, kPix>(out + 2 * plane, b);
}

template <typename T, int kPix>
void launch_pix(const LetterboxCudaDesc* d_descs, int batch, int dst_w, int dst_h, LetterboxMode mode,
                void* d_dst, cudaStream_t stream) {
  const dim3 block(kBlockX, kBlockY);
  const dim3 grid((dst_w + kBlockX * kPix - 1) / (kBlockX * kPix), (dst_h + kBlockY - 1) / kBlockY, batch);
  if (mode == LetterboxMode::kExact) {
    letterbox_kernel<T, true, kPix><<<grid, block, 0, stream>>>(d_descs, dst_w, dst_h, static_cast<T*>(d_dst));
  } else {
    letterbox_kernel<T, false, kPix><<<grid, block, 0, stream>>>(d_descs, dst_w, dst_h, static_cast<T*>(d_dst));
  }
}

template <typename T>
void launch(const LetterboxCudaDesc* d_descs, int batch, int dst_w, int dst_h, LetterboxMode mode,
            void* d_dst, cudaStream_t stream) {
  // Vector stores need every row start aligned: dst_w % 4 == 0 and an aligned base pointer.
  if (dst_w % 4 == 0 && reinterpret_cast<uintptr_t>(d_dst) % (4 * sizeof(T)) == 0) {
    launch_pix<T, 4>(d_descs, batch, dst_w, dst_h, mode, d_dst, stream);
  } else {
    launch_pix<T, 1>(d_descs, batch, dst_w, dst_h, mode, d_dst, stream);
  }
}

}  // namespace

LetterboxCudaDesc make_letterbox_cuda_desc(const ImageView& d_src, int dst_w, int dst_h,
                                           LetterboxGeometry* geometry) {
  const char* fn = "make_letterbox_cuda_desc";
  YOLOCU_CHECK(d_src.data != nullptr, kInvalidArgument, fn, ": source image data is null");
  YOLOCU_CHECK(d_src.width > 0 && d_src.height > 0, kInvalidArgument, fn, ": source image is ",
               d_src.width, "x", d_src.height);
  YOLOCU_CHECK(d_src.pitch_bytes >= static_cast<size_t>(d_src.width) * 3, kInvalidArgument, fn,
               ": source pitch ", d_src.pitch_bytes, " bytes is less than width * 3");
  YOLOCU_CHECK(dst_w > 0 && dst_h > 0 && dst_w <= kMaxSide && dst_h <= kMaxSide, kInvalidArgument,
               fn, ": destination size ", dst_w, "x", dst_h, " is outside [1, ", kMaxSide, "]");
  const LetterboxGeometry g = letterbox_geometry(d_src.width, d_src.height, dst_w, dst_h);
  YOLOCU_CHECK(g.new_w >= 1 && g.new_h >= 1, kInvalidArgument, fn, ": a ", d_src.width, "x",
               d_src.height, " image would be resized to ", g.new_w, "x", g.new_h,
               " (aspect ratio too extreme)");
  LetterboxCudaDesc d;
  d.src = d_src.data;
  d.pitch_bytes = d_src.pitch_bytes;
  d.src_w = d_src.width;
  d.src_h = d_src.height;
  d.new_w = g.new_w;
  d.new_h = g.new_h;
  d.left = g.left;
  d.top = g.top;
  d.resize_mode = static_cast<int32_t>(detail::resize_mode(d.src_w, d.src_h, d.new_w, d.new_h));
  d.scale_x = detail::resize_scale(d.src_w, d.new_w);
  d.scale_y = detail::resize_scale(d.src_h, d.new_h);
  if (geometry != nullptr) *geometry = g;
  return d;
}

void letterbox_to_input_cuda(const LetterboxCudaDesc* d_descs, int batch, int dst_w, int dst_h,
                             DType dtype, LetterboxMode mode, void* d_dst, cudaStream_t stream) {
  const char* fn = "letterbox_to_input_cuda";
  YOLOCU_CHECK(batch >= 0 && batch <= 65535, kInvalidArgument, fn, ": batch ", batch,
               " is outside [0, 65535]");
  if (batch == 0) return;
  YOLOCU_CHECK(d_descs != nullptr && d_dst != nullptr, kInvalidArgument, fn,
               ": null descriptor or destination pointer");
  YOLOCU_CHECK(dst_w > 0 && dst_h > 0 && dst_w <= kMaxSide && dst_h <= kMaxSide, kInvalidArgument,
               fn, ": destination size ", dst_w, "x", dst_h, " is outside [1, ", kMaxSide, "]");
  YOLOCU_CHECK(mode == LetterboxMode::kExact || mode == LetterboxMode::kFast, kInvalidArgument, fn,
               ": unknown mode");
  if (dtype == DType::kFloat32) {
    launch<float>(d_descs, batch, dst_w, dst_h, mode, d_dst, stream);
  } else if (dtype == DType::kFloat16) {
    launch<__half>(d_descs, batch, dst_w, dst_h, mode, d_dst, stream);
  } else {
    detail::fail(ErrorCode::kInvalidArgument, fn, ": dtype ", dtype_name(dtype),
                 " is not supported (float32 or float16)");
  }
  const cudaError_t err = cudaGetLastError();
  YOLOCU_CHECK(err == cudaSuccess, kCuda, fn, ": kernel launch failed: ", cudaGetErrorString(err));
}

}  // namespace yolocu

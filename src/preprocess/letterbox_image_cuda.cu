// CUDA letterbox of DeviceImages (BGR, RGB, NV12): one launch for a batch of differently sized
// images and formats. Each source pixel the resize reads is fetched and, for NV12, converted to BGR
// in registers (yuv_math.hpp, shared with the CPU reference nv12_to_bgr); the resize arithmetic is
// resize_math.hpp's, shared with the CPU letterbox. So kExact equals the CPU's
// letterbox_to_input(nv12_to_bgr(image)) bit for bit.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/check.hpp"
#include "preprocess/letterbox_device.cuh"
#include "preprocess/resize_math.hpp"
#include "preprocess/yuv_math.hpp"
#include "yolocu/letterbox.hpp"  // kLetterboxPad
#include "yolocu/letterbox_image_cuda.hpp"

namespace yolocu {
namespace {

using detail::LinearTap;
using detail::ResizeMode;

constexpr int kBlockX = 32, kBlockY = 8;
constexpr int kMaxSide = 32768;

// Source pixel (x, y) of the image as B, G, R.
__device__ __forceinline__ void fetch(const DeviceLetterboxDesc& d, const detail::YuvCoeffs& yuv, int x, int y,
                                      int bgr[3]) {
  if (d.format == static_cast<int32_t>(PixelFormat::kNv12)) {
    detail::nv12_pixel(d.plane0, d.pitch0, d.plane1, d.pitch1, x, y, yuv, bgr);
    return;
  }
  const uint8_t* p = d.plane0 + static_cast<uint64_t>(y) * d.pitch0 + 3 * x;
  const bool rgb = d.format == static_cast<int32_t>(PixelFormat::kRgb);
  bgr[0] = p[rgb ? 2 : 0];
  bgr[1] = p[1];
  bgr[2] = p[rgb ? 0 : 2];
}

// Bit-exact OpenCV INTER_LINEAR / 2x area / copy of the converted image, pixel (x, y) of the resize.
__device__ __forceinline__ void exact_pixel(const DeviceLetterboxDesc& d, const detail::YuvCoeffs& yuv, int x, int y,
                                            int bgr[3]) {
  if (d.resize_mode == static_cast<int32_t>(ResizeMode::kCopy)) {
    fetch(d, yuv, x, y, bgr);
  } else if (d.resize_mode == static_cast<int32_t>(ResizeMode::kArea2x)) {
    int a[3], b[3], c[3], e[3];
    fetch(d, yuv, 2 * x, 2 * y, a);
    fetch(d, yuv, 2 * x + 1, 2 * y, b);
    fetch(d, yuv, 2 * x, 2 * y + 1, c);
    fetch(d, yuv, 2 * x + 1, 2 * y + 1, e);
    for (int k = 0; k < 3; ++k) bgr[k] = detail::area2x_mean(a[k], b[k], c[k], e[k]);
  } else {
    const LinearTap tx = detail::linear_tap_x(x, d.scale_x, d.src_w);
    const LinearTap ty = detail::linear_tap_y(y, d.scale_y, d.src_h);
    int p00[3], p01[3], p10[3], p11[3];
    fetch(d, yuv, tx.i0, ty.i0, p00);
    fetch(d, yuv, tx.i1, ty.i0, p01);
    fetch(d, yuv, tx.i0, ty.i1, p10);
    fetch(d, yuv, tx.i1, ty.i1, p11);
    for (int k = 0; k < 3; ++k) {
      const int h0 = p00[k] * tx.w0 + p01[k] * tx.w1;
      const int h1 = p10[k] * tx.w0 + p11[k] * tx.w1;
      bgr[k] = detail::vertical_mix(h0, h1, ty.w0, ty.w1);
    }
  }
}

// Float bilinear with aligned pixel centres (letterbox_cuda.cu's kFast) of the converted pixels.
__device__ __forceinline__ void fast_pixel(const DeviceLetterboxDesc& d, const detail::YuvCoeffs& yuv, int x, int y,
                                           int bgr[3]) {
  const float sx = static_cast<float>(d.src_w) / d.new_w, sy = static_cast<float>(d.src_h) / d.new_h;
  const float fx = fminf(fmaxf((x + 0.5f) * sx - 0.5f, 0.f), static_cast<float>(d.src_w - 1));
  const float fy = fminf(fmaxf((y + 0.5f) * sy - 0.5f, 0.f), static_cast<float>(d.src_h - 1));
  const int x0 = static_cast<int>(fx), y0 = static_cast<int>(fy);
  const int x1 = min(x0 + 1, d.src_w - 1), y1 = min(y0 + 1, d.src_h - 1);
  const float ax = fx - x0, ay = fy - y0;
  int p00[3], p01[3], p10[3], p11[3];
  fetch(d, yuv, x0, y0, p00);
  fetch(d, yuv, x1, y0, p01);
  fetch(d, yuv, x0, y1, p10);
  fetch(d, yuv, x1, y1, p11);
  for (int k = 0; k < 3; ++k) {
    const float top = p00[k] + ax * (p01[k] - p00[k]);
    const float bot = p10[k] + ax * (p11[k] - p10[k]);
    bgr[k] = __float2int_rn(top + ay * (bot - top));
  }
}

using cuda_half::from_f;
using letterbox_device::unit;

// Thread mapping: blockIdx.z is the image of the batch, each thread one destination pixel (x, y)
// of its dst_w x dst_h letterbox, written to the R, G and B planes (coalesced along x). Border
// pixels take the pad value; the others fetch (and convert) their source neighbourhood through L1
// and resize in registers. No shared memory, no sync. The conversion constants are computed per
// thread from the descriptor's range (a few integer operations).
template <typename T, bool kExactMode>
__global__ void letterbox_images_kernel(const DeviceLetterboxDesc* __restrict__ descs, int dst_w, int dst_h,
                                        T* __restrict__ dst) {
  const int x = blockIdx.x * kBlockX + threadIdx.x;
  const int y = blockIdx.y * kBlockY + threadIdx.y;
  if (x >= dst_w || y >= dst_h) return;
  const DeviceLetterboxDesc d = descs[blockIdx.z];
  const detail::YuvCoeffs yuv = detail::sws_bt601_coeffs(d.full_range != 0);
  const size_t plane = static_cast<size_t>(dst_w) * dst_h;
  T* out = dst + static_cast<size_t>(blockIdx.z) * 3 * plane + static_cast<size_t>(y) * dst_w + x;
  const int rx = x - d.left, ry = y - d.top;
  int bgr[3] = {kLetterboxPad, kLetterboxPad, kLetterboxPad};
  if (rx >= 0 && rx < d.new_w && ry >= 0 && ry < d.new_h) {
    if (kExactMode) {
      exact_pixel(d, yuv, rx, ry, bgr);
    } else {
      fast_pixel(d, yuv, rx, ry, bgr);
    }
  }
  out[0] = from_f<T>(unit(bgr[2]));
  out[plane] = from_f<T>(unit(bgr[1]));
  out[2 * plane] = from_f<T>(unit(bgr[0]));
}

template <typename T>
void launch(const DeviceLetterboxDesc* d_descs, int batch, int dst_w, int dst_h, LetterboxMode mode, void* d_dst,
            cudaStream_t stream) {
  const dim3 block(kBlockX, kBlockY);
  const dim3 grid((dst_w + kBlockX - 1) / kBlockX, (dst_h + kBlockY - 1) / kBlockY, batch);
  if (mode == LetterboxMode::kExact) {
    letterbox_images_kernel<T, true><<<grid, block, 0, stream>>>(d_descs, dst_w, dst_h, static_cast<T*>(d_dst));
  } else {
    letterbox_images_kernel<T, false><<<grid, block, 0, stream>>>(d_descs, dst_w, dst_h, static_cast<T*>(d_dst));
  }
}

}  // namespace

DeviceLetterboxDesc make_device_letterbox_desc(const DeviceImage& im, int dst_w, int dst_h,
                                               LetterboxGeometry* geometry, const char* what) {
  const bool nv12 = im.format == PixelFormat::kNv12;
  YOLOCU_CHECK(nv12 || im.format == PixelFormat::kBgr || im.format == PixelFormat::kRgb, kInvalidArgument, what,
               ": unknown pixel format ", static_cast<int>(im.format));
  YOLOCU_CHECK(im.data != nullptr, kInvalidArgument, what, ": ", pixel_format_name(im.format),
               " image data is null");
  YOLOCU_CHECK(im.width > 0 && im.height > 0, kInvalidArgument, what, ": image size ", im.width, "x", im.height,
               " (both must be > 0)");
  const size_t row = static_cast<size_t>(im.width) * (nv12 ? 1 : 3);
  YOLOCU_CHECK(im.pitch_bytes >= row, kInvalidArgument, what, ": pitch ", im.pitch_bytes, " bytes < ",
               nv12 ? "width" : "width * 3", " = ", row);
  size_t chroma_pitch = 0;
  if (nv12) {
    YOLOCU_CHECK(im.chroma != nullptr, kInvalidArgument, what, ": nv12 image without a chroma plane");
    chroma_pitch = im.chroma_pitch_bytes ? im.chroma_pitch_bytes : im.pitch_bytes;
    YOLOCU_CHECK(chroma_pitch >= 2 * static_cast<size_t>((im.width + 1) / 2), kInvalidArgument, what,
                 ": chroma pitch ", chroma_pitch, " bytes < 2 * ((width + 1) / 2)");
    YOLOCU_CHECK(im.range == YuvRange::kLimited || im.range == YuvRange::kFull, kInvalidArgument, what,
                 ": unknown YUV range");
  }
  YOLOCU_CHECK(dst_w > 0 && dst_h > 0 && dst_w <= kMaxSide && dst_h <= kMaxSide, kInvalidArgument, what,
               ": destination size ", dst_w, "x", dst_h, " is outside [1, ", kMaxSide, "]");
  const LetterboxGeometry g = letterbox_geometry(im.width, im.height, dst_w, dst_h);
  YOLOCU_CHECK(g.new_w >= 1 && g.new_h >= 1, kInvalidArgument, what, ": a ", im.width, "x", im.height,
               " image would be resized to ", g.new_w, "x", g.new_h, " (aspect ratio too extreme)");
  DeviceLetterboxDesc d;
  d.plane0 = im.data;
  d.plane1 = nv12 ? im.chroma : nullptr;
  d.pitch0 = im.pitch_bytes;
  d.pitch1 = chroma_pitch;
  d.src_w = im.width;
  d.src_h = im.height;
  d.new_w = g.new_w;
  d.new_h = g.new_h;
  d.left = g.left;
  d.top = g.top;
  d.resize_mode = static_cast<int32_t>(detail::resize_mode(d.src_w, d.src_h, d.new_w, d.new_h));
  d.format = static_cast<int32_t>(im.format);
  d.full_range = nv12 && im.range == YuvRange::kFull ? 1 : 0;
  d.scale_x = detail::resize_scale(d.src_w, d.new_w);
  d.scale_y = detail::resize_scale(d.src_h, d.new_h);
  if (geometry != nullptr) *geometry = g;
  return d;
}

void letterbox_images_cuda(const DeviceLetterboxDesc* d_descs, int batch, int dst_w, int dst_h, DType dtype,
                           LetterboxMode mode, void* d_dst, cudaStream_t stream) {
  const char* fn = "letterbox_images_cuda";
  YOLOCU_CHECK(batch >= 0 && batch <= 65535, kInvalidArgument, fn, ": batch ", batch, " is outside [0, 65535]");
  if (batch == 0) return;
  YOLOCU_CHECK(d_descs != nullptr && d_dst != nullptr, kInvalidArgument, fn,
               ": null descriptor or destination pointer");
  YOLOCU_CHECK(dst_w > 0 && dst_h > 0 && dst_w <= kMaxSide && dst_h <= kMaxSide, kInvalidArgument, fn,
               ": destination size ", dst_w, "x", dst_h, " is outside [1, ", kMaxSide, "]");
  YOLOCU_CHECK(mode == LetterboxMode::kExact || mode == LetterboxMode::kFast, kInvalidArgument, fn,
               ": unknown mode");
  if (dtype == DType::kFloat32) {
    launch<float>(d_descs, batch, dst_w, dst_h, mode, d_dst, stream);
  } else if (dtype == DType::kFloat16) {
    launch<__half>(d_descs, batch, dst_w, dst_h, mode, d_dst, stream);
  } else {
    detail::fail(ErrorCode::kInvalidArgument, fn, ": dtype ", dtype_name(dtype), " is not supported (float32 or float16)");
  }
  const cudaError_t err = cudaGetLastError();
  YOLOCU_CHECK(err == cudaSuccess, kCuda, fn, ": kernel launch failed: ", cudaGetErrorString(err));
}

}  // namespace yolocu

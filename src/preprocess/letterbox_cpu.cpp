// CPU letterbox: OpenCV 4.6 cv::resize(INTER_LINEAR) arithmetic (see resize_math.hpp) fused with
// the padding and, for the model input, the HWC BGR uint8 -> CHW RGB float conversion. One pass
// over the destination rows, OpenMP over rows; each thread keeps the horizontal sums of the last
// two source rows it used, so a source row is filtered horizontally about once.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/check.hpp"
#include "preprocess/resize_math.hpp"
#include "yolocu/letterbox.hpp"

namespace yolocu {
namespace {

constexpr int kMaxSide = 32768;             // destination sides are limited to keep int math safe
constexpr int64_t kParallelMinPixels = 1 << 15;  // below this, one thread is faster

using detail::LinearTap;
using detail::ResizeMode;

LetterboxGeometry checked_geometry(const ImageView& src, int dst_w, int dst_h, const void* dst,
                                   const char* fn) {
  YOLOCU_CHECK(src.data != nullptr, kInvalidArgument, fn, ": source image data is null");
  YOLOCU_CHECK(src.width > 0 && src.height > 0, kInvalidArgument, fn, ": source image is ",
               src.width, "x", src.height);
  YOLOCU_CHECK(src.pitch_bytes >= static_cast<size_t>(src.width) * 3, kInvalidArgument, fn,
               ": source pitch ", src.pitch_bytes, " bytes is less than width * 3 = ",
               static_cast<size_t>(src.width) * 3);
  YOLOCU_CHECK(dst_w > 0 && dst_h > 0 && dst_w <= kMaxSide && dst_h <= kMaxSide,
               kInvalidArgument, fn, ": destination size ", dst_w, "x", dst_h,
               " is outside [1, ", kMaxSide, "]");
  YOLOCU_CHECK(dst != nullptr, kInvalidArgument, fn, ": destination is null");
  const LetterboxGeometry g = letterbox_geometry(src.width, src.height, dst_w, dst_h);
  YOLOCU_CHECK(g.new_w >= 1 && g.new_h >= 1, kInvalidArgument, fn, ": a ", src.width, "x",
               src.height, " image would be resized to ", g.new_w, "x", g.new_h,
               " inside ", dst_w, "x", dst_h, " (aspect ratio too extreme)");
  return g;
}

// Everything about the resize that does not depend on the pixels.
struct ResizePlan {
  ResizeMode mode = ResizeMode::kCopy;
  int new_w = 0, new_h = 0;
  std::vector<LinearTap> xtaps, ytaps;
};

ResizePlan make_plan(const ImageView& src, const LetterboxGeometry& g) {
  ResizePlan p;
  p.new_w = g.new_w;
  p.new_h = g.new_h;
  p.mode = detail::resize_mode(src.width, src.height, g.new_w, g.new_h);
  if (p.mode == ResizeMode::kLinear) {
    const double sx = detail::resize_scale(src.width, g.new_w);
    const double sy = detail::resize_scale(src.height, g.new_h);
    p.xtaps.resize(static_cast<size_t>(g.new_w));
    for (int dx = 0; dx < g.new_w; ++dx) p.xtaps[dx] = detail::linear_tap_x(dx, sx, src.width);
    p.ytaps.resize(static_cast<size_t>(g.new_h));
    for (int dy = 0; dy < g.new_h; ++dy) p.ytaps[dy] = detail::linear_tap_y(dy, sy, src.height);
  }
  return p;
}

// Per-thread scratch of the linear resize: horizontal sums of two source rows, tagged by row.
struct RowCache {
  std::array<std::vector<int>, 2> buf;
  std::array<int, 2> tag{{-1, -1}};
  std::vector<uint8_t> out;  // one resized row, for consumers that convert it further
};

void horizontal_pass(const uint8_t* s, const LinearTap* taps, int new_w, int* out) {
  for (int dx = 0; dx < new_w; ++dx) {
    const LinearTap t = taps[dx];
    const uint8_t* p0 = s + 3 * t.i0;
    const uint8_t* p1 = s + 3 * t.i1;
    int* o = out + 3 * dx;
    o[0] = p0[0] * t.w0 + p1[0] * t.w1;
    o[1] = p0[1] * t.w0 + p1[1] * t.w1;
    o[2] = p0[2] * t.w0 + p1[2] * t.w1;
  }
}

const int* cached_row(const ImageView& src, const ResizePlan& p, int r, int keep, RowCache& c) {
  if (c.tag[0] == r) return c.buf[0].data();
  if (c.tag[1] == r) return c.buf[1].data();
  const int k = c.tag[0] == keep ? 1 : 0;
  horizontal_pass(src.data + static_cast<size_t>(r) * src.pitch_bytes, p.xtaps.data(), p.new_w,
                  c.buf[k].data());
  c.tag[k] = r;
  return c.buf[k].data();
}

// Resized row y (new_w * 3 bytes, BGR) written to out.
void resize_row(const ImageView& src, const ResizePlan& p, int y, RowCache& c, uint8_t* out) {
  const int n = p.new_w * 3;
  switch (p.mode) {
    case ResizeMode::kCopy:
      std::memcpy(out, src.data + static_cast<size_t>(y) * src.pitch_bytes, static_cast<size_t>(n));
      return;
    case ResizeMode::kArea2x: {
      const uint8_t* a = src.data + static_cast<size_t>(2 * y) * src.pitch_bytes;
      const uint8_t* b = a + src.pitch_bytes;
      for (int dx = 0; dx < p.new_w; ++dx) {
        const int s = 6 * dx;
        for (int ch = 0; ch < 3; ++ch) {
          out[3 * dx + ch] = detail::area2x_mean(a[s + ch], a[s + 3 + ch], b[s + ch], b[s + 3 + ch]);
        }
      }
      return;
    }
    case ResizeMode::kLinear: {
      const LinearTap t = p.ytaps[y];
      const int* h0 = cached_row(src, p, t.i0, t.i1, c);
      const int* h1 = cached_row(src, p, t.i1, t.i0, c);
      for (int x = 0; x < n; ++x) out[x] = detail::vertical_mix(h0[x], h1[x], t.w0, t.w1);
      return;
    }
  }
}

std::vector<RowCache> make_caches(const ResizePlan& p, int threads) {
  std::vector<RowCache> caches(static_cast<size_t>(threads));
  const size_t n = static_cast<size_t>(p.new_w) * 3;
  for (RowCache& c : caches) {
    if (p.mode == ResizeMode::kLinear) {
      c.buf[0].resize(n);
      c.buf[1].resize(n);
    }
    c.out.resize(n);
  }
  return caches;
}

// Calls row_fn(dy, cache) for every destination row, rows split in contiguous blocks over threads.
template <typename RowFn>
void for_each_row(int dst_h, int64_t pixels, std::vector<RowCache>& caches, RowFn row_fn) {
  const int threads = static_cast<int>(caches.size());
#pragma omp parallel num_threads(threads) if (threads > 1 && pixels >= kParallelMinPixels)
  {
    RowCache& c = caches[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
    for (int dy = 0; dy < dst_h; ++dy) row_fn(dy, c);
  }
}

// value / 255.f for every byte value, as float32 or as IEEE half bits.
template <typename T>
std::array<T, 256> make_lut() {
  std::array<T, 256> lut{};
  for (int v = 0; v < 256; ++v) {
    const float f = static_cast<float>(v) / 255.f;
    if constexpr (std::is_same_v<T, float>) {
      lut[v] = f;
    } else {
      lut[v] = float_to_half(f);
    }
  }
  return lut;
}

template <typename T>
void letterbox_planes(const ImageView& src, const LetterboxGeometry& g, T* dst) {
  static const std::array<T, 256> lut = make_lut<T>();
  const ResizePlan plan = make_plan(src, g);
  std::vector<RowCache> caches = make_caches(plan, omp_get_max_threads());
  const size_t plane = static_cast<size_t>(g.dst_w) * g.dst_h;
  const T pad = lut[kLetterboxPad];
  for_each_row(g.dst_h, int64_t{g.dst_w} * g.dst_h, caches, [&](int dy, RowCache& c) {
    T* r = dst + static_cast<size_t>(dy) * g.dst_w;  // plane 0 = R
    T* gr = r + plane;                                // plane 1 = G
    T* b = gr + plane;                                // plane 2 = B
    const int y = dy - g.top;
    if (y < 0 || y >= g.new_h) {
      std::fill(r, r + g.dst_w, pad);
      std::fill(gr, gr + g.dst_w, pad);
      std::fill(b, b + g.dst_w, pad);
      return;
    }
    std::fill(r, r + g.left, pad);
    std::fill(gr, gr + g.left, pad);
    std::fill(b, b + g.left, pad);
    const int right = g.left + g.new_w;
    std::fill(r + right, r + g.dst_w, pad);
    std::fill(gr + right, gr + g.dst_w, pad);
    std::fill(b + right, b + g.dst_w, pad);
    uint8_t* row = c.out.data();
    resize_row(src, plan, y, c, row);
    for (int x = 0; x < g.new_w; ++x) {
      b[g.left + x] = lut[row[3 * x]];
      gr[g.left + x] = lut[row[3 * x + 1]];
      r[g.left + x] = lut[row[3 * x + 2]];
    }
  });
}

}  // namespace

LetterboxGeometry letterbox_bgr(const ImageView& src, int dst_w, int dst_h, uint8_t* dst) {
  const LetterboxGeometry g = checked_geometry(src, dst_w, dst_h, dst, "letterbox_bgr");
  const ResizePlan plan = make_plan(src, g);
  std::vector<RowCache> caches = make_caches(plan, omp_get_max_threads());
  const size_t row_bytes = static_cast<size_t>(dst_w) * 3;
  for_each_row(dst_h, int64_t{dst_w} * dst_h, caches, [&](int dy, RowCache& c) {
    uint8_t* d = dst + static_cast<size_t>(dy) * row_bytes;
    const int y = dy - g.top;
    if (y < 0 || y >= g.new_h) {
      std::memset(d, kLetterboxPad, row_bytes);
      return;
    }
    const size_t left = static_cast<size_t>(g.left) * 3, body = static_cast<size_t>(g.new_w) * 3;
    std::memset(d, kLetterboxPad, left);
    std::memset(d + left + body, kLetterboxPad, row_bytes - left - body);
    resize_row(src, plan, y, c, d + left);
  });
  return g;
}

LetterboxGeometry letterbox_to_input(const ImageView& src, int dst_w, int dst_h, DType dtype,
                                     void* dst) {
  const LetterboxGeometry g = checked_geometry(src, dst_w, dst_h, dst, "letterbox_to_input");
  if (dtype == DType::kFloat32) {
    letterbox_planes(src, g, static_cast<float*>(dst));
  } else if (dtype == DType::kFloat16) {
    letterbox_planes(src, g, static_cast<uint16_t*>(dst));
  } else {
    detail::fail(ErrorCode::kInvalidArgument, "letterbox_to_input: dtype ", dtype_name(dtype),
                 " is not supported (float32 or float16)");
  }
  return g;
}

}  // namespace yolocu

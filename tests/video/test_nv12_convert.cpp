// The NV12 -> BGR conversion of the GPU letterbox (src/preprocess/yuv_math.hpp, through its CPU
// reference nv12_to_bgr) against FFmpeg's own: the CPU video path's BgrConverter (libswscale, as
// cv2.VideoCapture) on the same YUV 4:2:0 pictures. Expected bit-exact on x86-64 (swscale's SIMD
// converter, whose arithmetic yuv_math.hpp reproduces); the test says which CPU features it ran
// with. Random pictures of several sizes (coded size larger than the picture, odd widths), an
// exhaustive sweep of every (Y, U, V) triple, limited and full range.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include <libavutil/cpu.h>
}

#include "video/bgr_convert_cpu.hpp"
#include "video/ffmpeg_util.hpp"
#include "yolocu/device_image.hpp"
#include "yolocu/error.hpp"

namespace yolocu {
namespace {

// A YUV420P (or YUVJ420P) AVFrame of w x h, and the same pixels as NV12 planes.
struct Picture {
  video::FramePtr frame;
  std::vector<uint8_t> luma, chroma;  // NV12, dense (pitch = w and 2 * ((w + 1) / 2))
  int w = 0, h = 0;
};

Picture make_picture(int w, int h, bool full_range, const std::function<void(int, int, uint8_t*, uint8_t*, uint8_t*)>& fill) {
  Picture p;
  p.w = w;
  p.h = h;
  p.frame = video::make_frame();
  p.frame->format = full_range ? AV_PIX_FMT_YUVJ420P : AV_PIX_FMT_YUV420P;
  p.frame->width = w;
  p.frame->height = h;
  EXPECT_EQ(av_frame_get_buffer(p.frame.get(), 32), 0);
  const int cw = (w + 1) / 2, ch = (h + 1) / 2;
  p.luma.resize(static_cast<size_t>(w) * h);
  p.chroma.resize(static_cast<size_t>(2 * cw) * ch);
  // every byte of every plane, padding included, is set (swscale's SIMD reads past the width)
  for (int i = 0; i < 3; ++i) {
    const int rows = i ? ch : h;
    std::memset(p.frame->data[i], 0x5a, static_cast<size_t>(p.frame->linesize[i]) * rows);
  }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t Y, U, V;
      fill(x, y, &Y, &U, &V);
      p.frame->data[0][y * p.frame->linesize[0] + x] = Y;
      p.luma[static_cast<size_t>(y) * w + x] = Y;
      if (x % 2 == 0 && y % 2 == 0) {
        p.frame->data[1][(y / 2) * p.frame->linesize[1] + x / 2] = U;
        p.frame->data[2][(y / 2) * p.frame->linesize[2] + x / 2] = V;
        p.chroma[static_cast<size_t>(y / 2) * 2 * cw + x] = U;
        p.chroma[static_cast<size_t>(y / 2) * 2 * cw + x + 1] = V;
      }
    }
  return p;
}

std::string cpu_features() {
  const int f = av_get_cpu_flags();
  std::string s;
  if (f & AV_CPU_FLAG_SSSE3) s += "ssse3 ";
  if (f & AV_CPU_FLAG_MMXEXT) s += "mmxext ";
  if (f & AV_CPU_FLAG_AVX2) s += "avx2 ";
  return s.empty() ? "none" : s;
}

// Converts with swscale (BgrConverter, coded size = the picture's) and with nv12_to_bgr; returns
// the number of differing bytes (and the first one in *where).
size_t compare(const Picture& p, bool full_range, int coded_w, int coded_h, std::string* where) {
  video::BgrConverter conv;
  Image ffmpeg;
  conv.convert(*p.frame, coded_w, coded_h, p.w, p.h, ffmpeg);
  const Image ours = nv12_to_bgr(p.luma.data(), static_cast<size_t>(p.w), p.chroma.data(),
                                 static_cast<size_t>(2 * ((p.w + 1) / 2)), p.w, p.h,
                                 full_range ? YuvRange::kFull : YuvRange::kLimited);
  EXPECT_EQ(ffmpeg.width(), p.w);
  EXPECT_EQ(ffmpeg.height(), p.h);
  size_t diff = 0;
  for (int y = 0; y < p.h; ++y)
    for (int x = 0; x < 3 * p.w; ++x)
      if (ffmpeg.row(y)[x] != ours.row(y)[x]) {
        if (diff++ == 0 && where) {
          const int px = x / 3;
          *where = "first at (" + std::to_string(px) + ", " + std::to_string(y) + ") channel " + std::to_string(x % 3) +
                   ": swscale " + std::to_string(ffmpeg.row(y)[x]) + ", ours " + std::to_string(ours.row(y)[x]) +
                   " (Y " + std::to_string(p.luma[static_cast<size_t>(y) * p.w + px]) + ")";
        }
      }
  return diff;
}

TEST(Nv12Convert, RandomPicturesEqualSwscale) {
  video::ensure_ffmpeg_initialised();  // FFmpeg's log captured, not printed
  std::mt19937 rng(7);
  struct Size { int w, h, coded_w, coded_h; };
  // 1920x1080 decoded at 1920x1088 (H.264's coded size, as the CPU path converts it), small and
  // odd widths, heights even (H.264 / HEVC coded heights always are)
  const Size sizes[] = {{640, 480, 640, 480}, {1920, 1080, 1920, 1088}, {638, 360, 640, 368}, {2, 2, 2, 2},
                        {641, 482, 641, 482}, {33, 18, 48, 32}};
  for (bool full : {false, true})
    for (const Size& s : sizes) {
      const Picture p = make_picture(s.w, s.h, full, [&](int, int, uint8_t* Y, uint8_t* U, uint8_t* V) {
        *Y = static_cast<uint8_t>(rng());
        *U = static_cast<uint8_t>(rng());
        *V = static_cast<uint8_t>(rng());
      });
      std::string where;
      // the coded size only changes swscale's context size (the picture is the top-left part)
      Picture coded = make_picture(s.coded_w, s.coded_h, full, [&](int x, int y, uint8_t* Y, uint8_t* U, uint8_t* V) {
        const bool in = x < s.w && y < s.h;
        *Y = in ? p.luma[static_cast<size_t>(y) * s.w + x] : 16;
        *U = in ? p.chroma[static_cast<size_t>(y / 2) * 2 * ((s.w + 1) / 2) + (x & ~1)] : 128;
        *V = in ? p.chroma[static_cast<size_t>(y / 2) * 2 * ((s.w + 1) / 2) + (x & ~1) + 1] : 128;
      });
      video::BgrConverter conv;
      Image ffmpeg;
      conv.convert(*coded.frame, s.coded_w, s.coded_h, s.w, s.h, ffmpeg);
      const Image ours = nv12_to_bgr(p.luma.data(), static_cast<size_t>(s.w), p.chroma.data(),
                                     static_cast<size_t>(2 * ((s.w + 1) / 2)), s.w, s.h,
                                     full ? YuvRange::kFull : YuvRange::kLimited);
      ASSERT_EQ(ffmpeg.width(), s.w);
      ASSERT_EQ(ffmpeg.height(), s.h);
      size_t diff = 0;
      for (int y = 0; y < s.h; ++y) diff += std::memcmp(ffmpeg.row(y), ours.row(y), 3 * static_cast<size_t>(s.w)) != 0;
      EXPECT_EQ(diff, 0u) << s.w << "x" << s.h << " (coded " << s.coded_w << "x" << s.coded_h << "), "
                          << (full ? "full" : "limited") << " range: " << diff << " rows differ; CPU features "
                          << cpu_features() << " " << where;
      EXPECT_EQ(compare(p, full, s.w, s.h, &where), 0u) << s.w << "x" << s.h << " " << where;
    }
}

// Every (Y, U, V) triple: a 4096 x 4096 picture of 2x2 blocks, block b holding U = b / 64 / 256,
// V = b / 64 % 256 and the four luma values 4 * (b % 64) + 0..3.
TEST(Nv12Convert, EveryYuvTripleEqualsSwscale) {
  video::ensure_ffmpeg_initialised();
  for (bool full : {false, true}) {
    const int n = 4096;
    const Picture p = make_picture(n, n, full, [&](int x, int y, uint8_t* Y, uint8_t* U, uint8_t* V) {
      const int b = (y / 2) * (n / 2) + x / 2;
      *Y = static_cast<uint8_t>(4 * (b % 64) + (y % 2) * 2 + x % 2);
      *U = static_cast<uint8_t>(b / 64 / 256);
      *V = static_cast<uint8_t>(b / 64 % 256);
    });
    std::string where;
    EXPECT_EQ(compare(p, full, n, n, &where), 0u)
        << (full ? "full" : "limited") << " range; CPU features " << cpu_features() << "; " << where;
  }
}

TEST(Nv12Convert, BadArgumentsAreRefused) {
  const uint8_t b[64] = {};
  EXPECT_THROW(nv12_to_bgr(nullptr, 4, b, 4, 4, 4), Error);
  EXPECT_THROW(nv12_to_bgr(b, 4, nullptr, 4, 4, 4), Error);
  EXPECT_THROW(nv12_to_bgr(b, 3, b, 4, 4, 4), Error);  // luma pitch < width
  EXPECT_THROW(nv12_to_bgr(b, 5, b, 4, 5, 4), Error);  // chroma pitch < 2 * ((5 + 1) / 2)
  EXPECT_THROW(nv12_to_bgr(b, 4, b, 4, 0, 4), Error);
  try {
    nv12_to_bgr(b, 3, b, 4, 4, 4);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("luma pitch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace yolocu

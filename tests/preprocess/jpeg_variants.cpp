#include "preprocess/jpeg_variants.hpp"

// clang-format off
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <random>

namespace yolocu::test {

Image jpeg_test_pattern(int w, int h) {
  Image m(w, h);
  std::mt19937 rng(12345);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = m.row(y) + 3 * static_cast<size_t>(x);
      const bool block = ((x / 37) + (y / 29)) % 3 == 0;  // hard-edged coloured blocks
      const int noise = static_cast<int>(rng() % 24);
      p[0] = static_cast<uint8_t>(block ? 230 : (x * 255) / std::max(1, w - 1));
      p[1] = static_cast<uint8_t>(block ? 20 : (y * 255) / std::max(1, h - 1));
      p[2] = static_cast<uint8_t>(block ? 40 : ((x + y) * 3 + noise) & 0xff);
    }
  return m;
}

namespace {

struct JpegSettings {
  int components = 3;
  J_COLOR_SPACE space = JCS_EXT_BGR;
  int h_samp = 0, v_samp = 0;  // luma sampling factors; 0: libjpeg's default (2x2, 4:2:0)
  bool progressive = false;
  int restart_interval = 0;  // in MCUs; 0: none
};

// libjpeg into memory, quality 95; `rows(y, buffer)` fills row y of `components` samples per pixel.
template <typename Fill>
std::vector<uint8_t> libjpeg_encode(int w, int h, const JpegSettings& s, Fill rows) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = s.components;
  c.in_color_space = s.space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  if (s.h_samp > 0) {
    c.comp_info[0].h_samp_factor = s.h_samp;
    c.comp_info[0].v_samp_factor = s.v_samp;
  }
  if (s.progressive) jpeg_simple_progression(&c);
  c.restart_interval = static_cast<unsigned int>(s.restart_interval);
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(static_cast<size_t>(w) * static_cast<size_t>(s.components));
  while (c.next_scanline < c.image_height) {
    rows(static_cast<int>(c.next_scanline), row.data());
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  std::free(buf);
  return out;
}

std::vector<uint8_t> encode_bgr(const Image& bgr, const JpegSettings& s) {
  return libjpeg_encode(bgr.width(), bgr.height(), s, [&](int y, uint8_t* row) {
    std::memcpy(row, bgr.row(y), bgr.pitch_bytes());
  });
}

}  // namespace

std::vector<uint8_t> encode_jpeg(const Image& bgr, bool progressive, int restart_interval) {
  JpegSettings s;
  s.progressive = progressive;
  s.restart_interval = restart_interval;
  return encode_bgr(bgr, s);
}

std::vector<uint8_t> encode_jpeg_grey(const Image& bgr) {
  JpegSettings s;
  s.components = 1;
  s.space = JCS_GRAYSCALE;
  return libjpeg_encode(bgr.width(), bgr.height(), s, [&](int y, uint8_t* row) {
    const uint8_t* p = bgr.row(y);
    for (int x = 0; x < bgr.width(); ++x, p += 3)  // Y = 0.114 B + 0.587 G + 0.299 R
      row[x] = static_cast<uint8_t>((p[0] * 3735 + p[1] * 19235 + p[2] * 9798 + (1 << 14)) >> 15);
  });
}

std::vector<uint8_t> encode_jpeg_sampling(const Image& bgr, int h, int v) {
  JpegSettings s;
  s.h_samp = h;
  s.v_samp = v;
  return encode_bgr(bgr, s);
}

std::vector<uint8_t> cmyk_jpeg(int w, int h) {
  JpegSettings s;
  s.components = 4;
  s.space = JCS_CMYK;
  return libjpeg_encode(w, h, s, [&](int y, uint8_t* row) {
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 4; ++k) row[4 * x + k] = static_cast<uint8_t>((x * 9 + y * 5 + k * 60) & 0xff);
  });
}

std::vector<uint8_t> cut(const std::vector<uint8_t>& bytes, size_t keep) {
  return std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(std::min(keep, bytes.size())));
}

}  // namespace yolocu::test

#include "preprocess/jpeg_variants.hpp"

// clang-format off
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <jpeglib.h>
// clang-format on

#include <opencv2/imgcodecs.hpp>
#include <stdexcept>

namespace yolocu::test {

cv::Mat jpeg_test_pattern(int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  cv::RNG rng(12345);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      cv::Vec3b& p = m.at<cv::Vec3b>(y, x);
      const bool block = ((x / 37) + (y / 29)) % 3 == 0;  // hard-edged coloured blocks
      p[0] = static_cast<uint8_t>(block ? 230 : (x * 255) / std::max(1, w - 1));
      p[1] = static_cast<uint8_t>(block ? 20 : (y * 255) / std::max(1, h - 1));
      p[2] = static_cast<uint8_t>(block ? 40 : ((x + y) * 3 + rng.uniform(0, 24)) & 0xff);
    }
  return m;
}

std::vector<uint8_t> encode_jpeg(const cv::Mat& image, bool progressive, int restart_interval) {
  std::vector<int> params = {cv::IMWRITE_JPEG_QUALITY, 95};
  if (progressive) params.insert(params.end(), {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  if (restart_interval > 0) params.insert(params.end(), {cv::IMWRITE_JPEG_RST_INTERVAL, restart_interval});
  std::vector<uint8_t> out;
  if (!cv::imencode(".jpg", image, out, params)) throw std::runtime_error("cv::imencode failed");
  return out;
}

namespace {

// libjpeg into memory; `rows(y, buffer)` fills row y of `components` samples per pixel.
template <typename Fill>
std::vector<uint8_t> libjpeg_encode(int w, int h, int components, J_COLOR_SPACE space, int hs, int vs, Fill rows) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = components;
  c.in_color_space = space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  if (hs > 0) {
    c.comp_info[0].h_samp_factor = hs;
    c.comp_info[0].v_samp_factor = vs;
  }
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(static_cast<size_t>(w) * static_cast<size_t>(components));
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

}  // namespace

std::vector<uint8_t> encode_jpeg_sampling(const cv::Mat& bgr, int h, int v) {
  return libjpeg_encode(bgr.cols, bgr.rows, 3, JCS_EXT_BGR, h, v, [&](int y, uint8_t* row) {
    std::memcpy(row, bgr.ptr(y), static_cast<size_t>(bgr.cols) * 3);
  });
}

std::vector<uint8_t> cmyk_jpeg(int w, int h) {
  return libjpeg_encode(w, h, 4, JCS_CMYK, 0, 0, [&](int y, uint8_t* row) {
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 4; ++k) row[4 * x + k] = static_cast<uint8_t>((x * 9 + y * 5 + k * 60) & 0xff);
  });
}

std::vector<uint8_t> cut(const std::vector<uint8_t>& bytes, size_t keep) {
  return std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(std::min(keep, bytes.size())));
}

}  // namespace yolocu::test

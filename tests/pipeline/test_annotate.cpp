// The JPEG writer (decoded back by our decoder, which matches OpenCV's imread) and box drawing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "test_util.hpp"
#include "yolocu/annotate.hpp"
#include "yolocu/error.hpp"

namespace yolocu {
namespace {

Image gradient(int w, int h) {
  Image im(w, h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = im.row(y) + 3 * x;
      p[0] = static_cast<uint8_t>(x * 255 / (w - 1));
      p[1] = static_cast<uint8_t>(y * 255 / (h - 1));
      p[2] = static_cast<uint8_t>(128 + 60 * std::sin(x * 0.05));
    }
  return im;
}

double psnr(const Image& a, const Image& b) {
  double se = 0;
  for (size_t i = 0; i < a.size_bytes(); ++i) {
    const double d = double(a.data()[i]) - double(b.data()[i]);
    se += d * d;
  }
  const double mse = se / static_cast<double>(a.size_bytes());
  return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

TEST(Jpeg, RoundTripsThroughTheDecoder) {
  const Image im = gradient(101, 67);  // odd sizes: partial MCUs
  for (int q : {75, 95, 100}) {
    const std::string bytes = encode_jpeg(im.view(), q);
    ASSERT_GT(bytes.size(), 100u);
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0xFF);
    EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0xD8);
    const Image back = decode_image(bytes.data(), bytes.size());
    ASSERT_EQ(back.width(), 101);
    ASSERT_EQ(back.height(), 67);
    const double p = psnr(im, back);
    EXPECT_GT(p, q == 75 ? 30.0 : 36.0) << "quality " << q;
  }
  // channel order survives: a pure red image stays red
  Image red(32, 32);
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) red.row(y)[3 * x] = 0, red.row(y)[3 * x + 1] = 0, red.row(y)[3 * x + 2] = 255;
  const std::string bytes = encode_jpeg(red.view(), 95);
  const Image back = decode_image(bytes.data(), bytes.size());
  EXPECT_LT(back.row(16)[48], 20);
  EXPECT_GT(back.row(16)[50], 235);
}

TEST(Jpeg, WritesFilesAndRejectsBadArguments) {
  const Image im = gradient(40, 30);
  const std::string path = test::scratch_dir("annotate") + "/g.jpg";
  write_jpeg(path, im.view());
  const Image back = decode_image_file(path);
  EXPECT_EQ(back.width(), 40);
  ImageView bad = im.view();
  bad.pitch_bytes = 10;
  EXPECT_THROW(encode_jpeg(bad), Error);
  EXPECT_THROW(encode_jpeg(im.view(), 0), Error);
  EXPECT_THROW(encode_jpeg(ImageView{}), Error);
  EXPECT_THROW(write_jpeg("/nonexistent-dir/x.jpg", im.view()), Error);
}

TEST(Annotate, DrawsOnTheBoxBorderOnly) {
  Image im(200, 150);
  std::memset(im.data(), 0, im.size_bytes());
  Detections d(1);
  d[0].x1 = 50, d[0].y1 = 60, d[0].x2 = 120, d[0].y2 = 140, d[0].confidence = 0.5f, d[0].class_id = 3;
  draw_detections(im, d, {"a", "b", "c", "motorcycle"});
  auto px = [&](int x, int y) { const uint8_t* p = im.row(y) + 3 * x; return p[0] + p[1] + p[2]; };
  EXPECT_GT(px(50, 100), 0);    // left edge
  EXPECT_GT(px(119, 100), 0);   // right edge
  EXPECT_GT(px(85, 139), 0);    // bottom edge
  EXPECT_EQ(px(85, 100), 0);    // inside
  EXPECT_EQ(px(10, 10), 0);     // outside
  EXPECT_EQ(px(150, 145), 0);
  // boxes beyond the image and unknown classes are fine
  d[0].x1 = -50, d[0].x2 = 500, d[0].class_id = 99;
  draw_detections(im, d, {});
}

}  // namespace
}  // namespace yolocu

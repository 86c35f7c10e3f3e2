// The JPEG writer (decoded back by our decoder, which matches OpenCV's imread) and box drawing.
#include <gtest/gtest.h>

#include <algorithm>
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

// Where the label's pixels are: the columns and rows holding the label's background colour.
struct Extent {
  int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1;
};
Extent colour_extent(const Image& im, const uint8_t bgr[3]) {
  Extent e;
  for (int y = 0; y < im.height(); ++y)
    for (int x = 0; x < im.width(); ++x) {
      const uint8_t* p = im.row(y) + 3 * x;
      if (p[0] == bgr[0] && p[1] == bgr[1] && p[2] == bgr[2])
        e.x0 = std::min(e.x0, x), e.y0 = std::min(e.y0, y), e.x1 = std::max(e.x1, x), e.y1 = std::max(e.y1, y);
    }
  return e;
}

TEST(Annotate, UltralyticsPaletteAndLineWidth) {
  // ultralytics.utils.plotting.colors(c, bgr=True) for classes 0, 1 and 20 (= 0 again)
  uint8_t c[3];
  class_colour_bgr(0, c);
  EXPECT_EQ(c[0], 0xFF);
  EXPECT_EQ(c[1], 0x2A);
  EXPECT_EQ(c[2], 0x04);
  class_colour_bgr(1, c);
  EXPECT_EQ(c[0], 0xEB);
  EXPECT_EQ(c[1], 0xDB);
  EXPECT_EQ(c[2], 0x0B);
  class_colour_bgr(20, c);
  EXPECT_EQ(c[0], 0xFF);
  EXPECT_EQ(c[2], 0x04);
  // 1280x720: max(round((720 + 1280 + 3) / 2 * 0.003), 2) = round(3.0045) = 3 rows of the top edge
  Image im(1280, 720);
  std::memset(im.data(), 0, im.size_bytes());
  Detections d(1);
  d[0] = {100.7f, 300.2f, 600.f, 650.f, 0.5f, 0};
  AnnotateOptions o;
  o.labels = false;
  draw_detections(im, d, {"person"}, o);
  class_colour_bgr(0, c);
  int rows = 0;
  for (int y = 290; y < 310; ++y) rows += im.row(y)[3 * 300] == c[0] ? 1 : 0;
  EXPECT_EQ(rows, 3);
  EXPECT_EQ(im.row(300)[3 * 300], c[0]);  // int(300.2) = 300, the line centred on it: 299..301
  EXPECT_EQ(im.row(299)[3 * 300], c[0]);
  EXPECT_EQ(im.row(301)[3 * 300], c[0]);
}

TEST(Annotate, LabelsStayInsideTheImage) {
  // a box touching the right edge and the top: its label moves left and down, never cut
  Image im(320, 240);
  std::memset(im.data(), 0, im.size_bytes());
  Detections d(1);
  d[0] = {300.f, 2.f, 320.f, 100.f, 0.82f, 0};
  draw_detections(im, d, {"person"});
  uint8_t c[3];
  class_colour_bgr(0, c);
  const Extent e = colour_extent(im, c);
  EXPECT_EQ(e.x1, 319);  // the label's box ends at the right edge
  EXPECT_LT(e.x0, 300 - 50);  // "person 0.82" is wider than 20 px: moved left
  EXPECT_EQ(e.y0, 1);  // the top edge of the box line (2 - 1)
  // a label wider than the image is drawn smaller until it fits
  Image small(60, 40);
  std::memset(small.data(), 0, small.size_bytes());
  d[0] = {5.f, 20.f, 50.f, 39.f, 0.5f, 0};
  AnnotateOptions o;
  o.line_width = 4;
  draw_detections(small, d, {"a-very-long-class-name"}, o);
  EXPECT_THROW(draw_detections(small, d, {}, [] {
                 AnnotateOptions bad;
                 bad.track_ids = {1, 2};
                 return bad;
               }()),
               Error);
}

TEST(Png, RoundTripsLosslesslyAndWritesAtomically) {
  const Image im = gradient(101, 67);
  const std::string bytes = encode_png(im.view());
  const Image back = decode_image(bytes.data(), bytes.size());
  ASSERT_EQ(back.width(), 101);
  ASSERT_EQ(back.height(), 67);
  for (int y = 0; y < 67; ++y) ASSERT_EQ(std::memcmp(back.row(y), im.row(y), 101 * 3), 0) << "row " << y;
  const std::string dir = test::scratch_dir("annotate_png");
  write_image(dir + "/g.png", im.view());
  EXPECT_EQ(decode_image_file(dir + "/g.png").width(), 101);
  write_image(dir + "/g.jpg", im.view());
  EXPECT_EQ(decode_image_file(dir + "/g.jpg").height(), 67);
  EXPECT_THROW(write_image(dir + "/g.gif", im.view()), Error);
  EXPECT_THROW(write_image("/nonexistent-dir/x.png", im.view()), Error);
}

}  // namespace
}  // namespace yolocu

// Decoding parity: yolocu::decode_image_file against cv::imread(path, IMREAD_COLOR), byte for
// byte, on the coco128 JPEGs, on PNGs of every colour type and on JPEGs with EXIF orientations.
#include <gtest/gtest.h>
#include <png.h>

#include <filesystem>
#include <random>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "preprocess/cv_oracle.hpp"
#include "preprocess/preprocess_test_util.hpp"
#include "test_util.hpp"
#include "yolocu/image.hpp"

namespace yolocu {
namespace {

std::string scratch(const std::string& file) { return test::scratch_dir("preprocess") + "/" + file; }

void expect_same_as_imread(const std::string& path) {
  const cv::Mat ref = cv::imread(path, cv::IMREAD_COLOR);
  ASSERT_FALSE(ref.empty()) << "OpenCV cannot read " << path;
  const Image img = decode_image_file(path);
  EXPECT_EQ(test::compare_mats(ref, img), "") << path;
}

TEST(Decode, Coco128JpegsMatchImread) {
  YOLOCU_REQUIRE_DATA(dir, "coco128/images/train2017");
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".jpg") continue;
    expect_same_as_imread(e.path().string());
    ++n;
  }
  EXPECT_GE(n, 100);
}

TEST(Decode, GreyJpegMatchesImread) {
  cv::Mat grey(37, 53, CV_8UC1);
  cv::randu(grey, 0, 256);
  const std::string p = scratch("grey.jpg");
  ASSERT_TRUE(cv::imwrite(p, grey));
  expect_same_as_imread(p);
}

TEST(Decode, PngsWrittenByOpenCVMatchImread) {
  struct Case {
    const char* name;
    int type;
  };
  for (const Case c : {Case{"grey8", CV_8UC1}, Case{"bgr8", CV_8UC3}, Case{"bgra8", CV_8UC4},
                       Case{"grey16", CV_16UC1}, Case{"bgr16", CV_16UC3}, Case{"bgra16", CV_16UC4}}) {
    SCOPED_TRACE(c.name);
    cv::Mat m(29, 41, c.type);
    cv::randu(m, 0, CV_MAT_DEPTH(c.type) == CV_16U ? 65536 : 256);
    const std::string p = scratch(std::string(c.name) + ".png");
    ASSERT_TRUE(cv::imwrite(p, m));
    expect_same_as_imread(p);
  }
}

TEST(Decode, PngsOfEveryColourTypeMatchImread) {
  std::mt19937 rng(2);
  auto random_bytes = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
  };
  const int w = 23, h = 17;
  struct Case {
    const char* name;
    int color_type, depth, samples;
  };
  const Case cases[] = {
      {"grey1", PNG_COLOR_TYPE_GRAY, 1, 1},       {"grey2", PNG_COLOR_TYPE_GRAY, 2, 1},
      {"grey4", PNG_COLOR_TYPE_GRAY, 4, 1},       {"grey8", PNG_COLOR_TYPE_GRAY, 8, 1},
      {"grey16", PNG_COLOR_TYPE_GRAY, 16, 1},     {"greyalpha8", PNG_COLOR_TYPE_GRAY_ALPHA, 8, 2},
      {"greyalpha16", PNG_COLOR_TYPE_GRAY_ALPHA, 16, 2}, {"rgb8", PNG_COLOR_TYPE_RGB, 8, 3},
      {"rgb16", PNG_COLOR_TYPE_RGB, 16, 3},       {"rgba8", PNG_COLOR_TYPE_RGBA, 8, 4},
      {"rgba16", PNG_COLOR_TYPE_RGBA, 16, 4},     {"palette8", PNG_COLOR_TYPE_PALETTE, 8, 1},
      {"palette4", PNG_COLOR_TYPE_PALETTE, 4, 1}, {"palette1", PNG_COLOR_TYPE_PALETTE, 1, 1},
  };
  for (const Case& c : cases) {
    for (bool interlaced : {false, true}) {
      for (bool trns : {false, true}) {
        if (trns && c.color_type != PNG_COLOR_TYPE_PALETTE) continue;
        SCOPED_TRACE(std::string(c.name) + (interlaced ? " interlaced" : "") + (trns ? " tRNS" : ""));
        const size_t row_bytes = (static_cast<size_t>(w) * c.samples * c.depth + 7) / 8;
        std::vector<uint8_t> px = random_bytes(row_bytes * h);
        std::vector<uint8_t> palette, alpha;
        if (c.color_type == PNG_COLOR_TYPE_PALETTE) {
          palette = random_bytes(3 * (size_t{1} << c.depth));
          if (trns) alpha = random_bytes(size_t{1} << c.depth);
        }
        const std::string p = scratch(std::string(c.name) + (interlaced ? "_i" : "") +
                                      (trns ? "_t" : "") + ".png");
        test::write_png(p, w, h, c.color_type, c.depth, px, palette, alpha, interlaced);
        expect_same_as_imread(p);
      }
    }
  }
}

TEST(Decode, ExifOrientationMatchesImread) {
  // Non-square with distinct corners so every flip / transpose is visible.
  cv::Mat m(24, 40, CV_8UC3);
  for (int y = 0; y < m.rows; ++y) {
    for (int x = 0; x < m.cols; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(uint8_t(6 * x), uint8_t(10 * y), 128);
  }
  std::vector<uint8_t> jpeg;
  ASSERT_TRUE(cv::imencode(".jpg", m, jpeg));
  for (bool big_endian : {false, true}) {
    for (int o = 0; o <= 9; ++o) {
      SCOPED_TRACE("orientation " + std::to_string(o) + (big_endian ? " MM" : " II"));
      const std::string p = scratch("exif" + std::to_string(o) + (big_endian ? "mm" : "ii") + ".jpg");
      test::write_bytes(p, test::with_exif_orientation(jpeg, o, big_endian));
      expect_same_as_imread(p);
      if (o == 6) {
        const Image img = decode_image_file(p);
        EXPECT_EQ(img.width(), 24);  // rotated: the test must see a real transpose
        EXPECT_EQ(img.height(), 40);
      }
    }
  }
}

TEST(Decode, FormatComesFromTheBytesNotTheName) {
  cv::Mat m(9, 7, CV_8UC3);
  cv::randu(m, 0, 256);
  std::vector<uint8_t> png;
  ASSERT_TRUE(cv::imencode(".png", m, png));
  const std::string p = scratch("really_a_png.jpg");
  test::write_bytes(p, png);
  expect_same_as_imread(p);
  const Image img = decode_image(png.data(), png.size());
  EXPECT_EQ(test::compare_mats(m, img), "");
}

}  // namespace
}  // namespace yolocu

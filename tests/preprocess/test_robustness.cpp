// Bad input never crashes the decoder: every case is a yolocu::Error with a clear code and
// message (or, for undetectable corruption inside JPEG entropy data, a decoded image). Also built
// alone as test_preprocess_robustness for the AddressSanitizer + UBSan run (ctest label asan).
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "preprocess/bomb_images.hpp"
#include "preprocess/image_decode_plan.hpp"
#include "preprocess/preprocess_test_util.hpp"
#include "test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"

namespace yolocu {
namespace {

std::string scratch(const std::string& file) { return test::scratch_dir("preprocess") + "/" + file; }

struct Outcome {
  bool threw = false;
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  int width = 0, height = 0;
};

Outcome decode_bytes(const std::vector<uint8_t>& b, const DecodeLimits& limits = {}) {
  Outcome o;
  try {
    const Image img = decode_image(b.data(), b.size(), limits, "test.bin");
    o.width = img.width();
    o.height = img.height();
  } catch (const Error& e) {
    o.threw = true;
    o.code = e.code();
    o.message = e.what();
  }
  return o;
}

std::vector<uint8_t> small_jpeg() {
  cv::Mat m(48, 64, CV_8UC3);
  for (int y = 0; y < m.rows; ++y) {
    for (int x = 0; x < m.cols; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(uint8_t(4 * x), uint8_t(5 * y), uint8_t(x * y));
  }
  std::vector<uint8_t> b;
  cv::imencode(".jpg", m, b);
  return b;
}

std::vector<uint8_t> small_png() {
  cv::Mat m(48, 64, CV_8UC3);
  cv::randu(m, 0, 256);
  std::vector<uint8_t> b;
  cv::imencode(".png", m, b);
  return b;
}

// Rewrites a PNG IHDR's size and fixes its CRC.
std::vector<uint8_t> png_with_size(std::vector<uint8_t> png, uint32_t w, uint32_t h) {
  // signature (8) + length (4) + "IHDR" (4): width at 16, height at 20, CRC at 29
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = uint8_t(w >> (24 - 8 * i));
    png[20 + i] = uint8_t(h >> (24 - 8 * i));
  }
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), png.data() + 12, 17);
  for (int i = 0; i < 4; ++i) png[29 + i] = uint8_t(crc >> (24 - 8 * i));
  return png;
}

// Position of the SOF0/SOF2 marker's height field in a JPEG.
size_t jpeg_sof_size_offset(const std::vector<uint8_t>& j) {
  for (size_t i = 2; i + 9 < j.size(); ++i) {
    if (j[i] == 0xFF && (j[i + 1] == 0xC0 || j[i + 1] == 0xC2)) return i + 5;
  }
  return 0;
}

TEST(Robustness, MissingFileIsIoError) {
  try {
    decode_image_file(scratch("does_not_exist.jpg"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("does_not_exist.jpg"), std::string::npos) << e.what();
  }
}

TEST(Robustness, EmptyAndTextFilesAreRejected) {
  const std::string empty = scratch("empty.jpg");
  test::write_bytes(empty, {});
  try {
    decode_image_file(empty);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kParse);
    EXPECT_NE(std::string(e.what()).find("empty.jpg"), std::string::npos) << e.what();
  }
  const std::string text = scratch("text.jpg");
  const std::string s = "this is not an image\n";
  test::write_bytes(text, std::vector<uint8_t>(s.begin(), s.end()));
  try {
    decode_image_file(text);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("text.jpg"), std::string::npos) << e.what();
  }
}

TEST(Robustness, TruncatedJpegIsParseError) {
  std::vector<std::vector<uint8_t>> files = {small_jpeg()};
  const std::string bus = test::data_file("images/bus.jpg");
  if (!bus.empty()) files.push_back(test::read_bytes(bus));
  for (const auto& full : files) {
    ASSERT_FALSE(decode_bytes(full).threw);
    for (size_t cut : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{20}, size_t{100},
                       size_t{400}, full.size() / 4, full.size() / 2, full.size() - 100,
                       full.size() - 3, full.size() - 2, full.size() - 1}) {
      const Outcome o = decode_bytes(std::vector<uint8_t>(full.begin(), full.begin() + cut));
      EXPECT_TRUE(o.threw) << "cut at " << cut << " of " << full.size();
      if (o.threw && cut >= 3) {
        EXPECT_EQ(o.code, ErrorCode::kParse) << o.message;
        EXPECT_NE(o.message.find("test.bin: JPEG: "), std::string::npos) << o.message;
      }
    }
  }
}

TEST(Robustness, TruncatedPngIsParseError) {
  const std::vector<uint8_t> full = small_png();
  ASSERT_FALSE(decode_bytes(full).threw);
  for (size_t cut : {size_t{8}, size_t{9}, size_t{20}, size_t{33}, size_t{40}, full.size() / 3,
                     full.size() / 2, full.size() - 13, full.size() - 12, full.size() - 4,
                     full.size() - 1}) {
    const Outcome o = decode_bytes(std::vector<uint8_t>(full.begin(), full.begin() + cut));
    EXPECT_TRUE(o.threw) << "cut at " << cut << " of " << full.size();
    EXPECT_EQ(o.code, ErrorCode::kParse) << o.message;
    EXPECT_NE(o.message.find("test.bin: PNG: "), std::string::npos) << o.message;
  }
}

TEST(Robustness, CorruptHeadersAreParseErrors) {
  std::vector<uint8_t> j = small_jpeg();
  const size_t sof = jpeg_sof_size_offset(j);
  ASSERT_NE(sof, 0u);
  j[sof] = j[sof + 1] = 0;  // height 0
  EXPECT_EQ(decode_bytes(j).code, ErrorCode::kParse);
  j = small_jpeg();
  j[sof - 1] = 3;  // sample precision 3 bits
  EXPECT_EQ(decode_bytes(j).code, ErrorCode::kParse);

  std::vector<uint8_t> p = small_png();
  p[17] ^= 0x40;  // IHDR width changed, CRC now wrong
  const Outcome o = decode_bytes(p);
  EXPECT_TRUE(o.threw);
  EXPECT_EQ(o.code, ErrorCode::kParse) << o.message;
  p = small_png();
  p[p.size() / 2] ^= 0xFF;  // inside IDAT: CRC mismatch
  EXPECT_EQ(decode_bytes(p).code, ErrorCode::kParse);
}

TEST(Robustness, HugeHeadersAreRefusedBeforeAllocating) {
  const Outcome png = decode_bytes(png_with_size(small_png(), 100000, 100000));
  ASSERT_TRUE(png.threw);
  EXPECT_EQ(png.code, ErrorCode::kOutOfMemory) << png.message;
  EXPECT_NE(png.message.find("100000x100000"), std::string::npos) << png.message;
  EXPECT_NE(png.message.find("max_width 16384"), std::string::npos) << png.message;

  std::vector<uint8_t> j = small_jpeg();
  const size_t sof = jpeg_sof_size_offset(j);
  j[sof] = j[sof + 2] = 0x75;  // about 30000 x 30000 (libjpeg itself stops at 65500)
  j[sof + 1] = j[sof + 3] = 0x30;
  const Outcome jo = decode_bytes(j);
  ASSERT_TRUE(jo.threw);
  EXPECT_EQ(jo.code, ErrorCode::kOutOfMemory) << jo.message;
  EXPECT_NE(jo.message.find("DecodeLimits"), std::string::npos) << jo.message;

  DecodeLimits tight;
  tight.max_pixels = 1000;  // 64 x 48 = 3072 pixels
  const Outcome t = decode_bytes(small_png(), tight);
  EXPECT_EQ(t.code, ErrorCode::kOutOfMemory) << t.message;
  EXPECT_NE(t.message.find("max_pixels 1000"), std::string::npos) << t.message;
}

TEST(Robustness, RandomCorruptionNeverCrashes) {
  std::mt19937 rng(99);
  for (const auto& base : {small_jpeg(), small_png(), test::with_exif_orientation(small_jpeg(), 6, false)}) {
    for (int i = 0; i < 150; ++i) {
      std::vector<uint8_t> b = base;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int k = 0; k < flips; ++k) b[2 + rng() % (b.size() - 2)] = static_cast<uint8_t>(rng());
      if (rng() % 4 == 0) b.resize(2 + rng() % (b.size() - 2));
      const Outcome o = decode_bytes(b);
      if (!o.threw) {
        EXPECT_GT(o.width, 0);
        EXPECT_GT(o.height, 0);
      } else {
        EXPECT_TRUE(o.code == ErrorCode::kParse || o.code == ErrorCode::kOutOfMemory ||
                    o.code == ErrorCode::kUnsupported)
            << o.message;
      }
    }
  }
}

// The limits of DecodeLimits beyond the pixel count (the measured bomb set: test_decode_bombs.cpp).
TEST(Robustness, ProgressiveScanLimit) {
  const std::vector<uint8_t> bomb = test::progressive_scan_bomb(64, 48, 1, 40);
  EXPECT_EQ(detail::count_jpeg_scans(bomb.data(), bomb.size()), 40);
  EXPECT_FALSE(decode_bytes(bomb).threw) << decode_bytes(bomb).message;  // 40 <= the default 100
  DecodeLimits few;
  few.max_scans = 39;
  const Outcome o = decode_bytes(bomb, few);
  EXPECT_EQ(o.code, ErrorCode::kOutOfMemory) << o.message;
  EXPECT_NE(o.message.find("test.bin: JPEG: progressive image of more than 39 scans"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("max_scans 39"), std::string::npos) << o.message;
  // the GPU path's plan refuses it from the markers alone, with the same message
  std::string plan_message;
  EXPECT_EQ(test::code_of([&] { detail::plan_gpu_decode(bomb.data(), bomb.size(), few, "test.bin"); }, &plan_message),
            ErrorCode::kOutOfMemory);
  EXPECT_EQ(plan_message, o.message);
  few.max_scans = 40;
  EXPECT_FALSE(decode_bytes(bomb, few).threw);
  EXPECT_NO_THROW(detail::plan_gpu_decode(bomb.data(), bomb.size(), few, "test.bin"));
}

TEST(Robustness, CountScansOfRealAndBrokenFiles) {
  const std::vector<uint8_t> jpg = small_jpeg();
  EXPECT_EQ(detail::count_jpeg_scans(jpg.data(), jpg.size()), 1);
  for (size_t n = 0; n < jpg.size(); n += 7) detail::count_jpeg_scans(jpg.data(), n);  // no overread (ASan)
  const std::vector<uint8_t> junk(300, 0xFF);
  EXPECT_EQ(detail::count_jpeg_scans(junk.data(), junk.size()), 0);
}

TEST(Robustness, DecoderMemoryLimit) {
  const std::vector<uint8_t> bomb = test::progressive_scan_bomb(512, 512, 3, 4);  // 1.5 MB of coefficients
  EXPECT_FALSE(decode_bytes(bomb).threw);
  DecodeLimits small;
  small.max_decoder_memory = 1 << 20;
  const Outcome o = decode_bytes(bomb, small);
  EXPECT_EQ(o.code, ErrorCode::kOutOfMemory) << o.message;
  EXPECT_NE(o.message.find("test.bin: JPEG:"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("max_decoder_memory 1048576"), std::string::npos) << o.message;
}

TEST(Robustness, DeclaredSizesOverTheDefaultLimits) {
  for (const auto& b : {test::baseline_size_bomb(16000, 16000), test::baseline_size_bomb(65000, 100),
                        test::png_header_only(16384, 16384), test::png_header_only(7100, 7100)}) {
    const Outcome o = decode_bytes(b);
    EXPECT_EQ(o.code, ErrorCode::kOutOfMemory) << o.message;
    EXPECT_NE(o.message.find("test.bin: image of "), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("exceeds the decode limit"), std::string::npos) << o.message;
  }
  // libpng's own IHDR cap (1,000,000 a side) and PNG's (2^31 - 1)
  EXPECT_EQ(decode_bytes(test::png_header_only(2000000, 1)).code, ErrorCode::kParse);
  EXPECT_EQ(decode_bytes(test::png_header_only(0x80000000u, 1)).code, ErrorCode::kParse);
}

TEST(Robustness, InvalidLimitsAreNamed) {
  DecodeLimits bad;
  bad.max_scans = 0;
  const Outcome o = decode_bytes(small_jpeg(), bad);
  EXPECT_EQ(o.code, ErrorCode::kInvalidArgument) << o.message;
  EXPECT_NE(o.message.find("max_scans 0"), std::string::npos) << o.message;
  EXPECT_THROW(validate_decode_limits(bad, "DetectorOptions::decode_limits"), Error);
  EXPECT_NO_THROW(validate_decode_limits(DecodeLimits{}, "defaults"));
}

}  // namespace
}  // namespace yolocu

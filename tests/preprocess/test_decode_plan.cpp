// The GPU decoder's routing, from headers only (no GPU needed): which images nvJPEG may decode and
// which go to the CPU decoder, and that every error it raises is decode_image()'s, word for word.
// The oracle for sizes is OpenCV's imread / imdecode; for errors, the CPU decoder itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "preprocess/image_decode_plan.hpp"
#include "preprocess/jpeg_variants.hpp"
#include "preprocess/preprocess_test_util.hpp"
#include "test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"

namespace yolocu {
namespace {

using detail::DecodeRoute;
using detail::plan_gpu_decode;

detail::DecodePlan plan(const std::vector<uint8_t>& b, const DecodeLimits& limits = {}) {
  return plan_gpu_decode(b.data(), b.size(), limits, "x.jpg");
}

// Both the plan and decode_image() throw, with the same code and message.
void expect_same_error(const std::vector<uint8_t>& b, ErrorCode code, const DecodeLimits& limits = {}) {
  std::string cpu_msg, plan_msg;
  try {
    decode_image(b.data(), b.size(), limits, "x.jpg");
    ADD_FAILURE() << "decode_image accepted it";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    cpu_msg = e.what();
  }
  try {
    plan_gpu_decode(b.data(), b.size(), limits, "x.jpg");
    ADD_FAILURE() << "plan_gpu_decode accepted it";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    plan_msg = e.what();
  }
  EXPECT_EQ(plan_msg, cpu_msg);
  EXPECT_NE(plan_msg.find("x.jpg"), std::string::npos) << plan_msg;
}

TEST(DecodePlan, BaselineProgressiveGreyAndSubsamplingsGoToTheGpu) {
  const Image bgr = test::jpeg_test_pattern(67, 45);
  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    bool progressive;
  };
  const std::vector<Case> cases = {
      {"baseline 4:2:0", test::encode_jpeg(bgr), false},
      {"baseline 4:4:4", test::encode_jpeg_sampling(bgr, 1, 1), false},
      {"baseline 4:2:2", test::encode_jpeg_sampling(bgr, 2, 1), false},
      {"baseline 4:4:0", test::encode_jpeg_sampling(bgr, 1, 2), false},
      {"restart markers", test::encode_jpeg(bgr, false, 2), false},
      {"progressive", test::encode_jpeg(bgr, true), true},
      {"grey", test::encode_jpeg_grey(bgr), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const detail::DecodePlan p = plan(c.bytes);
    EXPECT_EQ(p.route, DecodeRoute::kGpu) << detail::decode_route_name(p.route);
    EXPECT_EQ(p.width, 67);
    EXPECT_EQ(p.height, 45);
    EXPECT_EQ(p.progressive, c.progressive);
  }
}

TEST(DecodePlan, HeaderSizesMatchImreadOnCoco128) {
  YOLOCU_REQUIRE_DATA(dir, "coco128/images/train2017");
  int n = 0, gpu = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".jpg") continue;
    const std::vector<uint8_t> b = test::read_bytes(e.path().string());
    const cv::Mat ref = cv::imread(e.path().string(), cv::IMREAD_COLOR);
    const detail::DecodePlan p = plan(b);
    EXPECT_EQ(p.width, ref.cols) << e.path();
    EXPECT_EQ(p.height, ref.rows) << e.path();
    gpu += p.route == DecodeRoute::kGpu;
    ++n;
  }
  EXPECT_GE(n, 100);
  EXPECT_EQ(gpu, n) << "coco128 holds plain baseline JPEGs: all of them should go to nvJPEG";
}

TEST(DecodePlan, PngAndUnknownBytesGoToTheCpu) {
  const std::vector<uint8_t> png = test::encode_png_bgr(test::jpeg_test_pattern(20, 10));
  EXPECT_EQ(plan(png).route, DecodeRoute::kCpuNotJpeg);
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_EQ(plan(text).route, DecodeRoute::kCpuNotJpeg);  // the CPU decoder then says kUnsupported
  EXPECT_THROW(decode_image(text.data(), text.size(), {}, "x.jpg"), Error);
}

TEST(DecodePlan, ExifOrientationGoesToTheCpuWithTheRotatedSize) {
  const std::vector<uint8_t> jpeg = test::encode_jpeg(test::jpeg_test_pattern(40, 24));
  for (int o = 1; o <= 8; ++o) {
    SCOPED_TRACE(o);
    const std::vector<uint8_t> b = test::with_exif_orientation(jpeg, o, o % 2 == 0);
    const detail::DecodePlan p = plan(b);
    EXPECT_EQ(p.route, o == 1 ? DecodeRoute::kGpu : DecodeRoute::kCpuOrientation);
    const Image cpu = decode_image(b.data(), b.size());
    EXPECT_EQ(p.width, cpu.width());
    EXPECT_EQ(p.height, cpu.height());
  }
}

TEST(DecodePlan, CmykGoesToTheCpu) {
  const std::vector<uint8_t> b = test::cmyk_jpeg(31, 17);
  const detail::DecodePlan p = plan(b);
  EXPECT_EQ(p.route, DecodeRoute::kCpuComponents);
  EXPECT_EQ(p.width, 31);
  EXPECT_EQ(p.height, 17);
  EXPECT_NO_THROW(decode_image(b.data(), b.size()));
}

TEST(DecodePlan, CutShortGoesToTheCpuWhichReportsIt) {
  const std::vector<uint8_t> jpeg = test::encode_jpeg(test::jpeg_test_pattern(64, 48));
  const std::vector<uint8_t> b = test::cut(jpeg, jpeg.size() * 2 / 3);
  EXPECT_EQ(plan(b).route, DecodeRoute::kCpuTruncated);
  try {
    decode_image(b.data(), b.size(), {}, "x.jpg");
    ADD_FAILURE() << "a JPEG cut short decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kParse);
    EXPECT_NE(std::string(e.what()).find("x.jpg"), std::string::npos) << e.what();
  }
  // only the EOI marker missing, or half of it: still cut short, and an error of the CPU decoder
  for (size_t missing : {1, 2}) {
    const std::vector<uint8_t> c = test::cut(jpeg, jpeg.size() - missing);
    EXPECT_EQ(plan(c).route, DecodeRoute::kCpuTruncated);
    EXPECT_THROW(decode_image(c.data(), c.size()), Error) << missing;
  }
}

TEST(DecodePlan, DataAfterEoiGoesToTheCpuWhichAcceptsIt) {
  std::vector<uint8_t> b = test::encode_jpeg(test::jpeg_test_pattern(16, 16));
  b.insert(b.end(), {0x00, 0x01, 0x02});
  EXPECT_EQ(plan(b).route, DecodeRoute::kCpuTruncated);
  EXPECT_NO_THROW(decode_image(b.data(), b.size()));
}

TEST(DecodePlan, ErrorsAreTheCpuDecodersWordForWord) {
  const std::vector<uint8_t> jpeg = test::encode_jpeg(test::jpeg_test_pattern(64, 48));
  expect_same_error(test::cut(jpeg, 40), ErrorCode::kParse);  // cut inside the header
  expect_same_error(test::cut(jpeg, 3), ErrorCode::kParse);   // only the SOI and one byte
  std::vector<uint8_t> bad = jpeg;
  for (size_t i = 0; i + 1 < bad.size(); ++i)
    if (bad[i] == 0xFF && bad[i + 1] == 0xC0) {  // SOF0: precision 8 -> 7 (unsupported)
      bad[i + 4] = 7;
      break;
    }
  expect_same_error(bad, ErrorCode::kParse);
  expect_same_error({}, ErrorCode::kParse);  // empty
  DecodeLimits small;
  small.max_pixels = 64 * 48 - 1;
  expect_same_error(jpeg, ErrorCode::kOutOfMemory, small);
  small = {};
  small.max_width = 63;
  expect_same_error(jpeg, ErrorCode::kOutOfMemory, small);
  // an EXIF-transposed image is checked against the limits rotated, as the CPU decoder does
  small = {};
  small.max_width = 50;  // 64 wide as coded, 48 wide after orientation 6
  const std::vector<uint8_t> rotated = test::with_exif_orientation(jpeg, 6, false);
  EXPECT_EQ(plan(rotated, small).width, 48);
  small.max_height = 50;  // 64 high after the rotation
  expect_same_error(rotated, ErrorCode::kOutOfMemory, small);
}

TEST(DecodePlan, NullDataIsAnInvalidArgument) {
  try {
    plan_gpu_decode(nullptr, 10, {}, "x.jpg");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(DecodePlan, EoiCheck) {
  const std::vector<uint8_t> ok = {0xFF, 0xD8, 0xFF, 0xD9};
  EXPECT_TRUE(detail::jpeg_ends_with_eoi(ok.data(), ok.size()));
  EXPECT_FALSE(detail::jpeg_ends_with_eoi(ok.data(), 3));
  const std::vector<uint8_t> trailing = {0xFF, 0xD8, 0xFF, 0xD9, 0x00};
  EXPECT_FALSE(detail::jpeg_ends_with_eoi(trailing.data(), trailing.size()));
}

}  // namespace
}  // namespace yolocu

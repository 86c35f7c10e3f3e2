// Detector::detect_encoded on the CPU detector (DecodeDevice::kCpu): the same detections as
// decode_image() + detect(), decode errors named by the input, and DecodeDevice::kGpu refused
// where it cannot run (a detector on the CPU, a build without nvJPEG). The GPU side:
// tests/pipeline/test_detect_encoded_cuda.cpp.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <functional>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"

namespace yolocu {
namespace {

std::unique_ptr<Detector> cpu_detector(const std::string& model, DetectorOptions o = {}) {
  o.device = Device::kCpu;
  o.max_batch = 2;
  return Detector::create(model, o);
}

void expect_equal(const Detections& a, const Detections& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].class_id, b[i].class_id) << what << " #" << i;
    EXPECT_EQ(a[i].confidence, b[i].confidence) << what << " #" << i;
    EXPECT_EQ(a[i].x1, b[i].x1) << what << " #" << i;
    EXPECT_EQ(a[i].y1, b[i].y1) << what << " #" << i;
    EXPECT_EQ(a[i].x2, b[i].x2) << what << " #" << i;
    EXPECT_EQ(a[i].y2, b[i].y2) << what << " #" << i;
  }
}

using test::code_of;

TEST(DetectEncoded, CpuDecodeEqualsDecodeThenDetect) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  YOLOCU_REQUIRE_DATA(zidane, "images/zidane.jpg");
  auto det = cpu_detector(model);
  const std::string bus_bytes = read_file_bytes(bus), zidane_bytes = read_file_bytes(zidane);
  // a PNG of the decoded bus: lossless, so the same pixels and the same detections
  const Image bus_img = decode_image_file(bus), zidane_img = decode_image_file(zidane);
  std::vector<uint8_t> png;
  ASSERT_TRUE(cv::imencode(".png", cv::Mat(bus_img.height(), bus_img.width(), CV_8UC3, const_cast<uint8_t*>(bus_img.data())), png));
  const std::vector<EncodedImage> enc = {{bus_bytes.data(), bus_bytes.size(), "bus.jpg"},
                                         {zidane_bytes.data(), zidane_bytes.size(), "zidane.jpg"},
                                         {png.data(), png.size(), "bus.png"}};
  std::vector<DecodedSize> sizes;
  const std::vector<Detections> got = det->detect_encoded(enc, &sizes);
  const std::vector<Detections> want = det->detect({bus_img.view(), zidane_img.view(), bus_img.view()});
  ASSERT_EQ(got.size(), 3u);
  ASSERT_EQ(sizes.size(), 3u);
  expect_equal(got[0], want[0], "bus.jpg");
  expect_equal(got[1], want[1], "zidane.jpg");
  expect_equal(got[2], want[2], "bus.png");
  EXPECT_GT(got[0].size(), 0u);
  EXPECT_EQ(sizes[0].width, 810);
  EXPECT_EQ(sizes[0].height, 1080);
  EXPECT_EQ(sizes[1].width, zidane_img.width());
  EXPECT_EQ(sizes[1].height, zidane_img.height());
  const DecodeStats s = det->decode_stats();
  EXPECT_EQ(s.images, 3);
  EXPECT_EQ(s.cpu, 3);
  EXPECT_EQ(s.gpu, 0);
  EXPECT_EQ(s.cpu_fallback, 0);
  EXPECT_EQ(s.backend, "cpu");
  EXPECT_TRUE(det->detect_encoded({}).empty());
}

TEST(DetectEncoded, DecodeErrorsNameTheInput) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  auto det = cpu_detector(model);
  const std::string bytes = read_file_bytes(bus);
  std::string msg;
  // cut short
  EXPECT_EQ(code_of([&] { det->detect_encoded({{bytes.data(), bytes.size() / 2, "cut.jpg"}}); }, &msg), ErrorCode::kParse);
  EXPECT_NE(msg.find("cut.jpg"), std::string::npos) << msg;
  // over the limits, refused from the header
  DetectorOptions o;
  o.decode_limits.max_pixels = 810 * 1080 - 1;
  auto limited = cpu_detector(model, o);
  EXPECT_EQ(code_of([&] { limited->detect_encoded({{bytes.data(), bytes.size(), "big.jpg"}}); }, &msg),
            ErrorCode::kOutOfMemory);
  EXPECT_NE(msg.find("big.jpg"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_pixels"), std::string::npos) << msg;
  // not an image, empty, null
  const std::string text = "not an image";
  EXPECT_EQ(code_of([&] { det->detect_encoded({{text.data(), text.size(), "notes.txt"}}); }, &msg),
            ErrorCode::kUnsupported);
  EXPECT_NE(msg.find("notes.txt"), std::string::npos) << msg;
  EXPECT_EQ(code_of([&] { det->detect_encoded({{text.data(), 0, "empty.jpg"}}); }), ErrorCode::kParse);
  EXPECT_EQ(code_of([&] { det->detect_encoded({{nullptr, 10, "null.jpg"}}); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("null.jpg"), std::string::npos) << msg;
  EXPECT_EQ(det->decode_stats().images, 0);
}

TEST(DetectEncoded, GpuDecodeIsRefusedWhereItCannotRun) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  DetectorOptions o;
  o.device = Device::kCpu;
  o.decode = DecodeDevice::kGpu;
  std::string msg;
  EXPECT_EQ(code_of([&] { Detector::create(model, o); }, &msg), ErrorCode::kUnsupported);
  EXPECT_NE(msg.find("decode kGpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("decode kCpu"), std::string::npos) << msg;  // says what to do instead
  if (!test::have_gpu()) {  // kAuto without a GPU runs on the CPU: refused too, not decoded elsewhere
    o.device = Device::kAuto;
    EXPECT_EQ(code_of([&] { Detector::create(model, o); }, &msg), ErrorCode::kUnsupported);
  }
  o = {};
  o.decode_limits.max_width = 0;
  EXPECT_EQ(code_of([&] { Detector::create(model, o); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("decode_limits"), std::string::npos) << msg;
  EXPECT_STREQ(decode_device_name(DecodeDevice::kCpu), "cpu");
  EXPECT_STREQ(decode_device_name(DecodeDevice::kGpu), "gpu");
}

}  // namespace
}  // namespace yolocu

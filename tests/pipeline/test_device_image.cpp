// Detector::detect_device(DeviceImage): the front end's checks (before any backend runs, so they
// run here without a GPU) and the CPU detector's refusal. The GPU side: test_device_image_cuda.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"

namespace yolocu {
namespace {

std::string error_of(Detector& det, const std::vector<DeviceImage>& images, ErrorCode* code) {
  try {
    det.detect_device(images);
  } catch (const Error& e) {
    *code = e.code();
    return e.what();
  }
  return "accepted";
}

TEST(DeviceImageInput, FrontEndChecksAndCpuRefusal) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  DetectorOptions o;
  o.device = Device::kCpu;
  auto det = Detector::create(model, o);
  EXPECT_TRUE(det->detect_device(std::vector<DeviceImage>{}).empty());
  const uint8_t* p = reinterpret_cast<const uint8_t*>(uintptr_t{4096});
  DeviceImage nv12;
  nv12.format = PixelFormat::kNv12;
  nv12.data = p;
  nv12.chroma = p;
  nv12.width = 1920;
  nv12.height = 1080;
  nv12.pitch_bytes = 2048;
  ErrorCode code = ErrorCode::kInternal;
  // a valid image reaches the backend: the CPU detector refuses by name
  std::string m = error_of(*det, {nv12}, &code);
  EXPECT_EQ(code, ErrorCode::kUnsupported) << m;
  EXPECT_NE(m.find("nv12 images in device memory need a CUDA detector (this one runs on cpu)"), std::string::npos) << m;
  // invalid images: kInvalidArgument naming the image, before the backend
  DeviceImage bad = nv12;
  bad.chroma = nullptr;
  m = error_of(*det, {nv12, bad}, &code);
  EXPECT_EQ(code, ErrorCode::kInvalidArgument) << m;
  EXPECT_NE(m.find("nv12 image 1 has no chroma plane"), std::string::npos) << m;
  bad = nv12;
  bad.chroma_pitch_bytes = 100;
  m = error_of(*det, {bad}, &code);
  EXPECT_NE(m.find("chroma pitch 100 bytes < 2 * ((width + 1) / 2) = 1920"), std::string::npos) << m;
  bad = nv12;
  bad.pitch_bytes = 1919;
  m = error_of(*det, {bad}, &code);
  EXPECT_NE(m.find("pitch 1919 bytes < width = 1920"), std::string::npos) << m;
  bad = nv12;
  bad.format = PixelFormat::kRgb;
  m = error_of(*det, {bad}, &code);
  EXPECT_NE(m.find("pitch 2048 bytes < width * 3 = 5760"), std::string::npos) << m;
  bad = nv12;
  bad.format = static_cast<PixelFormat>(7);
  m = error_of(*det, {bad}, &code);
  EXPECT_NE(m.find("unknown pixel format"), std::string::npos) << m;
  bad = nv12;
  bad.width = 0;
  m = error_of(*det, {bad}, &code);
  EXPECT_NE(m.find("size 0x1080"), std::string::npos) << m;
  bad = nv12;
  bad.data = nullptr;
  m = error_of(*det, {bad}, &code);
  EXPECT_NE(m.find("image 0 has null data"), std::string::npos) << m;
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace yolocu

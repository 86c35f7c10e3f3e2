// Detector (CPU) against ultralytics/yolov5 v7.0: the stage tensors and the final detections of
// bus.jpg and zidane.jpg (reference/*.npz, produced by PyTorch + OpenCV), plus the API contract:
// validation, batching, pitch, async, concurrency, factory errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

struct Ref {
  Image image;
  std::map<std::string, Tensor> npz;
};

Ref load_ref(const std::string& name) {
  Ref r;
  r.image = decode_image_file(test::data_file("images/" + name + ".jpg"));
  r.npz = load_npz(test::data_file("reference/" + name + ".npz"));
  return r;
}

// Same count and classes, boxes within 0.01 px, confidence within 1e-4. The order must match
// too, except that two detections whose reference confidences differ by less than 1e-6 (a
// near-tie: the engine's float noise is ~1e-6 relative) may come in either order; such swaps
// are printed.
void expect_same(const Detections& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.dim(0)) << what;
  const float* w = want.data_as<float>();
  auto close = [&](const Detection& d, int64_t j) {
    const float* r = w + 6 * j;
    return d.class_id == static_cast<int>(r[5]) && std::fabs(d.x1 - r[0]) <= 0.01 && std::fabs(d.y1 - r[1]) <= 0.01 &&
           std::fabs(d.x2 - r[2]) <= 0.01 && std::fabs(d.y2 - r[3]) <= 0.01 && std::fabs(d.confidence - r[4]) <= 1e-4;
  };
  std::vector<bool> used(got.size(), false);
  int swaps = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    int64_t match = -1;
    for (int64_t j = 0; j < want.dim(0) && match < 0; ++j)
      if (!used[static_cast<size_t>(j)] && close(got[i], j)) match = j;
    ASSERT_GE(match, 0) << what << ": detection " << i << " (class " << got[i].class_id << ", conf "
                        << got[i].confidence << ", box " << got[i].x1 << " " << got[i].y1 << " " << got[i].x2 << " "
                        << got[i].y2 << ") has no counterpart in the reference";
    used[static_cast<size_t>(match)] = true;
    if (match != static_cast<int64_t>(i)) {
      ++swaps;
      const float ref_here = w[6 * i + 4], ref_there = w[6 * match + 4];
      EXPECT_LT(std::fabs(ref_here - ref_there), 1e-6)
          << what << ": detection " << i << " is reference row " << match << " and not a near-tie";
    }
  }
  if (swaps)
    std::printf("[ info ] %s: %d detections in swapped order at confidence near-ties (< 1e-6 apart)\n", what.c_str(),
                swaps);
}

DetectorOptions cpu_options(const PostprocessOptions& p) {
  DetectorOptions o;
  o.device = Device::kCpu;
  o.postprocess = p;
  return o;
}

class ReferenceImages : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceImages, StagesAndDetectionsMatchUltralytics) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(npz, "reference/" + GetParam() + ".npz");
  const Ref ref = load_ref(GetParam());
  auto det = Detector::create(model, cpu_options(detect_options()));
  EXPECT_EQ(det->device(), Device::kCpu);
  EXPECT_EQ(det->input_width(), 640);
  EXPECT_EQ(det->input_height(), 640);
  ASSERT_EQ(det->class_names().size(), 80u);
  EXPECT_EQ(det->class_names()[0], "person");
  EXPECT_EQ(det->class_names()[5], "bus");

  DetectionTrace trace;
  const std::vector<Detections> got = det->detect({ref.image.view()}, &trace);
  ASSERT_EQ(got.size(), 1u);
  // letterbox: byte for byte; input: bit for bit
  ASSERT_EQ(trace.letterboxed.size(), 1u);
  const Tensor& lb = ref.npz.at("letterboxed_bgr");
  ASSERT_EQ(trace.letterboxed[0].shape(), lb.shape());
  EXPECT_EQ(std::memcmp(trace.letterboxed[0].data(), lb.data(), lb.nbytes()), 0);
  const Tensor& in = ref.npz.at("input");
  ASSERT_EQ(trace.input.shape(), in.shape());
  EXPECT_EQ(std::memcmp(trace.input.data(), in.data(), in.nbytes()), 0);
  // the raw output: float noise of a different convolution library only
  ASSERT_EQ(trace.outputs.size(), 1u);
  const test::Diff d = test::compare(trace.outputs[0], ref.npz.at("output"));
  std::printf("[ info ] %s output vs PyTorch: max |diff| %.3g, relative L2 %.3g\n", GetParam().c_str(), d.max_abs,
              d.rel_l2);
  EXPECT_LT(d.rel_l2, 1e-5);
  ASSERT_EQ(trace.candidates.size(), 1u);
  EXPECT_EQ(trace.candidates[0].dim(1), 6);
  EXPECT_GE(trace.candidates[0].dim(0), static_cast<int64_t>(got[0].size()));
  ASSERT_EQ(trace.geometry.size(), 1u);
  EXPECT_EQ(trace.geometry[0].src_w, ref.image.width());

  expect_same(got[0], ref.npz.at("detect"), GetParam() + " detect.py settings");
  const StageTimes t = det->last_times();
  EXPECT_GT(t.inference, 0);
  EXPECT_GE(t.total, t.preprocess + t.inference + t.postprocess - 1e-6);
  EXPECT_EQ(t.batches, 1);
  EXPECT_EQ(t.max_in_flight, 1);
  EXPECT_EQ(t.gpu_engine, 0) << "the CPU has no device stages";

  // val.py settings: 300 detections with multi-label, down to conf 0.001
  auto val = Detector::create(model, cpu_options(val_options()));
  expect_same(val->detect(ref.image.view()), ref.npz.at("val"), GetParam() + " val.py settings");
}

INSTANTIATE_TEST_SUITE_P(Images, ReferenceImages, ::testing::Values("bus", "zidane"));

TEST(Detector, RawHeadsModelGivesTheSameDetections) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n_raw_heads.onnx");
  YOLOCU_REQUIRE_DATA(npz, "reference/bus.npz");
  auto det = Detector::create(model, cpu_options(detect_options()));
  for (const char* name : {"bus", "zidane"}) {
    const Ref ref = load_ref(name);
    DetectionTrace trace;
    const auto got = det->detect({ref.image.view()}, &trace);
    EXPECT_EQ(trace.outputs.size(), 3u);
    expect_same(got[0], ref.npz.at("detect"), std::string(name) + " raw heads");
  }
}

TEST(Detector, DynamicModelBatchesImagesOfDifferentSizes) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(npz, "reference/bus.npz");
  const Ref bus = load_ref("bus"), zidane = load_ref("zidane");
  DetectorOptions o = cpu_options(detect_options());
  o.max_batch = 2;
  auto det = Detector::create(model, o);
  DetectionTrace trace;
  // three images, batches of 2 + 1
  const auto got = det->detect({bus.image.view(), zidane.image.view(), bus.image.view()}, &trace);
  ASSERT_EQ(got.size(), 3u);
  expect_same(got[0], bus.npz.at("detect"), "bus in batch");
  expect_same(got[1], zidane.npz.at("detect"), "zidane in batch");
  expect_same(got[2], bus.npz.at("detect"), "bus alone");
  EXPECT_EQ(trace.input.dim(0), 3);
  EXPECT_EQ(trace.outputs.at(0).dim(0), 3);
  EXPECT_EQ(trace.letterboxed.size(), 3u);
  EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(trace.input.data()) + trace.input.nbytes() / 3,
                        zidane.npz.at("input").data(), zidane.npz.at("input").nbytes()),
            0);

  // a smaller input size is accepted by a dynamic model when it is a multiple of the stride
  o.input_width = 320, o.input_height = 256;
  auto small = Detector::create(model, o);
  EXPECT_EQ(small->input_width(), 320);
  EXPECT_EQ(small->input_height(), 256);
  EXPECT_FALSE(small->detect(bus.image.view()).empty());
}

TEST(Detector, RowPitchAsyncAndThreadsDoNotChangeResults) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(npz, "reference/bus.npz");
  const Ref bus = load_ref("bus");
  DetectorOptions o = cpu_options(detect_options());
  o.contexts = 2;
  auto det = Detector::create(model, o);
  // the same pixels with a padded row pitch
  const size_t pitch = static_cast<size_t>(bus.image.width()) * 3 + 17;
  std::vector<uint8_t> padded(pitch * static_cast<size_t>(bus.image.height()), 0xAB);
  for (int y = 0; y < bus.image.height(); ++y)
    std::memcpy(padded.data() + pitch * static_cast<size_t>(y), bus.image.row(y), bus.image.pitch_bytes());
  const ImageView pv{padded.data(), bus.image.width(), bus.image.height(), pitch};
  expect_same(det->detect(pv), bus.npz.at("detect"), "padded pitch");

  auto fut = det->detect_async({bus.image.view()});
  std::vector<Detections> a, b;
  std::thread t([&] { a = det->detect(std::vector<ImageView>{bus.image.view()}); });
  b = det->detect(std::vector<ImageView>{pv});
  t.join();
  const auto c = fut.get();
  expect_same(a.at(0), bus.npz.at("detect"), "thread 1");
  expect_same(b.at(0), bus.npz.at("detect"), "thread 2");
  expect_same(c.at(0), bus.npz.at("detect"), "async");
  EXPECT_TRUE(det->detect(std::vector<ImageView>{}).empty());
}

using test::code_of;

// warm_up() takes sizes in 1..max_batch (empty: all of them); anything else is refused by name.
// On the CPU there is nothing to prepare: the detector is unchanged afterwards.
TEST(Detector, WarmUpChecksTheSizes) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  DetectorOptions o = cpu_options(detect_options());
  o.max_batch = 4;
  auto det = Detector::create(model, o);
  EXPECT_NO_THROW(det->warm_up());
  EXPECT_NO_THROW(det->warm_up({1, 3, 4}));
  EXPECT_EQ(code_of([&] { det->warm_up({0}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { det->warm_up({2, 5}); }), ErrorCode::kInvalidArgument);
  try {
    det->warm_up({-1});
    FAIL() << "warm_up({-1}) did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch size -1 is outside 1..4"), std::string::npos) << e.what();
  }
  Image img(64, 48);
  std::memset(img.data(), 90, img.size_bytes());
  EXPECT_NO_THROW(det->detect(img.view()));
}

// decode_cpu_share: in [0, 0.9], and only with decode kGpu (named in the error).
TEST(Detector, DecodeCpuShareIsChecked) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  for (const float share : {-0.5f, 0.95f, 0.25f}) {
    DetectorOptions o = cpu_options(detect_options());
    o.decode_cpu_share = share;  // with decode kCpu: refused even where the value is in range
    std::string msg;
    EXPECT_EQ(code_of([&] { Detector::create(model, o); }, &msg), ErrorCode::kInvalidArgument) << share;
    EXPECT_NE(msg.find("decode_cpu_share"), std::string::npos) << msg;
  }
}

TEST(Detector, RejectsInvalidImages) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  auto det = Detector::create(model, cpu_options(detect_options()));
  Image ok(64, 48);
  std::memset(ok.data(), 100, ok.size_bytes());
  const ImageView good = ok.view();
  ImageView null_data = good;
  null_data.data = nullptr;
  ImageView zero_w = good, zero_h = good, neg = good, small_pitch = good;
  zero_w.width = 0;
  zero_h.height = 0;
  neg.width = -5;
  small_pitch.pitch_bytes = 64 * 3 - 1;
  for (const ImageView& bad : {null_data, zero_w, zero_h, neg, small_pitch}) {
    EXPECT_EQ(code_of([&] { det->detect({good, bad}); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] { det->detect(bad); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] { det->detect_async({bad}); }), ErrorCode::kInvalidArgument);
  }
  // the message names the image
  try {
    det->detect({good, small_pitch});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("image 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(det->detect(good).size(), det->detect(good).size());  // still usable
  // device images need a CUDA detector; invalid views are refused first, an empty call is empty
  EXPECT_EQ(code_of([&] { det->detect_device({good}); }), ErrorCode::kUnsupported);
  EXPECT_EQ(code_of([&] { det->detect_device({small_pitch}); }), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(det->detect_device(std::vector<ImageView>{}).empty());
}

TEST(Detector, RejectsInvalidOptionsAndMissingBackends) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(dyn, "models/yolov5n_dyn.onnx");
  auto with = [&](const std::string& m, const std::function<void(DetectorOptions&)>& edit) {
    DetectorOptions o = cpu_options(detect_options());
    edit(o);
    return code_of([&] { Detector::create(m, o); });
  };
  EXPECT_EQ(with(model, [](DetectorOptions& o) { o.max_batch = 0; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with(model, [](DetectorOptions& o) { o.contexts = 0; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with(model, [](DetectorOptions& o) { o.postprocess.iou_threshold = 1.5f; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with(model, [](DetectorOptions& o) { o.postprocess.max_det = 0; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with(model, [](DetectorOptions& o) { o.postprocess.classes = {80}; }), ErrorCode::kInvalidArgument);
  // static 640 model: another size is refused; 640 is accepted
  EXPECT_EQ(with(model, [](DetectorOptions& o) { o.input_width = o.input_height = 320; }), ErrorCode::kInvalidArgument);
  EXPECT_NO_THROW(Detector::create(model, [] {
    DetectorOptions o;
    o.device = Device::kCpu;
    o.input_width = o.input_height = 640;
    return o;
  }()));
  // dynamic model: not a multiple of the stride
  EXPECT_EQ(with(dyn, [](DetectorOptions& o) { o.input_width = o.input_height = 650; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(with(dyn + ".missing", [](DetectorOptions&) {}), ErrorCode::kIo);
  // a build without CUDA: an explicit request fails clearly, auto falls back to the CPU
  const ErrorCode cuda = with(model, [](DetectorOptions& o) { o.device = Device::kCuda; });
  EXPECT_TRUE(cuda == ErrorCode::kUnsupported || cuda == ErrorCode::kCuda);
  DetectorOptions autod;
  autod.device = Device::kAuto;
  EXPECT_EQ(Detector::create(model, autod)->device(), Device::kCpu);
  EXPECT_STREQ(device_name(Device::kCuda), "cuda");
  EXPECT_STREQ(device_name(Device::kCpu), "cpu");
  EXPECT_STREQ(device_name(Device::kAuto), "auto");
}

}  // namespace
}  // namespace yolocu

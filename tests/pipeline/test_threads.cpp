// Concurrency of the CPU path, the thread tests that scripts/tsan.sh runs under ThreadSanitizer
// (label cpu in the normal suite too): one Detector shared by 8 threads, the async path, and the
// CPU engine used from several threads (one engine, calls serialised; one engine per thread over a
// shared Model) with its OpenMP pool inside. Every result must equal the single-threaded one.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>

#include "test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/image.hpp"
#include "yolocu/model.hpp"

using namespace yolocu;

namespace {

// The dynamic model at 256 x 256: small enough for ThreadSanitizer's slowdown.
DetectorOptions small_cpu_options(int contexts) {
  DetectorOptions o;
  o.device = Device::kCpu;
  o.input_width = o.input_height = 256;
  o.contexts = contexts;
  o.cpu_threads = 2;
  return o;
}

void expect_equal(const Detections& a, const Detections& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].class_id, b[i].class_id) << what << " #" << i;
    EXPECT_EQ(a[i].confidence, b[i].confidence) << what << " #" << i;
    EXPECT_EQ(a[i].x1, b[i].x1) << what << " #" << i;
    EXPECT_EQ(a[i].y2, b[i].y2) << what << " #" << i;
  }
}

}  // namespace

TEST(Threads, DetectorSharedByEightThreads) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(bus_path, "images/bus.jpg");
  YOLOCU_REQUIRE_DATA(zidane_path, "images/zidane.jpg");
  const Image bus = decode_image_file(bus_path), zidane = decode_image_file(zidane_path);
  auto det = Detector::create(model, small_cpu_options(2));  // 2 contexts: threads share a pool
  const Detections ref_bus = det->detect(bus.view()), ref_zidane = det->detect(zidane.view());
  ASSERT_FALSE(ref_bus.empty());
  std::vector<std::thread> threads;
  std::vector<std::vector<Detections>> got(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 2; ++k) {
        const Image& img = (t + k) % 2 ? zidane : bus;
        got[static_cast<size_t>(t)].push_back(det->detect(img.view()));
        (void)det->last_times();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t)
    for (int k = 0; k < 2; ++k)
      expect_equal(got[static_cast<size_t>(t)][static_cast<size_t>(k)], (t + k) % 2 ? ref_zidane : ref_bus,
                   "thread " + std::to_string(t) + " call " + std::to_string(k));
}

TEST(Threads, AsyncCallsMixedWithSyncCalls) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(bus_path, "images/bus.jpg");
  const Image bus = decode_image_file(bus_path);
  auto det = Detector::create(model, small_cpu_options(1));
  const Detections ref = det->detect(bus.view());
  std::vector<std::future<std::vector<Detections>>> futures;
  for (int k = 0; k < 6; ++k) futures.push_back(det->detect_async({bus.view(), bus.view()}));
  const Detections sync = det->detect(bus.view());
  expect_equal(sync, ref, "sync call between async ones");
  for (size_t k = 0; k < futures.size(); ++k) {
    const auto r = futures[k].get();
    ASSERT_EQ(r.size(), 2u);
    expect_equal(r[0], ref, "async " + std::to_string(k));
    expect_equal(r[1], ref, "async " + std::to_string(k) + " image 2");
  }
}

TEST(Threads, CpuEngineFromSeveralThreads) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  auto model = std::make_shared<const Model>(load_onnx(path));
  Tensor x(DType::kFloat32, {1, 3, 128, 160});
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = static_cast<float>(i % 255) / 255.f;
  CpuEngineOptions eo;
  eo.num_threads = 2;  // the OpenMP pool inside every call
  CpuEngine shared(model, eo);
  const Tensor ref = shared.run({x}).at(0);
  auto same = [&](const Tensor& y) {
    return y.shape() == ref.shape() && std::memcmp(y.data(), ref.data(), ref.nbytes()) == 0;
  };
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)  // one engine, calls serialised by its lock
    threads.emplace_back([&] {
      for (int k = 0; k < 2; ++k)
        if (!same(shared.run({x}).at(0))) ++mismatches;
    });
  for (int t = 0; t < 3; ++t)  // one engine per thread over the shared Model (the documented way)
    threads.emplace_back([&] {
      CpuEngine own(model, eo);
      for (int k = 0; k < 2; ++k)
        if (!same(own.run({x}).at(0))) ++mismatches;
      (void)own.stats();
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

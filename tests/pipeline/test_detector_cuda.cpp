// The GPU detector end to end (label gpu; skips without a device): same detections as the CPU path
// and as ultralytics' reference in FP32, FP16 accuracy on coco128, thread safety, memory soak.
#include <gtest/gtest.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <thread>

#include "test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/eval.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

DetectorOptions gpu_options(Precision p, const PostprocessOptions& post, int max_batch = 1) {
  DetectorOptions o;
  o.device = Device::kCuda;
  o.precision = p;
  o.postprocess = post;
  o.max_batch = max_batch;
  return o;
}

PostprocessOptions detect_settings() {
  PostprocessOptions p;
  p.conf_threshold = 0.25f;
  p.iou_threshold = 0.45f;
  p.max_det = 1000;
  return p;
}

// Same count and classes, boxes within 0.01 px, confidence within 1e-4; the order may differ
// only between detections whose confidences are within 1e-6 (float near-ties), reported.
::testing::AssertionResult same_detections(const Detections& a, const Detections& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " detections";
  std::vector<bool> used(b.size(), false);
  for (size_t i = 0; i < a.size(); ++i) {
    bool found = false;
    for (size_t j = 0; j < b.size() && !found; ++j) {
      if (used[j]) continue;
      const Detection &x = a[i], &y = b[j];
      if (x.class_id == y.class_id && std::fabs(x.x1 - y.x1) <= 0.01f && std::fabs(x.y1 - y.y1) <= 0.01f &&
          std::fabs(x.x2 - y.x2) <= 0.01f && std::fabs(x.y2 - y.y2) <= 0.01f &&
          std::fabs(x.confidence - y.confidence) <= 1e-4f && (i == j || std::fabs(a[i].confidence - b[i].confidence) < 1e-6f)) {
        used[j] = found = true;
      }
    }
    if (!found)
      return ::testing::AssertionFailure() << "detection " << i << " (class " << a[i].class_id << ", conf "
                                           << a[i].confidence << ", box " << a[i].x1 << " " << a[i].y1 << " " << a[i].x2
                                           << " " << a[i].y2 << ") has no counterpart";
  }
  return ::testing::AssertionSuccess();
}

Detections from_reference(const Tensor& t) {
  Detections d;
  for (int64_t i = 0; i < t.dim(0); ++i) {
    const float* r = t.data_as<float>() + 6 * i;
    d.push_back({r[0], r[1], r[2], r[3], r[4], static_cast<int>(r[5])});
  }
  return d;
}

std::vector<std::string> coco_images() {
  std::vector<std::string> files;
  const std::string dir = test::data_file("coco128/images/train2017");
  if (dir.empty()) return files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 4 && n.substr(n.size() - 4) == ".jpg") files.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Image> decode_all(const std::vector<std::string>& files) {
  std::vector<Image> images;
  for (const auto& f : files) images.push_back(decode_image_file(f));
  return images;
}

std::vector<ImageView> views(const std::vector<Image>& images) {
  std::vector<ImageView> v;
  for (const auto& im : images) v.push_back(im.view());
  return v;
}

size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t device_used() {
  size_t free_b = 0, total = 0;
  cudaMemGetInfo(&free_b, &total);
  return total - free_b;
}

}  // namespace

TEST(DetectorCuda, BusZidaneFp32EqualsCpuAndReference) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  for (const bool val : {false, true}) {
    const PostprocessOptions post = val ? val_options() : detect_settings();
    auto gpu = Detector::create(model, gpu_options(Precision::kFloat32, post));
    DetectorOptions co;
    co.device = Device::kCpu;
    co.postprocess = post;
    auto cpu = Detector::create(model, co);
    ASSERT_EQ(gpu->device(), Device::kCuda);
    for (const char* name : {"bus", "zidane"}) {
      YOLOCU_REQUIRE_DATA(img, std::string("images/") + name + ".jpg");
      const Image im = decode_image_file(img);
      const Detections g = gpu->detect(im.view());
      const Detections c = cpu->detect(im.view());
      EXPECT_TRUE(same_detections(g, c)) << name << (val ? " val" : " detect") << ": GPU FP32 vs CPU";
      const std::string npz = test::data_file(std::string("reference/") + name + ".npz");
      if (!npz.empty()) {
        const auto ref = load_npz(npz);
        EXPECT_TRUE(same_detections(g, from_reference(ref.at(val ? "val" : "detect"))))
            << name << (val ? " val" : " detect") << ": GPU FP32 vs ultralytics";
      }
      std::printf("[ %s %s ] GPU FP32 %zu detections, CPU %zu\n", name, val ? "val" : "detect", g.size(), c.size());
    }
  }
}

TEST(DetectorCuda, DeviceImagesReadInPlaceEqualHostImages) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(img, "images/bus.jpg");
  auto gpu = Detector::create(model, gpu_options(Precision::kFloat16, detect_settings(), 2));
  const Image im = decode_image_file(img);
  const size_t row = static_cast<size_t>(im.width()) * 3;
  // A pitched device copy (rows padded, as a crop of a larger tensor would be).
  void* d = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&d, &pitch, row + 96, static_cast<size_t>(im.height())), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2D(d, pitch, im.data(), row, row, static_cast<size_t>(im.height()), cudaMemcpyHostToDevice),
            cudaSuccess);
  const ImageView dev{static_cast<const uint8_t*>(d), im.width(), im.height(), pitch};
  // The host reference in a batch of the same size: each batch size runs its own tuned tactics,
  // whose rounding differs (bit-for-bit equality holds only like for like).
  const Detections host = gpu->detect(std::vector<ImageView>{im.view(), im.view()}).at(0);
  const std::vector<Detections> on_device = gpu->detect_device({dev, dev});
  ASSERT_EQ(on_device.size(), 2u);
  for (const Detections& r : on_device) {
    ASSERT_EQ(r.size(), host.size());
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_EQ(r[i].class_id, host[i].class_id);
      EXPECT_EQ(r[i].confidence, host[i].confidence);
      EXPECT_EQ(r[i].x1, host[i].x1);
      EXPECT_EQ(r[i].y2, host[i].y2);
    }
  }
  // host memory passed as a device image is refused, naming the image
  EXPECT_THROW(gpu->detect_device({im.view()}), Error);
  EXPECT_EQ(gpu->detect(im.view()).size(), host.size());  // still usable
  cudaFree(d);
}

TEST(DetectorCuda, RawHeadsModelEqualsMergedModel) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(raw, "models/yolov5n_raw_heads.onnx");
  YOLOCU_REQUIRE_DATA(img, "images/bus.jpg");
  const Image im = decode_image_file(img);
  auto a = Detector::create(model, gpu_options(Precision::kFloat32, val_options()));
  auto b = Detector::create(raw, gpu_options(Precision::kFloat32, val_options()));
  EXPECT_TRUE(same_detections(a->detect(im.view()), b->detect(im.view())));
}

TEST(DetectorCuda, Coco128Fp32EqualsCpuAndFp16Map) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  const auto files = coco_images();
  if (files.empty()) GTEST_SKIP() << "coco128 not found";
  const std::vector<Image> images = decode_all(files);
  DetectorOptions co;
  co.device = Device::kCpu;
  co.postprocess = val_options();
  auto cpu = Detector::create(model, co);
  auto gpu32 = Detector::create(model, gpu_options(Precision::kFloat32, val_options(), 16));
  auto gpu16 = Detector::create(model, gpu_options(Precision::kFloat16, val_options(), 16));
  const auto v = views(images);
  const auto c = cpu->detect(v);
  const auto g32 = gpu32->detect(v);
  const auto g16 = gpu16->detect(v);
  int mismatched = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const auto r = same_detections(g32[i], c[i]);
    if (!r) {
      ++mismatched;
      ADD_FAILURE() << files[i] << ": GPU FP32 vs CPU: " << r.message();
    }
  }
  std::printf("[ coco128 ] GPU FP32 vs CPU: %zu images, %d with different detections\n", files.size(), mismatched);
  MapEvaluator e16, e32;
  const std::string labels = test::data_file("coco128/labels/train2017");
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string stem = files[i].substr(files[i].rfind('/') + 1, files[i].size() - files[i].rfind('/') - 5);
    const auto gt = load_yolo_labels(labels + "/" + stem + ".txt", images[i].width(), images[i].height());
    e16.add_image(g16[i], gt);
    e32.add_image(g32[i], gt);
  }
  const MapResult m16 = e16.compute(), m32 = e32.compute();
  std::printf("[ coco128 ] GPU FP32 mAP50 %.4f mAP50-95 %.4f | GPU FP16 mAP50 %.4f mAP50-95 %.4f (reference 0.5452 / 0.3486)\n",
              m32.map50, m32.map50_95, m16.map50, m16.map50_95);
  EXPECT_NEAR(m32.map50_95, 0.3486, 0.0005);
  EXPECT_NEAR(m16.map50_95, 0.3486, 0.002);
  // The direct stem kernel is FP16-only (its choice per batch is timed: printed, not asserted).
  EXPECT_TRUE(gpu32->build_info().direct_stem_batches.empty());
  std::printf("[ coco128 ] FP16 detector: direct stem at %zu of its tuned batch sizes\n",
              gpu16->build_info().direct_stem_batches.size());
}

// Bit for bit: same count, boxes, confidences and classes in the same order.
bool identical(const Detections& a, const Detections& b) {
  bool same = a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i)
    same = a[i].x1 == b[i].x1 && a[i].y1 == b[i].y1 && a[i].x2 == b[i].x2 && a[i].y2 == b[i].y2 &&
           a[i].confidence == b[i].confidence && a[i].class_id == b[i].class_id;
  return same;
}

TEST(DetectorCuda, EightThreadsEqualSerial) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  const auto files = coco_images();
  if (files.empty()) GTEST_SKIP() << "coco128 not found";
  const std::vector<Image> images = decode_all(files);
  DetectorOptions o = gpu_options(Precision::kFloat16, detect_settings(), 4);
  o.contexts = 4;
  auto det = Detector::create(model, o);
  constexpr int kThreads = 8, kPerThread = 200;
  // Each thread walks the same 200 images from a different start, mixing batch sizes 1 and 3. The
  // reference is the same sequence of calls run serially first: like for like, because each batch
  // size runs its own tuned tactics, whose FP16 rounding differs (batch 3 takes batch 4's).
  auto walk = [&](int t) {
    std::vector<Detections> out;
    for (int k = 0; k < kPerThread;) {
      const int n = (k + t) % 2 ? 1 : std::min(3, kPerThread - k);
      std::vector<ImageView> batch;
      for (int j = 0; j < n; ++j) batch.push_back(images[static_cast<size_t>((k + j + t * 25) % kPerThread) % images.size()].view());
      const auto r = det->detect(batch);
      for (int j = 0; j < n; ++j) out.push_back(r[static_cast<size_t>(j)]);
      k += n;
    }
    return out;
  };
  std::vector<std::vector<Detections>> serial(kThreads), results(kThreads);
  for (int t = 0; t < kThreads; ++t) serial[static_cast<size_t>(t)] = walk(t);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { results[static_cast<size_t>(t)] = walk(t); });
  for (auto& th : threads) th.join();
  int diffs = 0;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(results[static_cast<size_t>(t)].size(), static_cast<size_t>(kPerThread));
    for (int k = 0; k < kPerThread; ++k)
      diffs += !identical(results[static_cast<size_t>(t)][static_cast<size_t>(k)], serial[static_cast<size_t>(t)][static_cast<size_t>(k)]);
  }
  std::printf("[ threads ] %d threads x %d images: %d results differ from the serial run\n", kThreads, kPerThread, diffs);
  EXPECT_EQ(diffs, 0);
}

// warm_up(): every context of a detector tuned for {1, 8} runs sizes 3 and 5 before any call, so
// that a later call of those sizes builds nothing (without it, a size's first call builds its
// cuDNN plans: seconds, stalls of Triton's first requests) and captures no graph (each context's
// graphs of both sizes captured by warm_up itself); and the results
// are those of a detector that was not warmed up (same tactics, bit for bit).
TEST(DetectorCuda, WarmUpPreparesEveryContextAndChangesNoResult) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  const auto files = coco_images();
  if (files.size() < 5) GTEST_SKIP() << "coco128 not found";
  const std::vector<Image> images = decode_all(std::vector<std::string>(files.begin(), files.begin() + 5));
  DetectorOptions o = gpu_options(Precision::kFloat16, detect_settings(), 8);
  o.contexts = 2;
  auto cold = Detector::create(model, o);
  auto warm = Detector::create(model, o);
  const auto t0 = std::chrono::steady_clock::now();
  warm->warm_up({3, 5});
  const double warm_up_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(warm->build_info().graphs_captured, 2 * 2) << "2 contexts x sizes 3 and 5";
  for (int n : {3, 5}) {
    std::vector<ImageView> batch;
    for (int j = 0; j < n; ++j) batch.push_back(images[static_cast<size_t>(j)].view());
    const auto a = std::chrono::steady_clock::now();
    const auto w = warm->detect(batch);  // context 0, then (two at once) context 1 as well
    const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    std::vector<Detections> w2;
    std::thread other([&] { w2 = warm->detect(batch); });
    const auto w3 = warm->detect(batch);
    other.join();
    const auto c = cold->detect(batch);
    std::printf("      batch %d: warm_up of sizes 3 and 5 took %.0f ms; the first call after it %.1f ms\n", n,
                warm_up_ms, first_ms);
    // A plan build takes ~1 s; a prepared size's call takes about a millisecond (limit far from both).
    EXPECT_LT(first_ms, 300.0) << "batch " << n << ": the first call after warm_up still built something";
    for (int j = 0; j < n; ++j) {
      EXPECT_TRUE(identical(w[static_cast<size_t>(j)], c[static_cast<size_t>(j)])) << "batch " << n << " image " << j;
      EXPECT_TRUE(identical(w2[static_cast<size_t>(j)], c[static_cast<size_t>(j)])) << "batch " << n << " image " << j;
      EXPECT_TRUE(identical(w3[static_cast<size_t>(j)], c[static_cast<size_t>(j)])) << "batch " << n << " image " << j;
    }
  }
  EXPECT_EQ(test::code_of([&] { warm->warm_up({9}); }), ErrorCode::kInvalidArgument);
}

// One call with many batches on 3 contexts: the batches overlap (max_in_flight 3) and the results
// are those of one-batch-at-a-time calls, bit for bit, in input order; the same call with stage
// profiling on gives the same results and a device time for every stage, and so does a detector
// whose calls wait asleep (blocking_sync).
TEST(DetectorCuda, OverlappedBatchesEqualSerialAndProfileStages) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  const auto files = coco_images();
  if (files.empty()) GTEST_SKIP() << "coco128 not found";
  const std::vector<Image> images = decode_all(files);  // 128 images of many sizes
  DetectorOptions o = gpu_options(Precision::kFloat16, detect_settings(), 4);
  o.contexts = 3;
  auto det = Detector::create(model, o);
  const auto v = views(images);
  std::vector<Detections> serial;
  for (size_t i = 0; i < v.size(); i += 4) {
    const std::vector<ImageView> batch(v.begin() + static_cast<std::ptrdiff_t>(i),
                                       v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), i + 4)));
    for (auto& d : det->detect(batch)) serial.push_back(std::move(d));
    EXPECT_EQ(det->last_times().max_in_flight, 1);
  }
  for (bool profile : {false, true}) {
    det->set_stage_profiling(profile);
    const std::vector<Detections> all = det->detect(v);
    const StageTimes t = det->last_times();
    ASSERT_EQ(all.size(), serial.size());
    int diffs = 0;
    for (size_t i = 0; i < all.size(); ++i) diffs += !identical(all[i], serial[i]);
    std::printf("[ overlap ] profile %d: %zu images in %d batches, up to %d in flight, %.2f ms; %d differ from "
                "serial; GPU ms upload %.3f letterbox %.3f engine %.3f post %.3f\n",
                profile, all.size(), t.batches, t.max_in_flight, t.total, diffs, t.gpu_upload, t.gpu_letterbox,
                t.gpu_engine, t.gpu_postprocess);
    EXPECT_EQ(diffs, 0);
    EXPECT_EQ(t.batches, 32);
    EXPECT_EQ(t.max_in_flight, 3);
    if (profile) {
      EXPECT_GT(t.gpu_upload, 0);
      EXPECT_GT(t.gpu_letterbox, 0);
      EXPECT_GT(t.gpu_engine, 0);
      EXPECT_GT(t.gpu_postprocess, 0);
      EXPECT_LT(t.gpu_upload + t.gpu_letterbox + t.gpu_engine + t.gpu_postprocess, 3 * t.total)
          << "three streams at most overlap";
    } else {
      EXPECT_EQ(t.gpu_engine, 0);
    }
  }
  det->set_stage_profiling(false);
  // Device images take the same overlapped path.
  std::vector<void*> d_ptrs;
  std::vector<ImageView> dv;
  for (const ImageView& im : v) {
    void* p = nullptr;
    ASSERT_EQ(cudaMalloc(&p, im.pitch_bytes * static_cast<size_t>(im.height)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(p, im.data, im.pitch_bytes * static_cast<size_t>(im.height), cudaMemcpyHostToDevice), cudaSuccess);
    d_ptrs.push_back(p);
    dv.push_back({static_cast<const uint8_t*>(p), im.width, im.height, im.pitch_bytes});
  }
  const std::vector<Detections> dev = det->detect_device(dv);
  for (void* p : d_ptrs) cudaFree(p);
  ASSERT_EQ(dev.size(), serial.size());
  int diffs = 0;
  for (size_t i = 0; i < dev.size(); ++i) diffs += !identical(dev[i], serial[i]);
  EXPECT_EQ(diffs, 0);
  EXPECT_EQ(det->last_times().max_in_flight, 3);
  // blocking_sync: the call waits for its batches asleep, with the same results (the same tactics,
  // from the tactic cache the first detector filled)
  o.blocking_sync = true;
  auto blocking = Detector::create(model, o);
  const std::vector<Detections> b = blocking->detect(v);
  ASSERT_EQ(b.size(), serial.size());
  diffs = 0;
  for (size_t i = 0; i < b.size(); ++i) diffs += !identical(b[i], serial[i]);
  EXPECT_EQ(diffs, 0);
  EXPECT_EQ(blocking->last_times().max_in_flight, 3);
}

// max_device_memory: too small for the engine -> create() throws kOutOfMemory naming the budget;
// enough for the engine and bus.jpg's upload but not for a 4000x4000 image -> that detect() throws
// kOutOfMemory naming the upload buffer, and the detector keeps working at the old size.
TEST(DetectorCuda, DeviceMemoryCapGivesClearErrorsAndStaysUsable) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus_path, "images/bus.jpg");
  const Image bus = decode_image_file(bus_path);
  DetectorOptions o = gpu_options(Precision::kFloat16, detect_settings());
  o.tune_batches = {1};  // (the default tactic cache: the second and third builds load the first's)
  auto free_det = Detector::create(model, o);
  const Detections want = free_det->detect(bus.view());
  (void)free_det->detect(bus.view());
  const uint64_t need = free_det->build_info().device_bytes;
  std::printf("[ device memory ] yolov5n fp16 batch 1: %.1f MiB for the engine and the context's buffers\n",
              need / 1048576.0);
  ASSERT_GT(need, 1u << 20);
  free_det.reset();

  o.max_device_memory = 1u << 20;
  try {
    (void)Detector::create(model, o);
    FAIL() << "a 1 MiB budget built an engine";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("max_device_memory"), std::string::npos) << e.what();
    std::printf("[ device memory ] 1 MiB: %s\n", e.what());
  }

  o.max_device_memory = need + (size_t{bus.size_bytes()}) + (4u << 20);  // bus fits, 48 MB does not
  auto det = Detector::create(model, o);
  EXPECT_TRUE(same_detections(det->detect(bus.view()), want));
  Image big(4000, 4000);
  std::memset(big.data(), 90, big.size_bytes());
  try {
    (void)det->detect(big.view());
    FAIL() << "a 4000x4000 image fit a budget sized for bus.jpg";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("upload buffer"), std::string::npos) << e.what();
    std::printf("[ device memory ] 4000x4000: %s\n", e.what());
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_detections(det->detect(bus.view()), want)) << "after the refusal, call " << i;
}

TEST(DetectorCuda, SoakKeepsMemoryFlat) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  const auto files = coco_images();
  if (files.empty()) GTEST_SKIP() << "coco128 not found";
  const std::vector<Image> images = decode_all(files);
  auto det = Detector::create(model, gpu_options(Precision::kFloat16, detect_settings(), 32));
  const auto v = views(images);
  std::vector<ImageView> batch(v.begin(), v.begin() + 32);
  for (int i = 0; i < 20; ++i) det->detect(batch);  // warm: staging buffers sized, graphs captured
  const size_t rss0 = rss_bytes(), dev0 = device_used();
  size_t done = 0, boxes = 0;
  for (int it = 0; done < 10000; ++it) {
    for (int j = 0; j < 32; ++j) batch[static_cast<size_t>(j)] = v[(static_cast<size_t>(it) * 32 + j) % v.size()];
    for (const auto& d : det->detect(batch)) boxes += d.size();
    done += 32;
  }
  const size_t rss1 = rss_bytes(), dev1 = device_used();
  std::printf("[ soak ] %zu images (%zu boxes): host RSS %.1f -> %.1f MiB, device used %.1f -> %.1f MiB\n", done, boxes,
              rss0 / 1048576.0, rss1 / 1048576.0, dev0 / 1048576.0, dev1 / 1048576.0);
  EXPECT_LE(rss1, rss0 + (8u << 20)) << "host memory grew";
  EXPECT_LE(dev1, dev0 + (2u << 20)) << "device memory grew";
}

}  // namespace yolocu

// Detector::detect_encoded on the CUDA detector with DecodeDevice::kGpu (label gpu; skips without
// a device): what nvJPEG's pixels change against the exact CPU decode (detections on bus / zidane
// at conf 0.25, coco128 mAP50-95 within 0.001), the CPU fallbacks exact, errors named, threads.
// The numbers are printed for docs/preprocess.md.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "preprocess/preprocess_test_util.hpp"
#include "test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/eval.hpp"

namespace yolocu {
namespace {

DetectorOptions gpu_decode_options(const PostprocessOptions& post, int max_batch, Precision p = Precision::kFloat32) {
  DetectorOptions o;
  o.device = Device::kCuda;
  o.precision = p;
  o.postprocess = post;
  o.max_batch = max_batch;
  o.decode = DecodeDevice::kGpu;
  return o;
}

PostprocessOptions detect_settings() {
  PostprocessOptions p;
  p.conf_threshold = 0.25f;
  p.iou_threshold = 0.45f;
  p.max_det = 1000;
  return p;
}

float iou(const Detection& a, const Detection& b) {
  const float iw = std::max(0.f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float ih = std::max(0.f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float inter = iw * ih;
  const float u = (a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter;
  return u > 0 ? inter / u : 0.f;
}

// Detections of `a` without a same-class counterpart of IoU >= 0.9 in `b` (and vice versa):
// "changed". Also the largest box-corner shift and confidence change among the matched ones.
struct Change {
  int changed = 0;
  float max_shift = 0, max_conf = 0;
};
Change compare(const Detections& a, const Detections& b) {
  Change c;
  std::vector<bool> used(b.size(), false);
  for (const Detection& x : a) {
    int best = -1;
    float best_iou = 0.9f;
    for (size_t j = 0; j < b.size(); ++j)
      if (!used[j] && b[j].class_id == x.class_id && iou(x, b[j]) >= best_iou) best = static_cast<int>(j), best_iou = iou(x, b[j]);
    if (best < 0) {
      ++c.changed;
      continue;
    }
    used[static_cast<size_t>(best)] = true;
    const Detection& y = b[static_cast<size_t>(best)];
    c.max_shift = std::max({c.max_shift, std::fabs(x.x1 - y.x1), std::fabs(x.y1 - y.y1), std::fabs(x.x2 - y.x2),
                            std::fabs(x.y2 - y.y2)});
    c.max_conf = std::max(c.max_conf, std::fabs(x.confidence - y.confidence));
  }
  for (bool u : used) c.changed += u ? 0 : 1;
  return c;
}

bool identical(const Detections& a, const Detections& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].class_id != b[i].class_id || a[i].confidence != b[i].confidence || a[i].x1 != b[i].x1 ||
        a[i].y1 != b[i].y1 || a[i].x2 != b[i].x2 || a[i].y2 != b[i].y2)
      return false;
  return true;
}

// The same detections up to the rounding of a different tactic (another batch size, or another
// position in a batch): same count, each matched (same class, IoU >= 0.9) with box corners within
// `px` pixels and confidence within `conf`.
::testing::AssertionResult close(const Detections& a, const Detections& b, float px, float conf) {
  const Change c = compare(a, b);
  if (a.size() == b.size() && c.changed == 0 && c.max_shift <= px && c.max_conf <= conf)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " detections, " << c.changed
                                       << " changed, largest corner shift " << c.max_shift << " px (limit " << px
                                       << "), confidence change " << c.max_conf << " (limit " << conf << ")";
}

std::vector<std::string> coco_images() {
  std::vector<std::string> files;
  const std::string dir = test::data_file("coco128/images/train2017");
  if (dir.empty()) return files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jpg") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(DetectEncodedCuda, BusZidaneGpuDecodeAgainstCpuDecode) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  auto det = Detector::create(model, gpu_decode_options(detect_settings(), 2));
  int total_changed = 0;
  for (const char* name : {"bus", "zidane"}) {
    YOLOCU_REQUIRE_DATA(path, std::string("images/") + name + ".jpg");
    const std::string bytes = read_file_bytes(path);
    const Image cpu_img = decode_image(bytes.data(), bytes.size());
    std::vector<DecodedSize> sizes;
    const Detections gpu = det->detect_encoded({{bytes.data(), bytes.size(), path}}, &sizes).at(0);
    const Detections cpu = det->detect(cpu_img.view());  // the same detector, the exact CPU pixels
    EXPECT_EQ(sizes.at(0).width, cpu_img.width());
    EXPECT_EQ(sizes.at(0).height, cpu_img.height());
    const Change c = compare(gpu, cpu);
    total_changed += c.changed;
    std::printf("[ decode gpu ] %s: %zu detections (CPU decode: %zu), %d changed; matched boxes within %.2f px, "
                "confidences within %.4f (conf 0.25, FP32)\n",
                name, gpu.size(), cpu.size(), c.changed, c.max_shift, c.max_conf);
    EXPECT_LE(c.changed, 1) << name;
    EXPECT_LE(c.max_shift, 3.f) << name;
  }
  const DecodeStats s = det->decode_stats();
  std::printf("[ decode gpu ] backend %s; bus + zidane: %d detections changed\n", s.backend.c_str(), total_changed);
  EXPECT_EQ(s.gpu, 2);
  EXPECT_EQ(s.cpu, 0);
  EXPECT_EQ(s.backend.rfind("nvjpeg ", 0), 0u) << s.backend;
}

TEST(DetectEncodedCuda, FallbacksAreExactAndErrorsNamed) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  YOLOCU_REQUIRE_DATA(zidane, "images/zidane.jpg");
  auto det = Detector::create(model, gpu_decode_options(detect_settings(), 4));
  const std::string bus_bytes = read_file_bytes(bus);
  const Image bus_img = decode_image_file(bus);
  const std::vector<uint8_t> png = test::encode_png_bgr(bus_img);
  const std::vector<uint8_t> zid = test::read_bytes(zidane);
  const std::vector<uint8_t> rotated = test::with_exif_orientation(zid, 6, false);
  const Image rotated_img = decode_image(rotated.data(), rotated.size());
  std::vector<DecodedSize> sizes;
  const auto got = det->detect_encoded({{bus_bytes.data(), bus_bytes.size(), "bus.jpg"},
                                        {png.data(), png.size(), "bus.png"},
                                        {rotated.data(), rotated.size(), "zidane_rot6.jpg"}},
                                       &sizes);
  // The CPU-decoded images are decode_image()'s pixels: the device path gives detect()'s detections
  // for them. detect() of a batch of 3 like the one above (its first image is CPU-decoded here, but
  // the FP32 tactics tuned for batch 4 are the same); not bit for bit: a different batch composition
  // may round differently (a batch-1 reference has differed on an H100), so within
  // 0.01 px and 1e-4 in confidence, FP32 rounding on boxes of up to 1080 px.
  const auto want = det->detect(std::vector<ImageView>{bus_img.view(), bus_img.view(), rotated_img.view()});
  EXPECT_TRUE(close(got[1], want[1], 0.01f, 1e-4f)) << "PNG through the CPU fallback";
  EXPECT_TRUE(close(got[2], want[2], 0.01f, 1e-4f)) << "EXIF-rotated JPEG through the CPU fallback";
  EXPECT_EQ(sizes[2].width, rotated_img.width());
  EXPECT_EQ(sizes[2].height, rotated_img.height());
  const DecodeStats s = det->decode_stats();
  EXPECT_EQ(s.gpu, 1);
  EXPECT_EQ(s.cpu_fallback, 2);
  // a batch holding a bad file: the CPU decoder's error, naming it
  std::string msg;
  try {
    det->detect_encoded({{bus_bytes.data(), bus_bytes.size(), "bus.jpg"}, {bus_bytes.data(), bus_bytes.size() / 3, "cut.jpg"}});
    ADD_FAILURE() << "a JPEG cut short was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kParse) << e.what();
    msg = e.what();
  }
  EXPECT_NE(msg.find("cut.jpg"), std::string::npos) << msg;
  // and the detector goes on
  EXPECT_EQ(det->detect_encoded({{bus_bytes.data(), bus_bytes.size(), "bus.jpg"}}).at(0).size(), got[0].size());
}

// The threaded tests' input: bus, zidane and bus again as encoded bytes (the views point into a, b).
struct BusZidaneBus {
  BusZidaneBus(const std::string& bus, const std::string& zidane)
      : a(read_file_bytes(bus)), b(read_file_bytes(zidane)),
        in{{a.data(), a.size(), "bus"}, {b.data(), b.size(), "zidane"}, {a.data(), a.size(), "bus"}} {}
  BusZidaneBus(const BusZidaneBus&) = delete;
  BusZidaneBus& operator=(const BusZidaneBus&) = delete;
  const std::string a, b;
  const std::vector<EncodedImage> in;
};

// FP16, batches of 2, two execution contexts, nvJPEG decode.
DetectorOptions two_context_options() {
  DetectorOptions o = gpu_decode_options(detect_settings(), 2, Precision::kFloat16);
  o.contexts = 2;
  return o;
}

TEST(DetectEncodedCuda, ThreadsAndContextsEqualSerial) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  YOLOCU_REQUIRE_DATA(zidane, "images/zidane.jpg");
  auto det = Detector::create(model, two_context_options());
  const BusZidaneBus images(bus, zidane);
  const std::vector<EncodedImage>& in = images.in;
  const auto serial = det->detect_encoded(in);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 5; ++k) {
        const auto r = det->detect_encoded(in);
        for (size_t i = 0; i < r.size(); ++i) bad[static_cast<size_t>(t)] += identical(r[i], serial[i]) ? 0 : 1;
      }
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "thread " << t;
  // The same bytes twice in one batch: the same detections, up to FP16 rounding (not bit for bit:
  // the two positions have differed on an H100; the message gives by how much).
  EXPECT_TRUE(close(serial[0], serial[2], 0.5f, 2e-3f));
}

// Two detectors at once (as two Triton instances), each called from its own thread with its list
// of random batches of coco128 (1..32 images, FP16), with nvJPEG's hardware decoder and with the
// hybrid backend that GPUs without a JPEG engine get: every batch returns bit for bit what the same
// detector returned for the same batch alone, before the threads started. (Against each image
// detected alone the comparison would not hold: another batch size runs other tactics, whose FP16
// rounding moved a box by 3.5 px and flipped a borderline detection in 7 of 915 images on an H100,
// with either backend.) A race between the detectors, their decoders or their pinned buffers shows
// as a difference.
TEST(DetectEncodedCuda, RandomBatchesOnTwoDetectorsAtOnceEqualAloneBothBackends) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  const std::vector<std::string> files = coco_images();
  if (files.size() < 64) GTEST_SKIP() << "coco128 not found";
  std::vector<std::string> bytes;
  for (const auto& f : files) bytes.push_back(read_file_bytes(f));
  // each thread's batches (image indices)
  std::vector<std::vector<std::vector<size_t>>> batches(2);
  for (int t = 0; t < 2; ++t) {
    std::mt19937 rng(static_cast<unsigned>(t + 1));
    size_t next = static_cast<size_t>(t) * 61 % files.size();
    for (int call = 0; call < 30; ++call) {
      std::vector<size_t> batch(static_cast<size_t>(std::uniform_int_distribution<int>(1, 32)(rng)));
      for (size_t& i : batch) i = next, next = (next + 1) % files.size();
      batches[static_cast<size_t>(t)].push_back(batch);
    }
  }
  auto run = [&](Detector& det, const std::vector<size_t>& batch) {
    std::vector<EncodedImage> in;
    for (size_t i : batch) in.push_back({bytes[i].data(), bytes[i].size(), files[i]});
    return det.detect_encoded(in);
  };
  for (const char* backend : {"hardware", "hybrid"}) {
    DetectorOptions o = gpu_decode_options(detect_settings(), 32, Precision::kFloat16);
    o.contexts = 2;
    std::unique_ptr<Detector> dets[2];
    {
      test::ScopedEnv nvjpeg("YOLOCU_NVJPEG_BACKEND", backend);
      dets[0] = Detector::create(model, o);
      dets[1] = Detector::create(model, o);
    }
    std::vector<std::vector<std::vector<Detections>>> alone(2);
    for (size_t t = 0; t < 2; ++t)
      for (const auto& batch : batches[t]) alone[t].push_back(run(*dets[t], batch));
    std::atomic<int> differing{0}, images{0};
    std::vector<std::string> first(2);
    auto work = [&](size_t t) {
      for (size_t call = 0; call < batches[t].size(); ++call) {
        const std::vector<Detections> r = run(*dets[t], batches[t][call]);
        for (size_t k = 0; k < r.size(); ++k, ++images) {
          if (identical(r[k], alone[t][call][k])) continue;
          ++differing;
          if (first[t].empty())
            first[t] = files[batches[t][call][k]] + " in a batch of " + std::to_string(r.size()) + ": " +
                       close(r[k], alone[t][call][k], 0.f, 0.f).message();
        }
      }
    };
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    std::printf("[ detect_encoded ] %s: %d images in random batches on two detectors at once, %d differ from the same "
                "batches alone%s%s\n", backend, images.load(), differing.load(), first[0].empty() ? "" : "; first: ",
                first[0].c_str());
    EXPECT_EQ(differing.load(), 0) << backend << ": " << first[0] << " / " << first[1];
  }
}

// Stage profiling with several contexts and calls at once (`bench --from-jpeg --stage-times`):
// a profiled batch that held its stream in a host function, on the CUDA callback thread that
// nvJPEG's hardware decoder needs too, once hung two calls for good (2 and 3 contexts). The
// calls must finish (a watchdog fails the test instead of hanging it), time their batches' GPU
// stages, and return what the unprofiled calls return.
TEST(DetectEncodedCuda, StageProfilingWithCallsAtOnceFinishes) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  YOLOCU_REQUIRE_DATA(zidane, "images/zidane.jpg");
  auto det = Detector::create(model, two_context_options());
  const BusZidaneBus images(bus, zidane);
  const std::vector<EncodedImage>& in = images.in;
  const auto serial = det->detect_encoded(in);
  det->set_stage_profiling(true);
  constexpr int kThreads = 4, kCalls = 10;
  std::atomic<int> finished{0};
  std::vector<int> bad(kThreads, 0), timed(kThreads, 0), untimed(kThreads, 0);
  std::vector<double> engine_ms(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const auto k = static_cast<size_t>(t);
      for (int c = 0; c < kCalls; ++c) {
        const auto r = det->detect_encoded(in);
        for (size_t i = 0; i < r.size(); ++i) bad[k] += identical(r[i], serial[i]) ? 0 : 1;
        const StageTimes st = det->last_times();  // this thread's last call
        timed[k] += st.gpu_timed_batches, untimed[k] += st.gpu_untimed_batches, engine_ms[k] += st.gpu_engine;
      }
      finished.fetch_add(1);
    });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (finished.load() < kThreads && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (finished.load() < kThreads) {
    ADD_FAILURE() << finished.load() << " of " << kThreads << " threads finished " << kCalls
                  << " profiled calls in 120 s: the calls hang";
    std::fflush(nullptr);
    std::_Exit(1);  // deadlocked threads cannot be joined
  }
  for (auto& t : threads) t.join();
  det->set_stage_profiling(false);
  int all_timed = 0, all_untimed = 0;
  for (int t = 0; t < kThreads; ++t) {
    const auto k = static_cast<size_t>(t);
    EXPECT_EQ(bad[k], 0) << "thread " << t;
    EXPECT_GT(engine_ms[k], 0.0) << "thread " << t << ": no engine time recorded";
    all_timed += timed[k], all_untimed += untimed[k];
  }
  // Each call's batches are in its last_times(); a batch may be left out only if its stream waited
  // over 100 ms for the enqueue (none should here).
  EXPECT_GE(all_timed, kThreads * kCalls * 9 / 10) << all_untimed << " left out";
  std::printf("      profiled calls at once: %d batches timed, %d left out\n", all_timed, all_untimed);
}

// A call of several batches decodes batch k + 1 while batch k computes (its decoder stays with it
// until it is collected): with one context and with two, the results are those of one call per
// batch, bit for bit (the same batches, so the same tactics), sizes included, and every batch's
// GPU stages are timed.
TEST(DetectEncodedCuda, CallOfManyBatchesEqualsOneCallPerBatch) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  std::vector<std::string> files = coco_images();
  if (files.size() < 26) GTEST_SKIP() << "coco128 not found";
  files.resize(26);  // 7 batches of 4, the last of 2
  std::vector<std::string> bytes;
  std::vector<EncodedImage> enc;
  for (const auto& f : files) bytes.push_back(read_file_bytes(f));
  for (size_t i = 0; i < files.size(); ++i) enc.push_back({bytes[i].data(), bytes[i].size(), files[i]});
  for (int contexts : {1, 2}) {
    DetectorOptions o = gpu_decode_options(detect_settings(), 4, Precision::kFloat16);
    o.contexts = contexts;
    auto det = Detector::create(model, o);
    std::vector<Detections> each;
    std::vector<DecodedSize> each_sizes;
    for (size_t first = 0; first < enc.size(); first += 4) {
      const std::vector<EncodedImage> part(enc.begin() + static_cast<std::ptrdiff_t>(first),
                                           enc.begin() + static_cast<std::ptrdiff_t>(std::min(first + 4, enc.size())));
      std::vector<DecodedSize> sizes;
      for (auto& d : det->detect_encoded(part, &sizes)) each.push_back(std::move(d));
      each_sizes.insert(each_sizes.end(), sizes.begin(), sizes.end());
    }
    det->set_stage_profiling(true);
    std::vector<DecodedSize> sizes;
    const auto all = det->detect_encoded(enc, &sizes);
    const StageTimes st = det->last_times();
    det->set_stage_profiling(false);
    ASSERT_EQ(all.size(), enc.size());
    ASSERT_EQ(sizes.size(), enc.size());
    int bad = 0;
    for (size_t i = 0; i < enc.size(); ++i) {
      bad += identical(all[i], each[i]) ? 0 : 1;
      EXPECT_EQ(sizes[i].width, each_sizes[i].width) << files[i];
      EXPECT_EQ(sizes[i].height, each_sizes[i].height) << files[i];
    }
    EXPECT_EQ(bad, 0) << contexts << " context(s): images whose detections differ";
    EXPECT_EQ(st.batches, 7) << contexts << " context(s)";
    EXPECT_EQ(st.gpu_timed_batches + st.gpu_untimed_batches, 7) << contexts << " context(s)";
    std::printf("      %d context(s): 26 images in one call of 7 batches, %d in flight at most, %d batches timed\n",
                contexts, st.max_in_flight, st.gpu_timed_batches);
  }
}

TEST(DetectEncodedCuda, Coco128MapWithin0001OfCpuDecode) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  const auto files = coco_images();
  if (files.empty()) GTEST_SKIP() << "coco128 not found";
  const std::string labels = test::data_file("coco128/labels/train2017");
  for (const Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    auto det = Detector::create(model, gpu_decode_options(val_options(), 32, p));
    std::vector<std::string> bytes;
    std::vector<EncodedImage> enc;
    for (const auto& f : files) bytes.push_back(read_file_bytes(f));
    for (size_t i = 0; i < files.size(); ++i) enc.push_back({bytes[i].data(), bytes[i].size(), files[i]});
    std::vector<DecodedSize> sizes;
    const auto gpu = det->detect_encoded(enc, &sizes);
    std::vector<Image> images;
    std::vector<ImageView> views;
    for (const auto& f : files) images.push_back(decode_image_file(f));
    for (const auto& im : images) views.push_back(im.view());
    const auto cpu = det->detect(views);
    MapEvaluator eg, ec;
    int changed_images = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string stem = std::filesystem::path(files[i]).stem().string();
      const auto gt = load_yolo_labels(labels + "/" + stem + ".txt", images[i].width(), images[i].height());
      EXPECT_EQ(sizes[i].width, images[i].width());
      eg.add_image(gpu[i], gt);
      ec.add_image(cpu[i], gt);
      changed_images += identical(gpu[i], cpu[i]) ? 0 : 1;
    }
    const MapResult mg = eg.compute(), mc = ec.compute();
    std::printf("[ decode gpu ] coco128 %s: mAP50-95 %.4f with nvJPEG (%s) vs %.4f with CPU decode (diff %+.4f); "
                "mAP50 %.4f vs %.4f; %d of %zu images with different detections (val settings)\n",
                p == Precision::kFloat32 ? "FP32" : "FP16", mg.map50_95, det->decode_stats().backend.c_str(),
                mc.map50_95, mg.map50_95 - mc.map50_95, mg.map50, mc.map50, changed_images, files.size());
    EXPECT_NEAR(mg.map50_95, mc.map50_95, 0.001);
    EXPECT_EQ(det->decode_stats().gpu, static_cast<int64_t>(files.size()));
  }
}

}  // namespace
}  // namespace yolocu

// The CLI's file loop (apps/yolocu/run_common.cpp, compiled into this test) in its encoded mode,
// the one `--decode gpu` uses: readers hand the files' bytes to Detector::detect_encoded. Run here
// on the CPU detector (whose detect_encoded decodes on the CPU), so that the loop itself (batches,
// sizes, per-file errors after a failed batch, callbacks in order) is tested without a GPU against
// the decoding mode, which is the reference.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_common.hpp"
#include "test_util.hpp"
#include "yolocu/detector.hpp"

namespace yolocu::cli {
namespace {

TEST(RunEncoded, SameResultsAsDecodingModeAndErrorsOnTheRightFile) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  YOLOCU_REQUIRE_DATA(zidane, "images/zidane.jpg");
  const std::string dir = test::scratch_dir("run_encoded");
  const std::string cut = dir + "/cut.jpg", text = dir + "/notes.jpg";
  {
    const std::string b = read_file_bytes(bus);
    std::ofstream(cut, std::ios::binary) << b.substr(0, b.size() / 2);
    std::ofstream(text, std::ios::binary) << "not an image";
  }
  // batches of 2: [bus, cut] fails as a batch and is retried per file; [zidane, missing]; [text, bus]
  const std::vector<InputItem> items = {{bus, ""}, {cut, ""}, {zidane, ""}, {dir + "/missing.jpg", ""}, {text, ""}, {bus, ""}};
  DetectorOptions o;
  o.device = Device::kCpu;
  o.max_batch = 2;
  auto det = Detector::create(model, o);
  auto run = [&](bool encoded, std::vector<size_t>* order) {
    RunOptions ro;
    ro.batch = 2;
    ro.decode_threads = 2;
    ro.encoded = encoded;
    ro.quiet = true;
    RunSummary sum;
    auto results = run_detector(*det, items, ro,
                                [&](size_t i, const ImageResult& r, const Image& image, const DetectionTrace*, size_t) {
                                  order->push_back(i);
                                  if (r.error.empty()) {
                                    EXPECT_EQ(image.empty(), encoded) << "the host image exists only when decoding";
                                  }
                                },
                                &sum);
    EXPECT_EQ(sum.images, items.size());
    EXPECT_EQ(sum.failed, 3u);
    return results;
  };
  std::vector<size_t> order_dec, order_enc;
  const auto dec = run(false, &order_dec);
  const auto enc = run(true, &order_enc);
  EXPECT_EQ(order_enc, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(order_dec, order_enc);
  ASSERT_EQ(dec.size(), enc.size());
  for (size_t i = 0; i < dec.size(); ++i) {
    SCOPED_TRACE(items[i].path);
    EXPECT_EQ(enc[i].error, dec[i].error);  // the same message (kIo, kParse, kUnsupported) on the same file
    EXPECT_EQ(enc[i].error.empty(), i == 0 || i == 2 || i == 5);
    EXPECT_EQ(enc[i].width, dec[i].width);
    EXPECT_EQ(enc[i].height, dec[i].height);
    ASSERT_EQ(enc[i].detections.size(), dec[i].detections.size());
    for (size_t k = 0; k < dec[i].detections.size(); ++k) {
      EXPECT_EQ(enc[i].detections[k].confidence, dec[i].detections[k].confidence);
      EXPECT_EQ(enc[i].detections[k].x1, dec[i].detections[k].x1);
      EXPECT_EQ(enc[i].detections[k].class_id, dec[i].detections[k].class_id);
    }
  }
  EXPECT_EQ(enc[0].width, 810);
  EXPECT_GT(enc[0].detections.size(), 0u);
  EXPECT_NE(enc[1].error.find("cut.jpg: JPEG"), std::string::npos) << enc[1].error;
  EXPECT_NE(enc[3].error.find("cannot open"), std::string::npos) << enc[3].error;
  EXPECT_NE(enc[4].error.find("not a JPEG or PNG"), std::string::npos) << enc[4].error;
}

// With several execution contexts the loop runs that many calls at once on worker threads: the
// results (errors included, on the right files), the callback order and the summary are those of
// one context run serially, in both modes. CPU detector: bit for bit (each context is the same
// engine).
TEST(RunEncoded, ContextsRunCallsAtOnceWithTheSerialResultsInOrder) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  YOLOCU_REQUIRE_DATA(zidane, "images/zidane.jpg");
  const std::string dir = test::scratch_dir("run_contexts");
  const std::string text = dir + "/notes.jpg";
  std::ofstream(text, std::ios::binary) << "not an image";
  std::vector<InputItem> items;
  for (int k = 0; k < 4; ++k)
    for (const std::string& f : {bus, zidane, k == 1 ? text : bus}) items.push_back({f, ""});
  auto run = [&](int contexts, bool encoded, std::vector<size_t>* order, RunSummary* sum) {
    DetectorOptions o;
    o.device = Device::kCpu;
    o.max_batch = 2;
    o.contexts = contexts;
    o.cpu_threads = 1;
    auto det = Detector::create(model, o);
    RunOptions ro;
    ro.batch = 2;
    ro.decode_threads = 2;
    ro.encoded = encoded;
    ro.quiet = true;
    return run_detector(*det, items, ro,
                        [&](size_t i, const ImageResult&, const Image&, const DetectionTrace*, size_t) { order->push_back(i); },
                        sum);
  };
  for (bool encoded : {false, true}) {
    SCOPED_TRACE(encoded ? "encoded" : "decoding");
    std::vector<size_t> order1, order3;
    RunSummary sum1, sum3;
    const auto serial = run(1, encoded, &order1, &sum1);
    const auto overlapped = run(3, encoded, &order3, &sum3);
    std::vector<size_t> in_order(items.size());
    for (size_t i = 0; i < in_order.size(); ++i) in_order[i] = i;
    EXPECT_EQ(order1, in_order);
    EXPECT_EQ(order3, in_order);
    EXPECT_EQ(sum3.images, items.size());
    EXPECT_EQ(sum3.failed, 1u);
    EXPECT_EQ(sum3.detections, sum1.detections);
    EXPECT_GT(sum3.times.inference, 0.0);
    ASSERT_EQ(overlapped.size(), serial.size());
    for (size_t i = 0; i < serial.size(); ++i) {
      SCOPED_TRACE(items[i].path + " #" + std::to_string(i));
      EXPECT_EQ(overlapped[i].error, serial[i].error);
      EXPECT_EQ(overlapped[i].width, serial[i].width);
      ASSERT_EQ(overlapped[i].detections.size(), serial[i].detections.size());
      for (size_t k = 0; k < serial[i].detections.size(); ++k) {
        const Detection &a = overlapped[i].detections[k], &b = serial[i].detections[k];
        EXPECT_TRUE(a.confidence == b.confidence && a.x1 == b.x1 && a.y1 == b.y1 && a.x2 == b.x2 && a.y2 == b.y2 &&
                    a.class_id == b.class_id);
      }
    }
    EXPECT_NE(overlapped[5].error.find("not a JPEG or PNG"), std::string::npos) << overlapped[5].error;
  }
}

}  // namespace
}  // namespace yolocu::cli

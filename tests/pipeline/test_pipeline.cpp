// The loop from sources to detections (yolocu/pipeline.hpp), also in its encoded mode, the one
// `--decode gpu` uses: readers hand the files' bytes to Detector::detect_encoded. Run here on the
// CPU detector (whose detect_encoded decodes on the CPU), so that the loop itself (batches, sizes,
// per-file errors after a failed batch, callbacks in order, overlapped calls) is tested without a
// GPU against the decoding mode, which is the reference. Also: sources in memory, eval through the
// loop, and the model family's post-processing defaults that the Detector resolves.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu {
namespace {

TEST(Pipeline, SameResultsAsDecodingModeAndErrorsOnTheRightFile) {
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
  std::vector<Source> items;
  for (const std::string& f : {bus, cut, zidane, dir + "/missing.jpg", text, bus}) items.push_back(Source::file(f));
  DetectorOptions o;
  o.device = Device::kCpu;
  o.max_batch = 2;
  auto det = Detector::create(model, o);
  auto run = [&](bool encoded, std::vector<size_t>* order) {
    PipelineOptions po;
    po.batch = 2;
    po.decode_threads = 2;
    po.encoded = encoded;
    PipelineSummary sum;
    auto results = run_pipeline(*det, items, po,
                                [&](size_t i, const ImageResult& r, const ImageView& image, const DetectionTrace*, size_t) {
                                  order->push_back(i);
                                  if (r.error.empty()) {
                                    EXPECT_EQ(image.data == nullptr, encoded) << "the host image exists only when decoding";
                                    if (!encoded) {
                                      EXPECT_EQ(image.width, r.width);
                                    }
                                  } else {
                                    EXPECT_TRUE(r.exception != nullptr) << "the failure itself is kept";
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
    SCOPED_TRACE(items[i].name);
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
  EXPECT_NE(enc[4].error.find("not a JPEG, PNG, WebP, TIFF or BMP"), std::string::npos) << enc[4].error;
}

// With several execution contexts the loop runs that many calls at once on worker threads: the
// results (errors included, on the right files), the callback order and the summary are those of
// one context run serially, in both modes. CPU detector: bit for bit (each context is the same
// engine).
TEST(Pipeline, ContextsRunCallsAtOnceWithTheSerialResultsInOrder) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  YOLOCU_REQUIRE_DATA(zidane, "images/zidane.jpg");
  const std::string dir = test::scratch_dir("run_contexts");
  const std::string text = dir + "/notes.jpg";
  std::ofstream(text, std::ios::binary) << "not an image";
  std::vector<Source> items;
  for (int k = 0; k < 4; ++k)
    for (const std::string& f : {bus, zidane, k == 1 ? text : bus}) items.push_back(Source::file(f));
  auto run = [&](int contexts, bool encoded, std::vector<size_t>* order, PipelineSummary* sum) {
    DetectorOptions o;
    o.device = Device::kCpu;
    o.max_batch = 2;
    o.contexts = contexts;
    o.cpu_threads = 1;
    auto det = Detector::create(model, o);
    PipelineOptions po;
    po.batch = 2;
    po.decode_threads = 2;
    po.encoded = encoded;
    return run_pipeline(*det, items, po,
                        [&](size_t i, const ImageResult&, const ImageView&, const DetectionTrace*, size_t) { order->push_back(i); },
                        sum);
  };
  for (bool encoded : {false, true}) {
    SCOPED_TRACE(encoded ? "encoded" : "decoding");
    std::vector<size_t> order1, order3;
    PipelineSummary sum1, sum3;
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
      SCOPED_TRACE(items[i].name + " #" + std::to_string(i));
      EXPECT_EQ(overlapped[i].error, serial[i].error);
      EXPECT_EQ(overlapped[i].width, serial[i].width);
      ASSERT_EQ(overlapped[i].detections.size(), serial[i].detections.size());
      for (size_t k = 0; k < serial[i].detections.size(); ++k) {
        const Detection &a = overlapped[i].detections[k], &b = serial[i].detections[k];
        EXPECT_TRUE(a.confidence == b.confidence && a.x1 == b.x1 && a.y1 == b.y1 && a.x2 == b.x2 && a.y2 == b.y2 &&
                    a.class_id == b.class_id);
      }
    }
    EXPECT_NE(overlapped[5].error.find("not a JPEG, PNG, WebP, TIFF or BMP"), std::string::npos) << overlapped[5].error;
  }
}

// Encoded bytes and decoded views in memory give the files' results; a decoded view cannot go
// through the encoded mode.
TEST(Pipeline, SourcesInMemoryMatchFiles) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  YOLOCU_REQUIRE_DATA(zidane, "images/zidane.jpg");
  DetectorOptions o;
  o.device = Device::kCpu;
  o.max_batch = 2;
  auto det = Detector::create(model, o);
  const std::string bus_bytes = read_file_bytes(bus);
  const Image zidane_image = decode_image_file(zidane);
  const std::vector<Source> files = {Source::file(bus), Source::file(zidane)};
  const std::vector<Source> memory = {Source::encoded(bus_bytes.data(), bus_bytes.size(), "bus bytes"),
                                      Source::decoded(zidane_image.view(), "zidane pixels"),
                                      Source::encoded("junk", 4, "junk bytes")};
  PipelineOptions po;
  po.batch = 3;
  const auto ref = run_pipeline(*det, files, po);
  const auto got = run_pipeline(*det, memory, po);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].path, "bus bytes");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(got[i].error.empty()) << got[i].error;
    EXPECT_EQ(got[i].width, ref[i].width);
    ASSERT_EQ(got[i].detections.size(), ref[i].detections.size());
    for (size_t k = 0; k < ref[i].detections.size(); ++k) {
      EXPECT_EQ(got[i].detections[k].x1, ref[i].detections[k].x1);
      EXPECT_EQ(got[i].detections[k].confidence, ref[i].detections[k].confidence);
    }
  }
  EXPECT_NE(got[2].error.find("junk bytes"), std::string::npos) << got[2].error;
  ASSERT_TRUE(got[2].exception != nullptr);
  EXPECT_THROW(std::rethrow_exception(got[2].exception), Error);
  po.encoded = true;
  EXPECT_EQ(test::code_of([&] { run_pipeline(*det, memory, po); }), ErrorCode::kInvalidArgument);
  po.encoded = true;
  const auto enc = run_pipeline(*det, {memory[0]}, po);
  ASSERT_EQ(enc.size(), 1u);
  EXPECT_EQ(enc[0].detections.size(), ref[0].detections.size());
}

TEST(Pipeline, ExpandSourcesListsFoldersAndGlobs) {
  const std::string dir = test::scratch_dir("expand_sources");
  for (const char* f : {"b.jpg", "a.PNG", "c.txt"}) std::ofstream(dir + "/" + f) << "x";
  std::filesystem::create_directories(dir + "/empty/sub");
  const std::vector<Source> s = expand_sources({dir, dir + "/*.jpg", dir + "/none*.jpg", dir + "/missing.jpg"});
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].name, dir + "/a.PNG");
  EXPECT_EQ(s[1].name, dir + "/b.jpg");
  EXPECT_EQ(s[2].name, dir + "/b.jpg");
  EXPECT_NE(s[3].error.find("no file matches"), std::string::npos);
  EXPECT_EQ(s[4].name, dir + "/missing.jpg");
  EXPECT_TRUE(s[4].error.empty());
  std::string msg;
  EXPECT_EQ(test::code_of([&] { expand_sources({dir + "/empty"}); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("1 subfolder: 'sub'"), std::string::npos) << msg;
}

// evaluate_sources: the loop's detections scored per label file; a broken label file is counted
// and left out, a failed image too.
TEST(Pipeline, EvaluateSourcesScoresAndCountsFailures) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(images, "coco128/images/train2017");
  const std::string dir = test::scratch_dir("evaluate_sources");
  std::vector<Source> sources = expand_sources({images});
  sources.resize(6);
  const std::string labels = images + "/../../labels/train2017";
  const std::string my_labels = dir + "/labels";
  std::filesystem::create_directories(my_labels);
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string stem = std::filesystem::path(sources[i].name).stem().string();
    std::error_code ec;
    std::filesystem::copy_file(labels + "/" + stem + ".txt", my_labels + "/" + stem + ".txt",
                               std::filesystem::copy_options::overwrite_existing, ec);
  }
  const std::string broken = std::filesystem::path(sources[1].name).stem().string();
  std::ofstream(my_labels + "/" + broken + ".txt") << "not a label line\n";
  sources.push_back(Source::file(dir + "/missing.jpg"));
  DetectorOptions o;
  o.device = Device::kCpu;
  o.max_batch = 4;
  o.input_width = o.input_height = 320;
  o.postprocess = family_postprocess_options();
  o.postprocess.multi_label = true;
  o.postprocess_defaults = PostprocessDefaults::kVal;
  auto det = Detector::create(model, o);
  PipelineOptions po;
  po.batch = 4;
  std::vector<size_t> order;
  const EvalRun run = evaluate_sources(*det, sources, my_labels, po,
                                       [&](size_t i, const ImageResult&, const std::string&) { order.push_back(i); });
  EXPECT_EQ(order.size(), sources.size());
  EXPECT_EQ(run.metrics.num_images, 5);
  EXPECT_GT(run.metrics.num_labels, 0);
  EXPECT_EQ(run.failed, 2u);
  EXPECT_EQ(run.summary.failed, 1u);
  EXPECT_NE(run.label_errors[1].find("not a number"), std::string::npos) << run.label_errors[1];
  EXPECT_FALSE(run.images.back().error.empty());
}

// The Detector resolves the post-processing left to the family from the model it parsed (YOLOv5
// here: detect.py's and val.py's); explicit values win. Detector::create from a loaded model.
TEST(FamilyDefaults, YoloV5DetectAndValDefaultsAndExplicitValuesWin) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  DetectorOptions o;
  o.device = Device::kCpu;
  o.postprocess = family_postprocess_options();
  auto det = Detector::create(model, o);
  EXPECT_FLOAT_EQ(det->options().postprocess.iou_threshold, 0.45f);
  EXPECT_FLOAT_EQ(det->options().postprocess.conf_threshold, 0.25f);
  EXPECT_EQ(det->options().postprocess.max_det, 1000);
  o.postprocess_defaults = PostprocessDefaults::kVal;
  o.postprocess.iou_threshold = 0.3f;  // explicit: kept
  auto loaded = std::make_shared<const Model>(load_onnx(model));
  auto val = Detector::create(loaded, o);
  EXPECT_FLOAT_EQ(val->options().postprocess.iou_threshold, 0.3f);
  EXPECT_FLOAT_EQ(val->options().postprocess.conf_threshold, 0.001f);
  EXPECT_EQ(val->options().postprocess.max_det, 300);
  o.postprocess.iou_threshold = 1.5f;  // explicit and invalid: refused before the model is read
  EXPECT_EQ(test::code_of([&] { Detector::create("no/such/model.onnx", o); }), ErrorCode::kInvalidArgument);
}

TEST(FamilyDefaults, ResolvedPerLayout) {
  const PostprocessOptions unset = family_postprocess_options();
  const PostprocessOptions v8 = resolve_family_defaults(unset, OutputLayout::kYolov8, PostprocessDefaults::kPredict);
  EXPECT_FLOAT_EQ(v8.iou_threshold, 0.7f);
  EXPECT_EQ(v8.max_det, 300);
  const PostprocessOptions v8val = resolve_family_defaults(unset, OutputLayout::kYolov8, PostprocessDefaults::kVal);
  EXPECT_FLOAT_EQ(v8val.iou_threshold, 0.7f);
  EXPECT_FLOAT_EQ(v8val.conf_threshold, 0.001f);
  EXPECT_FALSE(v8val.clip_boxes);  // ultralytics 8.4's val matches unclipped boxes
  EXPECT_TRUE(v8.clip_boxes);
  const PostprocessOptions v5val = resolve_family_defaults(unset, OutputLayout::kYolov5, PostprocessDefaults::kVal);
  EXPECT_FLOAT_EQ(v5val.iou_threshold, 0.6f);
  EXPECT_TRUE(v5val.clip_boxes);
  PostprocessOptions explicit_iou = unset;
  explicit_iou.iou_threshold = 0.5f;
  EXPECT_FLOAT_EQ(resolve_family_defaults(explicit_iou, OutputLayout::kYolov8, PostprocessDefaults::kPredict).iou_threshold,
                  0.5f);
}

}  // namespace
}  // namespace yolocu

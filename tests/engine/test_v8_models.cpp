// YOLOv8n and YOLO11n, as `yolo export format=onnx [dynamic=True]` writes them, through the CPU
// engine against ultralytics' own PyTorch outputs (scripts/v8/make_refs.sh: fixed-seed random
// weights, FP32 on the CPU): relative L2 <= 1e-5 at batch 1 and 4, static and dynamic exports.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "engine/engine_test_util.hpp"
#include "engine/plan.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

namespace {

constexpr double kMaxRelL2 = 1e-5;

std::shared_ptr<Model> load(const std::string& path) { return std::make_shared<Model>(load_onnx(path)); }

// The raw output vs ultralytics: same shape, relative L2 within the bound (printed, so the suite's
// log records the margin).
void expect_output(const Tensor& got, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  const test::Diff d = test::compare(got, ref);
  std::printf("[ v8 raw   ] %-32s rel L2 %.3g  max abs %.3g\n", what.c_str(), d.rel_l2, d.max_abs);
  EXPECT_LE(d.rel_l2, kMaxRelL2) << what << ": max abs " << d.max_abs;
}

class V8Models : public ::testing::TestWithParam<std::string> {};

TEST_P(V8Models, StaticBatch1MatchesUltralytics) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model, name + ".onnx");
  CpuEngine engine(load(model));
  for (const char* image : {"bus", "zidane"}) {
    YOLOCU_REQUIRE_V8(ref_path, name + "_" + image + ".npz");
    auto ref = load_npz(ref_path);
    const auto out = engine.run({ref["input"]});
    ASSERT_EQ(out.size(), 1u);
    expect_output(out[0], ref["output"], name + " static b1 " + image);
  }
}

// Opset 18 (what the package writes with torch >= 2.4: Split with num_outputs, Resize-18).
TEST_P(V8Models, Opset18MatchesUltralytics) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model, name + "_op18.onnx");
  YOLOCU_REQUIRE_V8(ref_path, name + "_bus.npz");
  auto m = load(model);
  EXPECT_EQ(m->opset, 18);
  CpuEngine engine(m);
  auto ref = load_npz(ref_path);
  expect_output(engine.run({ref["input"]})[0], ref["output"], name + " opset 18 b1 bus");
}

TEST_P(V8Models, DynamicBatch1And4MatchUltralytics) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model, name + "_dyn.onnx");
  YOLOCU_REQUIRE_V8(b4_path, name + "_batch4.npz");
  YOLOCU_REQUIRE_V8(bus_path, name + "_bus.npz");
  CpuEngine engine(load(model));
  auto bus = load_npz(bus_path);
  expect_output(engine.run({bus["input"]})[0], bus["output"], name + " dynamic b1 bus");
  auto b4 = load_npz(b4_path);
  expect_output(engine.run({b4["input"]})[0], b4["output"], name + " dynamic b4");
}

TEST_P(V8Models, DynamicOtherSizeMatchesUltralytics) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model, name + "_dyn.onnx");
  YOLOCU_REQUIRE_V8(ref_path, name + "_rect.npz");
  auto ref = load_npz(ref_path);  // 1 x 3 x 480 x 640: 6300 anchors
  CpuEngine engine(load(model));
  const auto out = engine.run({ref["input"]});
  EXPECT_EQ(out[0].dim(2), 6300);
  expect_output(out[0], ref["output"], name + " dynamic 480x640");
}

// The static export re-batched (engine::make_batch_dynamic, as the GPU engine runs static
// exports at any batch): batch 4.
TEST_P(V8Models, StaticRebatchedBatch4MatchesUltralytics) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model, name + ".onnx");
  YOLOCU_REQUIRE_V8(b4_path, name + "_batch4.npz");
  auto m = std::make_shared<Model>(engine::make_batch_dynamic(load_onnx(model)));
  CpuEngine engine(m);
  auto b4 = load_npz(b4_path);
  expect_output(engine.run({b4["input"]})[0], b4["output"], name + " static re-batched b4");
}

TEST_P(V8Models, FamilyAndMetadata) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_V8(model, name + ".onnx");
  YOLOCU_REQUIRE_V8(dyn, name + "_dyn.onnx");
  for (const std::string& path : {model, dyn}) {
    const Model m = load_onnx(path);
    const ModelInfo info = model_info(m);
    EXPECT_EQ(info.family, ModelFamily::kYolov8) << path;
    EXPECT_EQ(info.task, "detect");
    EXPECT_EQ(info.title, name == "yolov8n" ? "YOLOv8n" : "YOLO11n");
    EXPECT_EQ(info.stride, 32);
    EXPECT_EQ(info.imgsz_h, 640);
    EXPECT_EQ(info.imgsz_w, 640);
    EXPECT_FALSE(info.end2end);
    EXPECT_NO_THROW(check_detection_model(info));
    ASSERT_EQ(m.class_names().size(), 80u);
    EXPECT_EQ(m.class_names()[0], "person");
    // without the metadata, the output layout [batch, 84, anchors] still says YOLOv8
    Model bare = m;
    bare.metadata.clear();
    EXPECT_EQ(model_info(bare).family, ModelFamily::kYolov8) << path;
    // other tasks and end-to-end exports are refused by name
    for (const char* task : {"segment", "pose", "obb", "classify"}) {
      Model other = m;
      other.metadata["task"] = task;
      try {
        check_detection_model(model_info(other));
        ADD_FAILURE() << task << " accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
        EXPECT_NE(std::string(e.what()).find(std::string("'") + task + "'"), std::string::npos) << e.what();
      }
    }
    Model e2e = m;
    e2e.metadata["end2end"] = "True";
    EXPECT_THROW(check_detection_model(model_info(e2e)), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(Exports, V8Models, ::testing::Values("yolov8n", "yolo11n"),
                         [](const auto& p) { return p.param; });

}  // namespace

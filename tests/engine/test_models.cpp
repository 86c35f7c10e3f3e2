// The four shared models through the CPU engine, against ultralytics' reference output and ONNX
// Runtime on the same inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "engine/engine_test_util.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

namespace {

std::shared_ptr<Model> load(const std::string& path) { return std::make_shared<Model>(load_onnx(path)); }

// Merged output (N x 25200 x 85) vs the reference: scores/xy within 1e-3 absolute; w/h within
// 1e-3 + 2e-5 * |ref| (see close_to); relative L2 <= 1e-5.
void expect_merged_close(const Tensor& got, const Tensor& ref) {
  EXPECT_TRUE(test::close_to(got, ref, 1e-3, 2e-5, 1e-5));
}

// A different image from an existing one: mirror left-right.
Tensor mirrored(const Tensor& x) {
  Tensor y(x.dtype(), x.shape());
  const int64_t W = x.dim(3), rows = x.numel() / W;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < W; ++c) y.data_as<float>()[r * W + c] = x.data_as<float>()[r * W + (W - 1 - c)];
  return y;
}

Tensor stack(const std::vector<Tensor>& xs) {
  Shape s = xs[0].shape();
  s[0] = static_cast<int64_t>(xs.size());
  Tensor y(xs[0].dtype(), s);
  for (size_t i = 0; i < xs.size(); ++i)
    std::memcpy(static_cast<uint8_t*>(y.data()) + i * xs[0].nbytes(), xs[i].data(), xs[i].nbytes());
  return y;
}

Tensor batch_item(const Tensor& x, int64_t i) {
  Shape s = x.shape();
  s[0] = 1;
  Tensor y(x.dtype(), s);
  std::memcpy(y.data(), static_cast<const uint8_t*>(x.data()) + i * y.nbytes(), y.nbytes());
  return y;
}

}  // namespace

TEST(Models, StaticMatchesUltralyticsReference) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  CpuEngine engine(load(model));
  for (const char* name : {"bus", "zidane"}) {
    SCOPED_TRACE(name);
    YOLOCU_REQUIRE_DATA(ref_path, std::string("reference/") + name + ".npz");
    auto ref = load_npz(ref_path);
    auto out = engine.run({ref["input"]});
    ASSERT_EQ(out.size(), 1u);
    expect_merged_close(out[0], ref["output"]);
  }
  const EngineStats st = engine.stats();
  EXPECT_GT(st.fused_nodes, 100);  // 57 Conv+SiLU pairs
  EXPECT_LT(st.arena_bytes * 4, st.naive_bytes) << "liveness plan should reuse activation memory";
}

TEST(Models, DynamicBatch1And4) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(bus_path, "reference/bus.npz");
  YOLOCU_REQUIRE_DATA(zid_path, "reference/zidane.npz");
  auto bus = load_npz(bus_path), zid = load_npz(zid_path);
  CpuEngine engine(load(model));
  expect_merged_close(engine.run({bus["input"]})[0], bus["output"]);
  const Tensor batch = stack({bus["input"], zid["input"], mirrored(bus["input"]), mirrored(zid["input"])});
  const auto out = engine.run({batch});
  ASSERT_EQ(out[0].shape(), (Shape{4, 25200, 85}));
  expect_merged_close(batch_item(out[0], 0), bus["output"]);
  expect_merged_close(batch_item(out[0], 1), zid["output"]);
  const auto ort = test::run_ort(model, {batch}, "dyn_b4");
  if (ort.empty()) GTEST_SKIP() << "no ONNX Runtime (.venv): batch items 2-3 not checked";
  expect_merged_close(out[0], ort[0]);
}

TEST(Models, Dynamic320AgainstOnnxRuntime) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(bus_path, "reference/bus.npz");
  const Tensor full = load_npz(bus_path)["input"];
  Tensor x(DType::kFloat32, {1, 3, 320, 320});  // every other pixel of the bus letterbox
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 320; ++y)
      for (int xx = 0; xx < 320; ++xx)
        x.data_as<float>()[(c * 320 + y) * 320 + xx] = full.data_as<float>()[(c * 640 + 2 * y) * 640 + 2 * xx];
  CpuEngine engine(load(model));
  const auto out = engine.run({x});
  ASSERT_EQ(out[0].shape(), (Shape{1, 6300, 85}));
  const auto ort = test::run_ort(model, {x}, "dyn_320");
  if (ort.empty()) GTEST_SKIP() << "no ONNX Runtime (.venv)";
  expect_merged_close(out[0], ort[0]);
}

TEST(Models, Fp16AgainstOnnxRuntime) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5s_random_fp16.onnx");
  YOLOCU_REQUIRE_DATA(bus_path, "reference/bus.npz");
  const Tensor x = cast_tensor(load_npz(bus_path)["input"], DType::kFloat16);
  CpuEngine engine(load(model));
  const auto out = engine.run({x});
  ASSERT_EQ(out[0].dtype(), DType::kFloat16);
  ASSERT_EQ(out[0].shape(), (Shape{1, 25200, 85}));
  const auto ort = test::run_ort(model, {x}, "fp16");
  if (ort.empty()) GTEST_SKIP() << "no ONNX Runtime (.venv)";
  // ORT computes fp16 layer by layer (rounding every activation to half); we compute in fp32 and
  // round once at the output: the bound is relative L2 <= 1e-2.
  const auto d = test::compare(out[0], ort[0]);
  EXPECT_LE(d.rel_l2, 1e-2) << "max abs " << d.max_abs;
}

TEST(Models, RawHeadsAgainstOnnxRuntime) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n_raw_heads.onnx");
  YOLOCU_REQUIRE_DATA(bus_path, "reference/bus.npz");
  const Tensor x = load_npz(bus_path)["input"];
  auto m = load(model);
  CpuEngine engine(m);
  const auto out = engine.run({x});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].shape(), (Shape{1, 255, 80, 80}));
  EXPECT_EQ(out[2].shape(), (Shape{1, 255, 20, 20}));
  const auto ort = test::run_ort(model, {x}, "raw");
  if (ort.empty()) GTEST_SKIP() << "no ONNX Runtime (.venv)";
  ASSERT_EQ(ort.size(), 3u);  // output0..2: sorted file names match graph order
  for (int i = 0; i < 3; ++i) {
    const auto d = test::compare(out[static_cast<size_t>(i)], ort[static_cast<size_t>(i)]);
    EXPECT_LE(d.rel_l2, 1e-5) << "output" << i << " max abs " << d.max_abs;
  }
}

TEST(Models, MetadataAndInspect) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(names_path, "coco.names");
  const Model m = load_onnx(model);
  const auto names = m.class_names();
  ASSERT_EQ(names.size(), 80u);
  std::ifstream f(names_path);
  std::string line;
  for (size_t i = 0; std::getline(f, line) && i < names.size(); ++i) EXPECT_EQ(names[i], line);
  EXPECT_EQ(m.stride(), 32);
  EXPECT_EQ(m.opset, 12);
  ASSERT_EQ(m.graph.inputs.size(), 1u);
  EXPECT_EQ(m.graph.inputs[0].name, "images");
  const Model dyn = load_onnx(test::data_file("models/yolov5n_dyn.onnx"));
  EXPECT_EQ(dyn.graph.inputs[0].dims[0].param, "batch");
  EXPECT_FALSE(dyn.graph.inputs[0].dims[2].is_static());
}

TEST(Models, Yolov5Family) {
  for (const char* rel : {"models/yolov5n.onnx", "models/yolov5n_dyn.onnx", "models/yolov5n_raw_heads.onnx"}) {
    YOLOCU_REQUIRE_DATA(path, rel);
    const ModelInfo info = model_info(load_onnx(path));
    EXPECT_EQ(info.family, ModelFamily::kYolov5) << rel << ": " << info.family_reason;
    EXPECT_EQ(info.task, "detect");
    EXPECT_NO_THROW(check_detection_model(info));
  }
}

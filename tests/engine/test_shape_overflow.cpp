// Shape inference never computes a wrapped int64: one hostile case per op family that computes a
// shape (windows: Conv / MaxPool; Flatten; Concat; Reshape; Slice; Split; Range; Resize;
// ConstantOfShape), each a kInvalidArgument naming the node, never a nonsense shape or UB (the
// ASan + UBSan build runs this too).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/ops.hpp"
#include "test_util.hpp"

namespace yolocu {
namespace {

constexpr int64_t kBig = int64_t{1} << 62;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

Attribute ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

Attribute one_int(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}

ops::ValueMeta meta(Shape s, DType t = DType::kFloat32) {
  ops::ValueMeta m;
  m.dtype = t;
  m.shape = std::move(s);
  return m;
}

ops::ValueMeta constant(const Tensor* t) {
  ops::ValueMeta m = meta(t->shape(), t->dtype());
  m.value = t;
  return m;
}

Tensor int64s(const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<int64_t>()[i] = v[i];
  return t;
}

Node node(const std::string& op, size_t inputs, std::map<std::string, Attribute> attrs = {}) {
  Node n;
  n.name = "hostile";
  n.op_type = op;
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  n.outputs = {"out"};
  n.attributes = std::move(attrs);
  return n;
}

// The error infer() throws (kInternal and a test failure when none).
ErrorCode infer_error(const Node& n, const std::vector<ops::ValueMeta>& in, std::string* message) {
  const ops::OpDef* op = ops::find_op(n.op_type);
  EXPECT_NE(op, nullptr) << n.op_type;
  if (op == nullptr) return ErrorCode::kInternal;
  std::vector<ops::ValueMeta> out;
  return test::code_of([&] { op->infer(n, 13, in, out); }, message);
}

void expect_refused(const Node& n, const std::vector<ops::ValueMeta>& in, const std::string& words) {
  std::string message;
  const ErrorCode code = infer_error(n, in, &message);
  EXPECT_TRUE(code == ErrorCode::kInvalidArgument || code == ErrorCode::kUnsupported) << message;
  EXPECT_NE(message.find("hostile"), std::string::npos) << message;
  EXPECT_NE(message.find(words), std::string::npos) << message;
}

TEST(ShapeOverflow, ConvWindowOfHugeDilationAndKernel) {
  // dilation 2^24 times a kernel of 2^40 (weights declared by a graph input): d * (k - 1) > 2^63
  const Node conv = node("Conv", 2, {{"dilations", ints({1 << 24, 1})}});
  expect_refused(conv, {meta({1, 1, 8, 8}), meta({1, 1, int64_t{1} << 40, 1})}, "overflows int64");
  // an input near 2^63 plus pads
  const Node padded = node("Conv", 2, {{"pads", ints({1 << 24, 0, 1 << 24, 0})}});
  expect_refused(padded, {meta({1, 1, kMax - 10, 8}), meta({1, 1, 1, 1})}, "overflows int64");
}

TEST(ShapeOverflow, MaxPoolWindow) {
  const Node pool = node("MaxPool", 1,
                         {{"kernel_shape", ints({3, 3})}, {"pads", ints({1 << 24, 0, 1 << 24, 0})}, {"ceil_mode", one_int(1)}});
  expect_refused(pool, {meta({1, 1, kMax - 5, 8})}, "overflows int64");
}

TEST(ShapeOverflow, FlattenProduct) {
  const Node flatten = node("Flatten", 1, {{"axis", one_int(2)}});
  expect_refused(flatten, {meta({int64_t{1} << 40, int64_t{1} << 40, 1})}, "the flattened size");
}

TEST(ShapeOverflow, ConcatAxisSum) {
  const Node concat = node("Concat", 2, {{"axis", one_int(0)}});
  expect_refused(concat, {meta({kBig, 1}), meta({kBig, 1})}, "the concatenated axis");
}

TEST(ShapeOverflow, ReshapeTarget) {
  const Tensor target = int64s({kBig, 4});
  std::string message;
  EXPECT_NE(infer_error(node("Reshape", 2), {meta({4}), constant(&target)}, &message), ErrorCode::kInternal) << message;
  EXPECT_NE(message.find("overflows int64"), std::string::npos) << message;
}

TEST(ShapeOverflow, SliceBoundsAndSteps) {
  // steps and bounds at the int64 edges: a shape within the input's (here empty), or a named error
  const Tensor starts = int64s({0}), ends = int64s({kMax}), axes = int64s({0});
  for (int64_t step : {INT64_MIN, kMax, int64_t{-1}}) {
    const Tensor steps = int64s({step});
    const ops::OpDef* op = ops::find_op("Slice");
    ASSERT_NE(op, nullptr);
    std::vector<ops::ValueMeta> out;
    try {
      op->infer(node("Slice", 5), 13, {meta({kBig}), constant(&starts), constant(&ends), constant(&axes), constant(&steps)},
                out);
      ASSERT_EQ(out.size(), 1u);
      ASSERT_EQ(out[0].shape.size(), 1u);
      EXPECT_GE(out[0].shape[0], 0) << step;
      EXPECT_LE(out[0].shape[0], kBig) << step;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("hostile"), std::string::npos) << e.what();
    }
  }
}

TEST(ShapeOverflow, SplitSizes) {
  const Tensor sizes = int64s({kBig, kBig, 4});
  std::string message;
  Node split = node("Split", 2);
  split.outputs = {"a", "b", "c"};
  EXPECT_EQ(infer_error(split, {meta({8}), constant(&sizes)}, &message), ErrorCode::kInvalidArgument) << message;
}

TEST(ShapeOverflow, RangeCount) {
  Tensor start(DType::kInt64, {}), limit(DType::kInt64, {}), delta(DType::kInt64, {});
  start.data_as<int64_t>()[0] = INT64_MIN;
  limit.data_as<int64_t>()[0] = kMax;
  delta.data_as<int64_t>()[0] = 1;
  std::string message;
  const ErrorCode code =
      infer_error(node("Range", 3), {constant(&start), constant(&limit), constant(&delta)}, &message);
  EXPECT_TRUE(code == ErrorCode::kInvalidArgument || code == ErrorCode::kUnsupported || code == ErrorCode::kOutOfMemory)
      << message;
}

TEST(ShapeOverflow, ResizeScale) {
  Tensor scales(DType::kFloat32, {4});
  for (int i = 0; i < 4; ++i) scales.data_as<float>()[i] = i < 2 ? 1.f : 1e30f;
  std::string message;
  Node resize = node("Resize", 3);
  resize.inputs[1] = "";
  ops::ValueMeta roi;
  roi.present = false;
  EXPECT_EQ(infer_error(resize, {meta({1, 3, 640, 640}), roi, constant(&scales)}, &message), ErrorCode::kInvalidArgument)
      << message;
}

TEST(ShapeOverflow, ConstantOfShapeProduct) {
  const Tensor shape = int64s({kBig, kBig});
  std::string message;
  EXPECT_EQ(infer_error(node("ConstantOfShape", 1), {constant(&shape)}, &message), ErrorCode::kInvalidArgument)
      << message;
  EXPECT_NE(message.find("overflows int64"), std::string::npos) << message;
}

}  // namespace
}  // namespace yolocu

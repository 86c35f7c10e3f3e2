// Semantically hostile models, hand-made (no test material needed): declared or computed sizes that
// overflow int64, exceed the memory budget or 2^31 elements, negative and zero dims, cycles,
// dangling inputs, initializers whose bytes disagree with their shape, Reshape / Slice / Resize
// parameters at the int64 edges, unsupported ops / domains / opsets, external data pointing
// outside the model's folder. Each one is a yolocu::Error whose message names the problem, raised
// before anything of the hostile size is allocated. Also runs under ASan + UBSan (label asan).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "cli/cli_test_util.hpp"
#include "engine/plan.hpp"
#include "onnx_builder.hpp"
#include "test_util.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;
using yolocu::fuzz::Builder;
namespace pb = ::yolocu_onnx;

namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

struct Outcome {
  bool threw = false;
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

// Loads `b`'s model, then (unless it failed) runs it once on zeros of the declared input shapes
// (symbolic dims: 8). Fails the test on any exception other than yolocu::Error.
Outcome load_and_run(const Builder& b, uint64_t max_memory = 0) {
  Outcome o;
  try {
    const std::string bytes = b.bytes();
    auto m = std::make_shared<Model>(parse_onnx(bytes.data(), bytes.size(), "abuse.onnx"));
    std::vector<Shape> shapes;
    for (const auto& v : m->graph.inputs) {
      Shape s;
      for (const Dim& d : v.dims) s.push_back(d.is_static() ? d.value : 8);
      shapes.push_back(s);
    }
    CpuEngineOptions eo;
    eo.max_memory = max_memory;
    CpuEngine engine(m, eo);
    engine.prepare(shapes);  // the plan: every check happens here, before inputs are allocated
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < shapes.size(); ++i) inputs.emplace_back(m->graph.inputs[i].dtype, shapes[i]);
    (void)engine.run(inputs);
  } catch (const Error& e) {
    o.threw = true;
    o.code = e.code();
    o.message = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-yolocu exception escaped: " << e.what();
    o.threw = true;
  }
  return o;
}

#define EXPECT_ERROR(outcome, error_code, ...)                                                   \
  do {                                                                                           \
    const Outcome& o_ = (outcome);                                                               \
    ASSERT_TRUE(o_.threw) << "the model was accepted";                                           \
    EXPECT_EQ(o_.code, ErrorCode::error_code) << o_.message;                                     \
    for (const char* part : {__VA_ARGS__}) EXPECT_NE(o_.message.find(part), std::string::npos) \
        << "'" << part << "' missing from: " << o_.message;                                      \
  } while (0)

// x [1, 4, 8, 8] -> Identity -> y: the smallest valid graph, to break one piece at a time.
Builder tiny(int opset = 13) {
  Builder b(opset);
  b.input("x", {1, 4, 8, 8});
  b.node("Identity", {"x"}, {"y"});
  b.output("y");
  return b;
}

// x [1] -> Add(x, ConstantOfShape(shape)) -> y: a folded value of the given shape (dtype of `value`).
Builder constant_of_shape(const std::vector<int64_t>& shape, int elem = pb::TensorProto::FLOAT) {
  Builder b(13);
  b.input("x", {1}, elem);
  b.init_i("shape", shape);
  auto* n = b.node("ConstantOfShape", {"shape"}, {"big"});
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(pb::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(elem);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_int32_data(0);
  if (elem == pb::TensorProto::FLOAT) {
    a->mutable_t()->clear_int32_data();
    a->mutable_t()->add_float_data(0.f);
  }
  b.node("Add", {"x", "big"}, {"y"});
  b.output("y", elem);
  return b;
}

}  // namespace

TEST(ModelAbuse, DimsThatOverflowInt64) {
  {  // an initializer whose dims multiply past 2^63 (and that holds 4 bytes)
    Builder b = tiny();
    b.init_f("w", {1}, [](size_t) { return 1.f; });
    auto* w = b.g->mutable_initializer(0);
    w->clear_dims();
    for (int k = 0; k < 3; ++k) w->add_dims(int64_t{1} << 40);
    EXPECT_ERROR(load_and_run(b), kParse, "'w'", "impossible shape");
  }
  {  // a folded ConstantOfShape of 2^40 x 2^40 x 2^40
    EXPECT_ERROR(load_and_run(constant_of_shape({int64_t{1} << 40, int64_t{1} << 40, int64_t{1} << 40})),
                 kInvalidArgument, "overflows int64");
  }
  {  // a static graph input of 2^62 x 2^62
    Builder b(13);
    b.input("x", {int64_t{1} << 62, int64_t{1} << 62});
    b.node("Identity", {"x"}, {"y"});
    b.output("y");
    EXPECT_ERROR(load_and_run(b), kUnsupported, "graph input", "'x'", "2^31 - 1 elements");
  }
}

TEST(ModelAbuse, MemoryBudget) {
  // 1 GiB (2^28 float elements, below the element limit) against a 256 MiB budget: refused by name,
  // before the constant is folded (allocated)
  EXPECT_ERROR(load_and_run(constant_of_shape({1, 256, 1024, 1024}), uint64_t{256} << 20), kOutOfMemory,
               "ConstantOfShape", "'big'", "1073741824 bytes", "268435456", "--max-memory");
  // the same graph at 16 KiB fits the budget and runs
  EXPECT_FALSE(load_and_run(constant_of_shape({1, 4, 32, 32}), uint64_t{256} << 20).threw);
  // every value fits (512 KiB each) but the activation arena, input and output live together, does not
  Builder b(13);
  b.input("x", {1, 8, 128, 128});
  b.conv_silu("x", "y", 8, 8, 3, 1);
  b.output("y");
  EXPECT_FALSE(load_and_run(b).threw) << load_and_run(b).message;
  EXPECT_ERROR(load_and_run(b, 900 << 10), kOutOfMemory, "activation memory", "[1, 8, 128, 128]", "max_memory");
}

TEST(ModelAbuse, MemoryBudgetFromTheCommandLine) {
  Builder b(13);
  b.input("x", {1, 8, 128, 128});
  b.conv_silu("x", "y", 8, 8, 3, 1);
  b.output("y");
  const std::string dir = test::scratch_dir("model_abuse_cli");
  std::ofstream(dir + "/conv.onnx", std::ios::binary) << b.bytes();
  save_npy(dir + "/x.npy", Tensor(DType::kFloat32, {1, 8, 128, 128}));
  const std::string base = "infer --model " + test::quote(dir + "/conv.onnx") + " --input " + test::quote(dir + "/x.npy") +
                           " --output-dir " + test::quote(dir + "/out");
  std::string err;
  EXPECT_EQ(test::run_yolocu(base + " --max-memory 900K", nullptr, &err), 1) << err;
  EXPECT_NE(err.find("out of memory"), std::string::npos) << err;
  EXPECT_NE(err.find("memory budget of 921600 bytes"), std::string::npos) << err;
  EXPECT_EQ(test::run_yolocu(base + " --max-memory 64M", nullptr, &err), 0) << err;
  EXPECT_EQ(test::run_yolocu(base + " --max-memory 12Q", nullptr, &err), 2) << err;
  EXPECT_NE(err.find("not a byte count"), std::string::npos) << err;
  EXPECT_EQ(test::run_yolocu(base + " --max-memory 99999999999T", nullptr, &err), 2) << err;
}

TEST(ModelAbuse, TwoToThe31Elements) {
  // 2^31 bool elements (2 GiB): the element limit refuses it whatever the budget, before allocating
  EXPECT_ERROR(load_and_run(constant_of_shape({int64_t{1} << 31}, pb::TensorProto::BOOL), uint64_t{1} << 40),
               kUnsupported, "ConstantOfShape", "[2147483648]", "2^31 - 1 elements");
  // Expand to 2^16 x 2^16 floats (16 GiB): the same
  Builder b(13);
  b.input("x", {1, 1});
  b.init_i("shape", {65536, 65536});
  b.node("Expand", {"x", "shape"}, {"y"});
  b.output("y");
  EXPECT_ERROR(load_and_run(b, uint64_t{1} << 40), kUnsupported, "Expand", "4294967296", "2^31 - 1 elements");
}

TEST(ModelAbuse, NegativeAndZeroDims) {
  {
    Builder b = tiny();
    b.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_value(-8);
    EXPECT_ERROR(load_and_run(b), kParse, "'x'", "negative dimension");
  }
  {
    Builder b = tiny();
    b.init_f("w", {2}, [](size_t) { return 1.f; });
    b.g->mutable_initializer(0)->set_dims(0, -2);
    EXPECT_ERROR(load_and_run(b), kParse, "'w'", "negative dimension -2");
  }
  {  // a static zero dim: no tensor can be given for it
    Builder b = tiny();
    b.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_value(0);
    EXPECT_ERROR(load_and_run(b), kInvalidArgument, "'x'", "dimension 2 is 0");
  }
  {  // Reshape to a negative target other than -1
    Builder b(13);
    b.input("x", {1, 4, 8, 8});
    b.init_i("shape", {-2, 128});
    b.node("Reshape", {"x", "shape"}, {"y"});
    b.output("y");
    EXPECT_ERROR(load_and_run(b), kInvalidArgument, "Reshape", "invalid target dimension -2");
  }
  {  // an empty intermediate (Slice to zero rows) feeding a convolution: an error or an empty result,
     // never a crash
    Builder b(13);
    b.input("x", {1, 4, 8, 8});
    b.init_i("st", {3});
    b.init_i("en", {3});
    b.init_i("ax", {2});
    b.node("Slice", {"x", "st", "en", "ax"}, {"empty"});
    b.conv_silu("empty", "y", 4, 4, 1, 1);
    b.output("y");
    const Outcome o = load_and_run(b);
    if (o.threw) {
      EXPECT_FALSE(o.message.empty());
    }
  }
}

TEST(ModelAbuse, CyclesAndDanglingInputs) {
  {  // a node that reads its own output
    Builder b(13);
    b.input("x", {1, 4});
    b.node("Add", {"x", "y"}, {"y"});
    b.output("y");
    EXPECT_ERROR(load_and_run(b), kParse, "cycle");
  }
  {  // two nodes that read each other
    Builder b(13);
    b.input("x", {1, 4});
    b.node("Add", {"x", "b"}, {"a"});
    b.node("Mul", {"a", "x"}, {"b"});
    b.output("b");
    EXPECT_ERROR(load_and_run(b), kParse, "cycle");
  }
  {
    Builder b(13);
    b.input("x", {1, 4});
    b.node("Add", {"x", "nowhere"}, {"y"});
    b.output("y");
    EXPECT_ERROR(load_and_run(b), kParse, "'nowhere'", "no node, input or initializer provides");
  }
  {
    Builder b = tiny();
    b.output("not_computed");
    EXPECT_ERROR(load_and_run(b), kParse, "'not_computed'", "not produced");
  }
  {  // a value produced twice
    Builder b = tiny();
    b.node("Identity", {"x"}, {"y"});
    EXPECT_ERROR(load_and_run(b), kParse, "'y'", "produced twice");
  }
}

TEST(ModelAbuse, InitializerBytesDisagreeWithShape) {
  {
    Builder b = tiny();
    b.init_f("w", {3}, [](size_t) { return 1.f; });
    b.g->mutable_initializer(0)->mutable_raw_data()->resize(10);
    EXPECT_ERROR(load_and_run(b), kParse, "'w'", "10 bytes of raw_data, expected 12");
  }
  {
    Builder b = tiny();
    auto* t = b.g->add_initializer();
    t->set_name("v");
    t->set_data_type(pb::TensorProto::FLOAT);
    t->add_dims(3);
    t->add_float_data(1.f);
    t->add_float_data(2.f);
    EXPECT_ERROR(load_and_run(b), kParse, "'v'", "holds 2 values, expected 3");
  }
  {  // int64 raw data that is not a whole number of elements
    Builder b = tiny();
    b.init_i("i", {1, 2});
    b.g->mutable_initializer(0)->mutable_raw_data()->resize(15);
    EXPECT_ERROR(load_and_run(b), kParse, "'i'", "15 bytes");
  }
}

TEST(ModelAbuse, ReshapeSliceResizeParametersAtTheInt64Edges) {
  {  // Reshape whose target product overflows
    Builder b(13);
    b.input("x", {1, 4, 8, 8});
    b.init_i("shape", {kI64Max, 2});
    b.node("Reshape", {"x", "shape"}, {"y"});
    b.output("y");
    EXPECT_ERROR(load_and_run(b), kInvalidArgument, "Reshape", "overflows int64");
  }
  {  // Slice with starts/ends/steps at INT64_MIN / INT64_MAX: a valid (one-element) slice, no UB
    Builder b(13);
    b.input("x", {1, 4, 8, 8});
    b.init_i("st", {kI64Max, kI64Min});
    b.init_i("en", {kI64Min, kI64Max});
    b.init_i("ax", {2, 3});
    b.init_i("sp", {kI64Min, kI64Max});
    b.node("Slice", {"x", "st", "en", "ax", "sp"}, {"y"});
    b.output("y");
    EXPECT_FALSE(load_and_run(b).threw) << load_and_run(b).message;
    const std::string bytes = b.bytes();
    const Model m = parse_onnx(bytes.data(), bytes.size());
    const engine::Plan plan = engine::build_plan(m, {{1, 4, 8, 8}});
    EXPECT_EQ(plan.values[static_cast<size_t>(plan.outputs[0])].shape, (Shape{1, 4, 1, 1}));
  }
  {  // Slice with step 0
    Builder b(13);
    b.input("x", {1, 4, 8, 8});
    b.init_i("st", {0});
    b.init_i("en", {4});
    b.init_i("ax", {2});
    b.init_i("sp", {0});
    b.node("Slice", {"x", "st", "en", "ax", "sp"}, {"y"});
    b.output("y");
    EXPECT_ERROR(load_and_run(b), kInvalidArgument, "Slice", "step 0");
  }
  for (float scale : {1e30f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -2.f}) {
    SCOPED_TRACE(scale);
    Builder b(13);
    b.input("x", {1, 4, 8, 8});
    b.init_f("scales", {4}, [scale](size_t i) { return i < 3 ? 1.f : scale; });
    auto* rs = b.node("Resize", {"x", "", "scales"}, {"y"});
    Builder::s(rs, "mode", "nearest");
    b.output("y");
    EXPECT_ERROR(load_and_run(b), kInvalidArgument, "Resize", "scale");
  }
  {  // Resize sizes beyond the element limit
    Builder b(13);
    b.input("x", {1, 4, 8, 8});
    b.init_i("sizes", {1, 4, int64_t{1} << 20, int64_t{1} << 20});
    b.node("Resize", {"x", "", "", "sizes"}, {"y"});
    b.output("y");
    EXPECT_ERROR(load_and_run(b), kUnsupported, "Resize", "2^31 - 1 elements");
  }
  {  // Range whose element count is not representable
    Builder b(13);
    b.input("x", {1});
    b.init_f("start", {}, [](size_t) { return 0.f; });
    b.init_f("limit", {}, [](size_t) { return 1e30f; });
    b.init_f("delta", {}, [](size_t) { return 1e-30f; });
    b.node("Range", {"start", "limit", "delta"}, {"r"});
    b.node("Add", {"x", "r"}, {"y"});
    b.output("y");
    EXPECT_ERROR(load_and_run(b), kInvalidArgument, "Range", "elements");
  }
  {  // Range whose inputs disagree on their type: an int64 start and limit, a float delta (the
     // fold read delta as int64, past its 4-byte buffer: found by the onnx fuzzer)
    Builder b(13);
    b.input("x", {1});
    b.init_i("start", {0}, /*scalar=*/true);
    b.init_i("limit", {4}, /*scalar=*/true);
    b.init_f("delta", {}, [](size_t) { return 1.f; });
    b.node("Range", {"start", "limit", "delta"}, {"r"});
    b.node("Shape", {"r"}, {"y"});
    b.output("y", pb::TensorProto::INT64);
    EXPECT_ERROR(load_and_run(b), kInvalidArgument, "Range", "one type", "int64", "float32");
  }
}

TEST(ModelAbuse, UnsupportedOpsDomainsAndOpsetsAreNamed) {
  {
    Builder b = tiny(13);
    b.g->mutable_node(0)->set_op_type("FancyAttention");
    b.g->mutable_node(0)->set_name("attn_7");
    EXPECT_ERROR(load_and_run(b), kUnsupported, "FancyAttention", "attn_7", "opset 13");
  }
  {
    Builder b = tiny(13);
    b.g->mutable_node(0)->set_domain("com.microsoft");
    EXPECT_ERROR(load_and_run(b), kUnsupported, "com.microsoft", "Identity");
  }
  for (int opset : {5, 99}) {
    Builder b = tiny(opset);
    const std::string named = "opset " + std::to_string(opset);  // outlives the macro's list
    EXPECT_ERROR(load_and_run(b), kUnsupported, named.c_str(), "7-18");
  }
}

TEST(ModelAbuse, ExternalDataOutsideTheModelFolderIsNeverRead) {
  // yolocu loads no external data at all: every reference, a path traversal included, is refused
  // by name before any file is opened.
  for (const char* location : {"../../../../etc/passwd", "/etc/shadow", "weights.bin"}) {
    SCOPED_TRACE(location);
    Builder b = tiny();
    b.init_f("w", {2}, [](size_t) { return 1.f; });
    auto* t = b.g->mutable_initializer(0);
    t->clear_raw_data();
    t->set_data_location(pb::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    EXPECT_ERROR(load_and_run(b), kUnsupported, "'w'", "external data");
  }
  {  // external_data entries without the EXTERNAL flag are refused the same way
    Builder b = tiny();
    b.init_f("w", {2}, [](size_t) { return 1.f; });
    auto* kv = b.g->mutable_initializer(0)->add_external_data();
    kv->set_key("location");
    kv->set_value("../secret");
    EXPECT_ERROR(load_and_run(b), kUnsupported, "'w'", "external data");
  }
}

// LoadOptions caps, checked on the wire before parsing: 400,000 Relu nodes in a few MB are refused
// at once (they used to take ~850 MB and over a minute), and the memory budget covers the parse.
TEST(ModelAbuse, NodeAndInitializerCountsCappedBeforeParsing) {
  Builder b(13);
  b.input("x", {1, 1});
  b.output("y");
  std::string prev = "x";
  for (int i = 0; i < 400000; ++i) {
    const std::string out = i + 1 == 400000 ? "y" : "r" + std::to_string(i);
    b.node("Relu", {prev}, {out});
    prev = out;
  }
  const std::string bytes = b.bytes();
  std::string message;
  EXPECT_EQ(test::code_of([&] { parse_onnx(bytes.data(), bytes.size(), "relus.onnx"); }, &message),
            ErrorCode::kUnsupported);
  EXPECT_NE(message.find("relus.onnx: the graph has 400000 nodes"), std::string::npos) << message;
  EXPECT_NE(message.find("max_nodes 100000"), std::string::npos) << message;

  Builder inits(13);
  inits.input("x", {1});
  inits.output("y");
  inits.node("Relu", {"x"}, {"y"});
  for (int i = 0; i < 20; ++i) inits.init_i("c" + std::to_string(i), {1});
  const std::string ib = inits.bytes();
  LoadOptions few;
  few.max_initializers = 19;
  EXPECT_EQ(test::code_of([&] { parse_onnx(ib.data(), ib.size(), "inits.onnx", few); }, &message),
            ErrorCode::kUnsupported);
  EXPECT_NE(message.find("20 initializers"), std::string::npos) << message;
  few.max_initializers = 20;
  EXPECT_NO_THROW(parse_onnx(ib.data(), ib.size(), "inits.onnx", few));
}

TEST(ModelAbuse, MemoryBudgetCoversParsing) {
  Builder b(13);
  b.input("x", {1, 1});
  b.output("y");
  std::string prev = "x";
  for (int i = 0; i < 5000; ++i) {
    const std::string out = i + 1 == 5000 ? "y" : "r" + std::to_string(i);
    b.node("Relu", {prev}, {out});
    prev = out;
  }
  const std::string bytes = b.bytes();
  LoadOptions o;
  o.max_memory = 1 << 20;  // 5,000 nodes x 2 KiB > 1 MiB
  std::string message;
  EXPECT_EQ(test::code_of([&] { parse_onnx(bytes.data(), bytes.size(), "chain.onnx", o); }, &message),
            ErrorCode::kOutOfMemory);
  EXPECT_NE(message.find("chain.onnx: loading the model"), std::string::npos) << message;
  EXPECT_NE(message.find("max_memory 1048576"), std::string::npos) << message;
  o.max_memory = 64 << 20;
  EXPECT_NO_THROW(parse_onnx(bytes.data(), bytes.size(), "chain.onnx", o));
}


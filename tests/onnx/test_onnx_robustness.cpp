// Bad models: every one gives a clear yolocu::Error naming the problem, never a crash. This binary
// also runs under AddressSanitizer + UBSan (ctest label "asan", see scripts/test.sh).
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/file_util.hpp"
#include "test_util.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"
#include "yolocu/onnx.pb.h"

using namespace yolocu;

namespace {

// Returns the error thrown by f (fails the test if none or another exception type escapes).
template <typename F>
Error expect_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-yolocu exception: " << e.what();
    return Error(ErrorCode::kInternal, e.what());
  }
  ADD_FAILURE() << "no error thrown";
  return Error(ErrorCode::kInternal, "none");
}

bool contains(const Error& e, const std::string& s) { return std::string(e.what()).find(s) != std::string::npos; }

}  // namespace

TEST(OnnxRobustness, TruncatedEverySixteenth) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  const std::string bytes = detail::read_file(path);
  for (int k = 0; k < 16; ++k) {
    const size_t n = bytes.size() * static_cast<size_t>(k) / 16;
    SCOPED_TRACE("truncated at " + std::to_string(n) + " of " + std::to_string(bytes.size()));
    // A prefix may happen to parse (field boundary), then the graph checks must catch it; it must
    // never crash, and it must never run.
    try {
      Model m = parse_onnx(bytes.data(), n, "truncated");
      auto mp = std::make_shared<Model>(std::move(m));
      CpuEngine engine(mp);
      engine.prepare({{1, 3, 640, 640}});
      ADD_FAILURE() << "a truncated model was accepted and prepared";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::kParse || e.code() == ErrorCode::kInvalidArgument ||
                  e.code() == ErrorCode::kUnsupported)
          << e.what();
      EXPECT_GT(std::string(e.what()).size(), 10u);
    }
  }
}

TEST(OnnxRobustness, RandomBytesAndEmpty) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 64; ++trial) {
    std::string junk(1 + rng() % 5000, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    try {
      Model m = parse_onnx(junk.data(), junk.size(), "junk");
      CpuEngine engine(std::make_shared<Model>(std::move(m)));
      engine.prepare({{1, 3, 64, 64}});
      ADD_FAILURE() << "random bytes accepted";
    } catch (const Error&) {
    }
  }
  const Error e = expect_error([] { parse_onnx("", 0, "empty.onnx"); });
  EXPECT_TRUE(contains(e, "empty")) << e.what();
  const std::string dir = test::scratch_dir("onnx_bad");
  std::ofstream(dir + "/empty.onnx").close();
  EXPECT_EQ(expect_error([&] { load_onnx(dir + "/empty.onnx"); }).code(), ErrorCode::kParse);
  std::ofstream(dir + "/text.onnx") << "this is not a model\n";
  EXPECT_EQ(expect_error([&] { load_onnx(dir + "/text.onnx"); }).code(), ErrorCode::kParse);
  const Error missing = expect_error([&] { load_onnx(dir + "/missing.onnx"); });
  EXPECT_EQ(missing.code(), ErrorCode::kIo);
  EXPECT_TRUE(contains(missing, "missing.onnx")) << missing.what();
}

class EditedModel : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::data_file("models/yolov5n.onnx");
    if (path_.empty()) GTEST_SKIP() << "test material not found: models/yolov5n.onnx";
    const std::string bytes = detail::read_file(path_);
    ASSERT_TRUE(proto_.ParseFromString(bytes));
  }
  Model reparse() {
    const std::string out = proto_.SerializeAsString();
    return parse_onnx(out.data(), out.size(), "edited.onnx");
  }
  std::string path_;
  yolocu_onnx::ModelProto proto_;
};

TEST_F(EditedModel, UnknownOpNamesOpNodeAndOpset) {
  auto* node = proto_.mutable_graph()->mutable_node(5);
  node->set_op_type("FancyAttention");
  const std::string node_name = node->name();
  auto m = std::make_shared<Model>(reparse());  // loading succeeds (inspect can show it) ...
  CpuEngine engine(m);
  const Error e = expect_error([&] { engine.prepare({{1, 3, 640, 640}}); });  // ... running does not
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(contains(e, "FancyAttention")) << e.what();
  EXPECT_TRUE(contains(e, node_name)) << e.what();
  EXPECT_TRUE(contains(e, "opset 12")) << e.what();
}

TEST_F(EditedModel, WrongInputRankAndShape) {
  CpuEngine engine(std::make_shared<Model>(reparse()));
  Error e = expect_error([&] { engine.run({Tensor(DType::kFloat32, {3, 640, 640})}); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(e, "rank")) << e.what();
  EXPECT_TRUE(contains(e, "images")) << e.what();
  e = expect_error([&] { engine.run({Tensor(DType::kFloat32, {1, 3, 320, 320})}); });
  EXPECT_TRUE(contains(e, "640")) << e.what();
  e = expect_error([&] { engine.run({Tensor(DType::kFloat16, {1, 3, 640, 640})}); });
  EXPECT_TRUE(contains(e, "float32")) << e.what();
  e = expect_error([&] { engine.run({}); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
}

TEST_F(EditedModel, InconsistentWeightsAreRejectedBeforeAllocating) {
  // An initializer that claims 1e12 elements but carries a few bytes.
  auto* init = proto_.mutable_graph()->mutable_initializer(0);
  init->clear_dims();
  init->add_dims(1000000);
  init->add_dims(1000000);
  const Error e = expect_error([&] { reparse(); });
  EXPECT_EQ(e.code(), ErrorCode::kParse);
  EXPECT_TRUE(contains(e, init->name())) << e.what();
}

TEST_F(EditedModel, ExternalDataIsRejectedClearly) {
  auto* init = proto_.mutable_graph()->mutable_initializer(0);
  init->set_data_location(yolocu_onnx::TensorProto::EXTERNAL);
  auto* kv = init->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  const Error e = expect_error([&] { reparse(); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(contains(e, "external data")) << e.what();
}

TEST_F(EditedModel, DanglingInputAndCycle) {
  proto_.mutable_graph()->mutable_node(3)->set_input(0, "no_such_value");
  Error e = expect_error([&] { reparse(); });
  EXPECT_TRUE(contains(e, "no_such_value")) << e.what();
  SetUp();
  // Make node 2 read the output of node 3 and node 3 read node 2's: a cycle.
  auto* g = proto_.mutable_graph();
  const std::string out2 = g->node(2).output(0), out3 = g->node(3).output(0);
  g->mutable_node(2)->set_input(0, out3);
  g->mutable_node(3)->set_input(0, out2);
  e = expect_error([&] { reparse(); });
  EXPECT_EQ(e.code(), ErrorCode::kParse);
}

TEST_F(EditedModel, UnsupportedOpsetIsNamed) {
  for (auto& op : *proto_.mutable_opset_import())
    if (op.domain().empty()) op.set_version(21);
  CpuEngine engine(std::make_shared<Model>(reparse()));
  const Error e = expect_error([&] { engine.prepare({{1, 3, 640, 640}}); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(contains(e, "opset 21")) << e.what();
}

// An already quantised export (QDQ format, as a QAT flow or ONNX Runtime's quantize_static writes
// it) on the CPU engine: yolov5n quantised by tests/python/make_qdq_model.py at test time (int8
// activations, per-channel int8 weights, int32 biases; 648 Q / DQ nodes), its raw output against
// ONNX Runtime running the same QDQ graph with its optimisations off. The weights' DequantizeLinear
// folds into float weights when the engine is built; each activation's Q / DQ pair runs as written.
// The two cannot agree bit for bit: the convolutions sum in another order than ONNX Runtime's, and a
// value within that rounding of a QuantizeLinear boundary lands one quantisation step away
// (measured: 14 of the first convolution's 1.6 M outputs); a step moves the next layer's sums by a
// fraction of a step, which crosses a boundary often enough that the differences spread layer by
// layer until the two executions differ by about the quantisation noise itself (measured on a coco128
// image: 1.0e-2 relative L2 against ONNX Runtime, whose QDQ output is 1.7e-2 from the float model's).
// Bound: no more than what quantisation changes (ONNX Runtime's QDQ output against the float
// model's) and 3e-2; a wrong scale, axis, zero point or rounding rule breaks it by far. The ops
// themselves agree with ONNX Runtime exactly, and a Q / DQ convolution within 1e-5 (test_ops' cases).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "test_util.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

TEST(QdqModel, Yolov5nQuantisedByOnnxRuntimeMatchesIt) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(images, "coco128/images/train2017");
  if (test::python().empty()) GTEST_SKIP() << "no .venv python with onnx/onnxruntime (run scripts/setup.sh)";
  const std::string dir = test::scratch_dir("qdq_yolov5n");
  std::string log;
  ASSERT_EQ(test::run_command(test::python() + " " + test::source_dir() + "/tests/python/make_qdq_model.py " + model +
                                  " " + images + " " + dir + " 4 2>&1",
                              &log),
            0)
      << log;
  CpuEngine engine(std::make_shared<const Model>(load_onnx(dir + "/model_qdq.onnx")));
  const std::vector<Tensor> out = engine.run({load_npy(dir + "/input.npy")});
  const Tensor ref = load_npy(dir + "/output.npy");
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].shape(), ref.shape());
  const test::Diff d = test::compare(out[0], ref);
  const test::Diff q = test::compare(ref, load_npy(dir + "/output_float.npy"));
  std::printf("[ qdq ] yolov5n QDQ against ONNX Runtime's: rel L2 %.3g, max abs %.3g; ONNX Runtime's QDQ against the "
              "float model: rel L2 %.3g\n", d.rel_l2, d.max_abs, q.rel_l2);
  EXPECT_LE(d.rel_l2, q.rel_l2);
  EXPECT_LE(d.rel_l2, 3e-2);
}

// Symmetric QDQ exports (zero points 0, as QAT flows write them) imported as the float model and
// the calibration their Q / DQ nodes carry (import_qdq_int8). Quantised by ONNX Runtime at test time
// in yolocu's scheme (only the convolutions: their inputs and weights): every convolution becomes
// INT8 at its Q node's scale, and simulated INT8 with the imported calibration runs the QDQ graph's
// quantisation, so it is nearer ONNX Runtime's run of that graph than the float model is (the two
// cannot agree bit for bit: Yolov5nQuantisedByOnnxRuntimeMatchesIt says why). Quantised with every
// op's inputs (pairs in front of Sigmoid, Mul, Add, Concat, ... and the graph output): they are
// dropped and counted, the graph output keeps its name. ONNX Runtime's default export (zero points)
// is refused, naming them.
std::string make_qdq(const std::string& model, const std::string& images, const std::string& tag, const std::string& args) {
  const std::string dir = test::scratch_dir(tag);
  std::string log;
  const int rc = test::run_command(test::python() + " " + test::source_dir() + "/tests/python/make_qdq_model.py " + model +
                                       " " + images + " " + dir + " " + args + " 2>&1",
                                   &log);
  EXPECT_EQ(rc, 0) << log;
  return rc == 0 ? dir : std::string();
}

TEST(QdqModel, SymmetricExportsImportAsFloatModelAndCalibration) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(images, "coco128/images/train2017");
  if (test::python().empty()) GTEST_SKIP() << "no .venv python with onnx/onnxruntime (run scripts/setup.sh)";
  const std::string dir = make_qdq(model, images, "qdq_yolov5n_conv", "4 symmetric-conv");
  ASSERT_FALSE(dir.empty());
  const Model qdq = load_onnx(dir + "/model_qdq.onnx");
  ASSERT_TRUE(has_qdq_nodes(qdq));
  const QdqImport imp = import_qdq_int8(qdq);
  EXPECT_FALSE(has_qdq_nodes(*imp.model));
  EXPECT_EQ(imp.dropped_pairs, 0);
  const Int8Calibration& c = imp.calibration;
  EXPECT_TRUE(c.from_qdq);
  std::map<std::string, float> q_scale;  // each Q node's input tensor -> its scale
  for (const Node& n : qdq.graph.nodes)
    if (n.op_type == "QuantizeLinear") q_scale[n.inputs[0]] = qdq.graph.initializers.at(n.inputs[1]).data_as<float>()[0];
  for (const Int8ConvScales& k : c.convs) {
    EXPECT_FALSE(k.keep_float) << k.node;
    ASSERT_TRUE(q_scale.count(k.input)) << k.node;
    EXPECT_EQ(c.tensor(k.input)->scale, q_scale.at(k.input)) << k.node;
  }
  CpuEngineOptions so;
  so.int8 = std::make_shared<const Int8Calibration>(c);
  CpuEngine sim(imp.model, so);
  const Tensor ref = load_npy(dir + "/output.npy");
  const double d = test::compare(sim.run({load_npy(dir + "/input.npy")})[0], ref).rel_l2;
  const double f = test::compare(load_npy(dir + "/output_float.npy"), ref).rel_l2;
  std::printf("[ qdq ] simulated INT8 with the imported scales against ONNX Runtime's QDQ run: rel L2 %.3g; the float "
              "model against it: %.3g\n", d, f);
  EXPECT_LT(d, f);

  const std::string all = make_qdq(model, images, "qdq_yolov5n_all", "2 symmetric");
  ASSERT_FALSE(all.empty());
  const Model qdq_all = load_onnx(all + "/model_qdq.onnx");
  const QdqImport imp_all = import_qdq_int8(qdq_all);
  EXPECT_GT(imp_all.dropped_pairs, 0);
  EXPECT_EQ(imp_all.model->graph.outputs[0].name, qdq_all.graph.outputs[0].name);
  EXPECT_EQ(imp_all.calibration.float_convs(), 0);
  CpuEngine run_all(imp_all.model);  // the float model runs
  EXPECT_EQ(run_all.run({load_npy(all + "/input.npy")})[0].shape(), load_npy(all + "/output.npy").shape());

  const std::string asym = make_qdq(model, images, "qdq_yolov5n_zero_points", "2");
  ASSERT_FALSE(asym.empty());
  std::string msg;
  EXPECT_EQ(test::code_of([&] { import_qdq_int8(load_onnx(asym + "/model_qdq.onnx")); }, &msg), ErrorCode::kUnsupported);
  EXPECT_NE(msg.find("zero point"), std::string::npos) << msg;
}

}  // namespace
}  // namespace yolocu

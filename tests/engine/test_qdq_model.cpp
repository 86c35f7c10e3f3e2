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
#include <memory>
#include <string>

#include "test_util.hpp"
#include "yolocu/engine.hpp"
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

}  // namespace
}  // namespace yolocu

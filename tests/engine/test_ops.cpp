// Every op YOLOv5, YOLOv8 and YOLO11 exports use, at every opset 11-18, as a single-op model: the CPU engine against
// ONNX Runtime (the cases and the oracle outputs are generated at test time by
// tests/python/make_op_cases.py).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/engine_test_util.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

TEST(Ops, EveryOpEveryOpsetAgainstOnnxRuntime) {
  YOLOCU_REQUIRE_OP_CASES(dir, "opcases", "");
  std::ifstream manifest(dir + "/manifest.txt");
  std::string line;
  int cases = 0;
  std::map<int, int> per_opset;
  while (std::getline(manifest, line)) {
    std::istringstream is(line);
    std::string name;
    int n_in = 0, n_out = 0;
    is >> name >> n_in >> n_out;
    SCOPED_TRACE(name);
    const std::string d = dir + "/" + name;
    try {
      auto model = std::make_shared<Model>(load_onnx(d + "/model.onnx"));
      std::vector<Tensor> inputs;
      for (int i = 0; i < n_in; ++i) inputs.push_back(load_npy(d + "/in" + std::to_string(i) + ".npy"));
      CpuEngine engine(model);
      const auto outs = engine.run(inputs);
      ASSERT_EQ(static_cast<int>(outs.size()), n_out);
      // The fusion-pattern graphs: the engine must fuse exactly what the pattern allows (a wrong
      // fusion shows as a mismatch against ONNX Runtime below; a missed one only here).
      static const std::map<std::string, int> kFused = {
          {"FuseResidual16", 5},       {"FuseResidual8", 5},      // 2 x (Sigmoid, Mul) + the Add
          {"FuseResidualLate16", 5},   {"FuseResidualLate8", 5},  // the later plain Conv takes the Add
          {"FuseResidualShared16", 2}, {"FuseResidualShared8", 2}, {"FuseResidualMixed", 5},
          {"FuseConcat", 5},           {"FuseConcatRepeated", 4}, {"FuseConcatOutput", 4},  // 2 SiLU pairs (+ the
          {"FuseConcatBatch2", 4},     {"FuseConcatNested", 6},                             // in-place Concats)
          {"FuseDetectHead", 24}};  // 2 levels x 12 tail nodes + the merging Concat - 1 step
      const auto fused = kFused.find(name.substr(0, name.rfind("_op")));
      if (fused != kFused.end()) {
        EXPECT_EQ(engine.stats().fused_nodes, fused->second) << "fused nodes";
      }
      for (int i = 0; i < n_out; ++i) {
        const Tensor ref = load_npy(d + "/out" + std::to_string(i) + ".npy");
        ASSERT_EQ(outs[static_cast<size_t>(i)].dtype(), ref.dtype()) << "output " << i;
        ASSERT_EQ(outs[static_cast<size_t>(i)].shape(), ref.shape()) << "output " << i;
        if (ref.dtype() == DType::kFloat32 || ref.dtype() == DType::kFloat16) {
          // Convolutions accumulate in a different order: 1e-5 relative; everything else exact.
          EXPECT_TRUE(test::close_to(outs[static_cast<size_t>(i)], ref, 1e-5, 1e-5, 1e-5)) << "output " << i;
        } else {
          EXPECT_EQ(std::memcmp(outs[static_cast<size_t>(i)].data(), ref.data(), ref.nbytes()), 0) << "output " << i;
        }
      }
    } catch (const Error& e) {
      ADD_FAILURE() << "yolocu::Error: " << e.what();
    }
    ++cases;
    per_opset[std::stoi(name.substr(name.rfind("_op") + 3))]++;
  }
  EXPECT_GE(cases, 385);
  for (int opset = 11; opset <= 18; ++opset) EXPECT_GE(per_opset[opset], 55) << "opset " << opset;
}

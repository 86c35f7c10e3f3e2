// One fusion of the GPU engine against the CPU engine's node-by-node graph, the harness of the
// fused-step GPU tests (test_cuda_v8_tail.cpp, test_cuda_attention.cpp): the engine without the
// fusion (FP32), then with it in FP32 and FP16, each output against the CPU engine's (FP32 rel L2
// <= 1e-5, FP16 <= 5e-3); the fused FP32 engine must launch fewer kernels per run.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"

namespace yolocu::test {

struct Fusion {
  std::string label;                                      // the printed rows' prefix, e.g. "[ attention ]"
  std::function<void(CudaEngineOptions&, bool)> enable;  // switches the fusion on or off
  std::function<void(const CudaEngineStats&, bool, const std::string&)> check_stats;  // (stats, fused, tag)
};

inline CudaEngineOptions fusion_options(const Fusion& f, Precision p, int max_batch, bool fuse) {
  CudaEngineOptions o;
  o.precision = p;
  o.max_batch = max_batch;
  o.tactic_cache = "none";
  f.enable(o, fuse);
  return o;
}

inline void expect_close(const Fusion& f, const Tensor& got, const Tensor& ref, double bound, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  const Diff d = compare(got, ref);
  std::printf("%s %-48s rel L2 %.3g  max abs %.3g (bound %.0e)\n", f.label.c_str(), what.c_str(), d.rel_l2, d.max_abs,
              bound);
  EXPECT_LE(d.rel_l2, bound) << what << ": max abs " << d.max_abs;
}

// `inputs` (each of batch <= max_batch) through the unfused FP32 engine and the fused FP32 / FP16
// engines, against the CPU engine.
inline void fused_vs_cpu(const Fusion& f, const std::shared_ptr<const Model>& model, const std::vector<Tensor>& inputs,
                         int max_batch, const std::string& tag) {
  CpuEngine cpu(model);
  std::vector<Tensor> refs;
  for (const Tensor& x : inputs) refs.push_back(cpu.run({x})[0]);
  const auto batch = [](const Tensor& x) { return " b" + std::to_string(x.dim(0)); };
  // the inputs' size (a dynamic export's engine is built for one height and width; 640 if unnamed)
  const auto options = [&](Precision p, bool fuse) {
    CudaEngineOptions o = fusion_options(f, p, max_batch, fuse);
    o.height = static_cast<int>(inputs.at(0).dim(2));
    o.width = static_cast<int>(inputs.at(0).dim(3));
    return o;
  };
  CudaEngine plain(model, options(Precision::kFloat32, false));
  f.check_stats(plain.stats(), false, tag);
  for (size_t i = 0; i < inputs.size(); ++i)
    expect_close(f, plain.run_host({inputs[i]})[0], refs[i], 1e-5, tag + " fp32" + batch(inputs[i]) + " unfused vs CPU");
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    const bool fp32 = p == Precision::kFloat32;
    CudaEngine fused(model, options(p, true));
    const std::string t = tag + (fp32 ? " fp32" : " fp16");
    f.check_stats(fused.stats(), true, t);
    if (fp32) {
      EXPECT_LT(fused.stats().kernels_per_run, plain.stats().kernels_per_run) << t;
      std::printf("%s %-48s kernels per run %d fused, %d unfused\n", f.label.c_str(), t.c_str(),
                  fused.stats().kernels_per_run, plain.stats().kernels_per_run);
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      expect_close(f, fused.run_host({inputs[i]})[0], refs[i], fp32 ? 1e-5 : 5e-3, t + batch(inputs[i]) + " fused vs CPU");
  }
}

}  // namespace yolocu::test

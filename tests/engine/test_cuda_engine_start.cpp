// The fast start of many batch sizes (CudaEngineOptions::derive_without_compiling, what
// DetectorOptions::fast_start turns on): only max_batch tuned, the padded anchor sizes derived from
// the tuning sweep's candidates that compile nothing at runtime. Outputs against the CPU engine (the
// oracle of the GPU engine tests, itself held to ultralytics' outputs by test_models) on bus.jpg and
// zidane.jpg: FP32 rel L2 <= 1e-5, FP16 <= 5e-3 (the GPU engine's bounds); no runtime compilation
// for any derived size; the same from the tactic cache file in a "new process"; and from a file
// where a start without the option kept the derived sizes' own plans, those restored instead.
// Label "gpu": the engine tests skip visibly without a CUDA device (the options' mapping needs none).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/tactics/tuner.hpp"
#include "pipeline/cuda_engine_options.hpp"
#include "test_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

// Item i of a batch tensor, as a batch of one.
Tensor item(const Tensor& t, int64_t i) {
  Shape s = t.shape();
  s[0] = 1;
  Tensor one(t.dtype(), s);
  std::memcpy(one.data(), static_cast<const uint8_t*>(t.data()) + static_cast<size_t>(i) * one.nbytes(), one.nbytes());
  return one;
}

std::vector<Tensor> cpu_run(const std::shared_ptr<const Model>& m, const Tensor& x) {
  CpuEngine cpu(m);
  return cpu.run({x});
}

Tensor concat(const std::vector<Tensor>& items) {
  Shape s = items[0].shape();
  s[0] = static_cast<int64_t>(items.size());
  Tensor t(items[0].dtype(), s);
  for (size_t i = 0; i < items.size(); ++i)
    std::memcpy(static_cast<uint8_t*>(t.data()) + i * items[0].nbytes(), items[i].data(), items[0].nbytes());
  return t;
}

// Each batch of `batches` (true: bus, false: zidane) through `e`, every row against its reference.
void expect_rows(CudaEngine& e, const std::vector<std::vector<bool>>& batches, const Tensor& bus, const Tensor& zid,
                 const Tensor& ref_bus, const Tensor& ref_zid, double bound, const std::string& what) {
  for (const std::vector<bool>& is_bus : batches) {
    std::vector<Tensor> in, ref;
    for (bool b : is_bus) {
      in.push_back(b ? bus : zid);
      ref.push_back(b ? ref_bus : ref_zid);
    }
    const std::vector<Tensor> out = e.run_host({concat(in)});
    ASSERT_EQ(out.size(), 1u);
    for (size_t i = 0; i < is_bus.size(); ++i) {
      const test::Diff d = test::compare(item(out[0], static_cast<int64_t>(i)), ref[i]);
      std::printf("[ fast start ] %s, batch %zu item %zu: rel L2 %.3g, max |diff| %.3g (bound %.0e)\n", what.c_str(),
                  is_bus.size(), i, d.rel_l2, d.max_abs, bound);
      EXPECT_LE(d.rel_l2, bound) << what << ", batch " << is_bus.size() << " item " << i;
    }
  }
}

CudaEngineOptions start_options(Precision p, const std::string& cache) {
  CudaEngineOptions o;
  o.precision = p;
  o.max_batch = 8;
  o.tune_batches = {8};
  o.pad_batches = true;
  o.max_graph_plans = 4;
  o.derive_without_compiling = true;
  o.tactic_cache = cache;
  o.print_warnings = false;
  return o;
}

// DetectorOptions::fast_start as the GPU detector's engines get it (no GPU needed).
TEST(CudaEngineStart, FastStartOptions) {
  DetectorOptions d;
  d.max_batch = 32;
  CudaEngineOptions e = detail::cuda_engine_options(d);
  EXPECT_FALSE(e.pad_batches);
  EXPECT_FALSE(e.derive_without_compiling);
  EXPECT_TRUE(e.tune_batches.empty());
  EXPECT_EQ(e.max_graph_plans, CudaEngineOptions{}.max_graph_plans);
  d.fast_start = true;
  e = detail::cuda_engine_options(d);
  EXPECT_TRUE(e.pad_batches);
  EXPECT_TRUE(e.derive_without_compiling);
  EXPECT_EQ(e.tune_batches, (std::vector<int>{32}));
  EXPECT_EQ(e.max_graph_plans, 4);
  d.tune_batches = {8, 32};  // the user's tuned sizes stay
  EXPECT_EQ(detail::cuda_engine_options(d).tune_batches, (std::vector<int>{8, 32}));
}

TEST(CudaEngineStart, DerivedSizesCompileNothingAndMatchTheCpuEngine) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  YOLOCU_REQUIRE_DATA(bus_path, "reference/bus.npz");
  YOLOCU_REQUIRE_DATA(zid_path, "reference/zidane.npz");
  const auto m = std::make_shared<const Model>(load_onnx(path));
  const Tensor bus = load_npz(bus_path)["input"], zid = load_npz(zid_path)["input"];
  const Tensor ref_bus = cpu_run(m, bus)[0], ref_zid = cpu_run(m, zid)[0];
  // 3 images (anchor 4, derived) and 1 (anchor 1, derived): every row against its own reference
  const std::vector<std::vector<bool>> batches = {{true, false, true}, {false}};
  const std::string file = test::scratch_dir("tactics") + "/start_" + std::to_string(::getpid()) + ".json";
  for (Precision p : {Precision::kFloat32, Precision::kFloat16}) {
    const std::string prec = p == Precision::kFloat32 ? "fp32" : "fp16";
    const double bound = p == Precision::kFloat32 ? 1e-5 : 5e-3;
    std::remove(file.c_str());
    for (const char* start : {"cold", "from the file"}) {
      engine::forget_process_tactics();  // cold: tuned now; then as a new process would, from the file
      CudaEngine e(m, start_options(p, file));
      e.prepare({1, 2, 3, 4, 5, 6, 7, 8});
      const CudaEngineStats s = e.stats();
      const std::string what = prec + ", " + start;
      std::printf("[ fast start ] %s: tuned %d, from the file %d; %d sizes derived in %.0f ms, %d compiled\n",
                  what.c_str(), s.tactics_tuned, s.tactic_cache_hits, s.derived_batches, s.derive_ms,
                  s.derived_compiled);
      EXPECT_EQ(s.tuned_batches, (std::vector<int>{8})) << what;
      EXPECT_EQ(s.anchors, (std::vector<int>{1, 2, 4, 8})) << what;
      EXPECT_EQ(s.derived_batches, 3) << what << ": 1, 2 and 4";
      EXPECT_EQ(s.derived_compiled, 0) << what << ": a derived size compiled a kernel";
      if (std::string(start) == "cold") {
        EXPECT_GT(s.tactics_tuned, 0) << what;
      } else {
        EXPECT_EQ(s.tactics_tuned, 0) << what << ": every layer should come from the file";
      }
      expect_rows(e, batches, bus, zid, ref_bus, ref_zid, bound, what);
    }
    // A start without the option (padded, every size's own tactics compiled and kept in the file),
    // then one with it: the derived sizes restore those plans (none compiled).
    engine::forget_process_tactics();
    CudaEngineOptions full = start_options(p, file);
    full.derive_without_compiling = false;
    CudaEngine(m, full).prepare({1, 2, 3, 4, 5, 6, 7, 8});
    engine::forget_process_tactics();
    CudaEngine e(m, start_options(p, file));
    e.prepare({1, 2, 3, 4, 5, 6, 7, 8});
    const CudaEngineStats s = e.stats();
    std::printf("[ fast start ] %s, after a full start: %d sizes derived, %d plans restored, %d compiled\n",
                prec.c_str(), s.derived_batches, s.derived_plans_restored, s.derived_compiled);
    EXPECT_EQ(s.derived_compiled, 0) << prec;
    if (p == Precision::kFloat16) {
      EXPECT_GT(s.derived_plans_restored, 0) << prec << ": the kept plans were not restored";
    }
    expect_rows(e, batches, bus, zid, ref_bus, ref_zid, bound, prec + ", after a full start");
  }
  std::remove(file.c_str());
}

}  // namespace
}  // namespace yolocu

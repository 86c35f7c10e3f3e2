// CPU vs CUDA parity (label gpu; skips without a device): the CPU reference is the oracle.
// Keep lists identical; boxes within 1e-4 px (expected bit-identical: no FMA contraction);
// repeated runs and batch positions bit-identical.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "postprocess_test_util.hpp"
#include "yolocu/npy.hpp"
#include "yolocu/postprocess_cuda.hpp"

using namespace yolocu;

namespace {

struct DeviceCopy {
  void* p = nullptr;
  explicit DeviceCopy(const Tensor& t) {
    EXPECT_EQ(cudaMalloc(&p, t.nbytes()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, t.data(), t.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceCopy() { cudaFree(p); }
};

void expect_same(const Detections& cpu, const Detections& gpu, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(cpu[i].class_id, gpu[i].class_id) << what << " #" << i;
    EXPECT_EQ(cpu[i].confidence, gpu[i].confidence) << what << " #" << i;
    EXPECT_NEAR(cpu[i].x1, gpu[i].x1, 1e-4) << what << " #" << i;
    EXPECT_NEAR(cpu[i].y1, gpu[i].y1, 1e-4) << what << " #" << i;
    EXPECT_NEAR(cpu[i].x2, gpu[i].x2, 1e-4) << what << " #" << i;
    EXPECT_NEAR(cpu[i].y2, gpu[i].y2, 1e-4) << what << " #" << i;
  }
}

// Runs CPU and CUDA on a batch and compares every image; runs CUDA twice (bit-identical).
void check_parity(const Tensor& out, const std::vector<LetterboxGeometry>& geo,
                  const PostprocessOptions& o, const std::string& what) {
  const OutputView hv = output_view(out);
  DeviceCopy d(out);
  OutputView dv = hv;
  dv.data = d.p;
  PostprocessWorkspace ws(hv.batch, hv.rows, hv.num_classes(), o);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  postprocess_cuda(dv, geo, o, ws, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const auto first = ws.results();
  postprocess_cuda(dv, geo, o, ws, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const auto second = ws.results();
  cudaStreamDestroy(s);
  ASSERT_EQ(first.size(), static_cast<size_t>(hv.batch));
  for (int64_t b = 0; b < hv.batch; ++b) {
    const auto& g1 = first[static_cast<size_t>(b)];
    const auto& g2 = second[static_cast<size_t>(b)];
    expect_same(postprocess_cpu(hv, b, geo[static_cast<size_t>(b)], o), g1,
                what + " image " + std::to_string(b));
    ASSERT_EQ(g1.size(), g2.size());
    EXPECT_EQ(std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(Detection)), 0) << what;
  }
}

TEST(PostprocessCuda, ReferenceImagesBatch1And32) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  YOLOCU_REQUIRE_DATA(zid, "reference/zidane.npz");
  const Tensor a = load_npz(bus).at("output"), b = load_npz(zid).at("output");
  const LetterboxGeometry ga = letterbox_geometry(810, 1080, 640, 640);
  const LetterboxGeometry gb = letterbox_geometry(1280, 720, 640, 640);
  for (const PostprocessOptions& o : {detect_options(), val_options()}) {
    const std::string what = o.multi_label ? "val" : "detect";
    check_parity(a, {ga}, o, "bus " + what);
    Tensor big(DType::kFloat32, {32, 25200, 85});
    std::vector<LetterboxGeometry> geo;
    for (int i = 0; i < 32; ++i) {
      const Tensor& src = i % 2 ? b : a;
      std::memcpy(big.data_as<float>() + static_cast<int64_t>(i) * 25200 * 85, src.data(), src.nbytes());
      geo.push_back(i % 2 ? gb : ga);
    }
    check_parity(big, geo, o, "batch32 " + what);
    check_parity(cast_tensor(a, DType::kFloat16), {ga}, o, "bus fp16 " + what);
  }
}

TEST(PostprocessCuda, RandomWithTiesFastAndAgnostic) {
  YOLOCU_REQUIRE_GPU();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Tensor out(DType::kFloat32, {4, 3000, 8});  // nc = 3
  float* p = out.data_as<float>();
  for (int64_t i = 0; i < 4 * 3000; ++i, p += 8) {
    p[0] = u(rng) * 640, p[1] = u(rng) * 640, p[2] = 5 + u(rng) * 100, p[3] = 5 + u(rng) * 100;
    p[4] = std::round(u(rng) * 8) / 8;  // exact ties
    for (int c = 0; c < 3; ++c) p[5 + c] = std::round(u(rng) * 4) / 4;
  }
  const std::vector<LetterboxGeometry> geo(4, letterbox_geometry(640, 480, 640, 640));
  PostprocessOptions o;
  check_parity(out, geo, o, "random");
  o.multi_label = true;
  check_parity(out, geo, o, "random multi-label");
  o.agnostic = true;
  check_parity(out, geo, o, "random agnostic");
  o.agnostic = false;
  o.nms = NmsMode::kFast;
  check_parity(out, geo, o, "random fast");
  o.classes = {1};
  o.max_det = 5;
  check_parity(out, geo, o, "random filter max_det");
}

}  // namespace

// CPU vs CUDA parity of decode + NMS + projection (label gpu; skips without a device), in the
// spirit of ggml's test-backend-ops: the CPU reference is the oracle. Required: identical keep
// lists (class, confidence bit-equal, same order), boxes within 1e-4 px (expected bit-identical:
// no FMA contraction), candidate counts and overflow equal to the CPU's; repeated runs, CUDA graph
// replays and batch positions bit-identical. Each mismatch prints the image, the index and both
// detections.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "postprocess_test_util.hpp"
#include "yolocu/error.hpp"
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
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

std::string str(const Detection& d) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "[%.6f %.6f %.6f %.6f] conf %.9g cls %d", d.x1, d.y1, d.x2, d.y2,
                d.confidence, d.class_id);
  return buf;
}

// Keep lists identical, boxes within 1e-4 px; counts the boxes that are not bit-identical.
void expect_same(const Detections& cpu, const Detections& gpu, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what << ": detection count";
  int not_bitwise = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const Detection &a = cpu[i], &b = gpu[i];
    const bool same = a.class_id == b.class_id && a.confidence == b.confidence &&
                      std::fabs(a.x1 - b.x1) <= 1e-4f && std::fabs(a.y1 - b.y1) <= 1e-4f &&
                      std::fabs(a.x2 - b.x2) <= 1e-4f && std::fabs(a.y2 - b.y2) <= 1e-4f;
    ASSERT_TRUE(same) << what << " #" << i << "\n  cpu " << str(a) << "\n  gpu " << str(b);
    not_bitwise += std::memcmp(&a, &b, sizeof a) != 0;
  }
  EXPECT_EQ(not_bitwise, 0) << what << ": within tolerance but not bit-identical";
}

void expect_bitwise(const Detections& a, const Detections& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_TRUE(a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(Detection)) == 0)
      << what << ": not bit-identical";
}

// CPU reference of one image, with the candidate count (before max_nms) it saw.
Detections cpu_image(const OutputView& v, int64_t b, const LetterboxGeometry& g,
                     const PostprocessOptions& o, int64_t* found) {
  int64_t over = 0;
  const Candidates c = decode_cpu(v, b, o, &over);
  *found = static_cast<int64_t>(c.size()) + over;
  return project_cpu(c, nms_cpu(c, o), g, box_scaling(v.layout));
}

// Runs CPU and CUDA on a batch and compares every image; runs CUDA twice and replays a captured
// CUDA graph once (all bit-identical). `gpu_options` defaults to `o`; `capacity` goes to the
// workspace. Returns the CUDA results.
std::vector<Detections> check_parity(const Tensor& out, const std::vector<LetterboxGeometry>& geo,
                                     const PostprocessOptions& o, const std::string& what,
                                     const PostprocessOptions* gpu_options = nullptr,
                                     int64_t capacity = 0, OutputLayout layout = OutputLayout::kYolov5) {
  const PostprocessOptions& go = gpu_options ? *gpu_options : o;
  const OutputView hv = output_view(out, layout);
  DeviceCopy d(out);
  OutputView dv = hv;
  dv.data = d.p;
  PostprocessWorkspace ws(hv.batch, hv.rows, hv.num_classes(), go, capacity);
  EXPECT_EQ(ws.device_bytes(), ws.plan().device_bytes);
  Stream s;
  postprocess_cuda(dv, geo, go, ws, s.s);
  EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess) << what;
  const auto first = ws.results();
  const auto found = ws.candidates();
  const auto over = ws.overflow();
  postprocess_cuda(dv, geo, go, ws, s.s);
  EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess) << what;
  const auto second = ws.results();
  // the same work captured in a CUDA graph and replayed
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  postprocess_cuda(dv, geo, go, ws, s.s);
  EXPECT_EQ(cudaStreamEndCapture(s.s, &graph), cudaSuccess) << what << ": capture";
  EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess) << what;
  EXPECT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess) << what;
  EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess) << what;
  const auto replayed = ws.results();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  EXPECT_EQ(first.size(), static_cast<size_t>(hv.batch)) << what;
  for (int64_t b = 0; b < hv.batch && b < static_cast<int64_t>(first.size()); ++b) {
    const std::string w = what + " image " + std::to_string(b);
    int64_t cpu_found = 0;
    const Detections cpu = cpu_image(hv, b, geo[static_cast<size_t>(b)], o, &cpu_found);
    expect_same(cpu, first[static_cast<size_t>(b)], w);
    expect_bitwise(first[static_cast<size_t>(b)], second[static_cast<size_t>(b)], w + " rerun");
    expect_bitwise(first[static_cast<size_t>(b)], replayed[static_cast<size_t>(b)], w + " graph");
    EXPECT_EQ(found[static_cast<size_t>(b)], cpu_found) << w << ": candidates found";
    EXPECT_EQ(over[static_cast<size_t>(b)], std::max<int64_t>(0, cpu_found - ws.plan().capacity))
        << w << ": overflow";
  }
  return first;
}

Tensor tile(const Tensor& a, const Tensor& b, int batch) {
  const int64_t rows = a.dim(a.rank() - 2), ch = a.dim(a.rank() - 1);
  Tensor big(a.dtype(), {batch, rows, ch});
  for (int i = 0; i < batch; ++i) {
    const Tensor& src = i % 2 ? b : a;
    std::memcpy(static_cast<uint8_t*>(big.data()) + i * src.nbytes(), src.data(), src.nbytes());
  }
  return big;
}

TEST(PostprocessCuda, ReferenceImagesBatch1And32) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  YOLOCU_REQUIRE_DATA(zid, "reference/zidane.npz");
  const Tensor a = load_npz(bus).at("output"), b = load_npz(zid).at("output");
  const LetterboxGeometry ga = letterbox_geometry(810, 1080, 640, 640);
  const LetterboxGeometry gb = letterbox_geometry(1280, 720, 640, 640);
  std::vector<LetterboxGeometry> geo32;
  for (int i = 0; i < 32; ++i) geo32.push_back(i % 2 ? gb : ga);
  for (DType dt : {DType::kFloat32, DType::kFloat16}) {
    const Tensor ta = cast_tensor(a, dt), tb = cast_tensor(b, dt);
    const std::string dn = dt == DType::kFloat16 ? " fp16" : " fp32";
    for (const PostprocessOptions& o : {detect_options(), val_options()}) {
      const std::string what = (o.multi_label ? "val" : "detect") + dn;
      const auto one = check_parity(ta, {ga}, o, "bus " + what);
      const auto big = check_parity(tile(ta, tb, 32), geo32, o, "batch32 " + what);
      ASSERT_EQ(big.size(), 32u);
      ASSERT_EQ(one.size(), 1u);
      EXPECT_GT(one[0].size(), 0u) << what;
      for (int i = 0; i < 32; ++i)  // every batch position gives the same bits
        expect_bitwise(big[static_cast<size_t>(i % 2)], big[static_cast<size_t>(i)],
                       what + " position " + std::to_string(i));
      expect_bitwise(one[0], big[0], what + " batch 1 vs 32");
    }
  }
}

// Random merged outputs. ties: scores and boxes quantised so that exact score ties, duplicate
// boxes and IoUs exactly at simple thresholds occur; otherwise continuous (tie-free).
Tensor random_output(int batch, int rows, int nc, bool ties, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Tensor out(DType::kFloat32, {batch, rows, 5 + nc});
  float* p = out.data_as<float>();
  for (int64_t i = 0; i < static_cast<int64_t>(batch) * rows; ++i, p += 5 + nc) {
    if (ties) {
      p[0] = std::round(u(rng) * 16) * 40, p[1] = std::round(u(rng) * 16) * 40;
      p[2] = 20 + std::round(u(rng) * 4) * 20, p[3] = 20 + std::round(u(rng) * 4) * 20;
      p[4] = std::round(u(rng) * 8) / 8;
      for (int c = 0; c < nc; ++c) p[5 + c] = std::round(u(rng) * 4) / 4;
    } else {
      p[0] = u(rng) * 640, p[1] = u(rng) * 640, p[2] = 5 + u(rng) * 120, p[3] = 5 + u(rng) * 120;
      p[4] = u(rng);
      for (int c = 0; c < nc; ++c) p[5 + c] = u(rng);
    }
  }
  return out;
}

void random_suite(bool ties) {
  const std::string tag = ties ? "ties " : "tie-free ";
  const Tensor out = random_output(4, 3000, 3, ties, ties ? 3 : 4);
  const std::vector<LetterboxGeometry> geo(4, letterbox_geometry(640, 480, 640, 640));
  PostprocessOptions o;
  check_parity(out, geo, o, tag + "default");
  check_parity(out, geo, detect_options(), tag + "detect");
  check_parity(out, geo, val_options(), tag + "val");
  o.multi_label = true;
  check_parity(out, geo, o, tag + "multi-label");
  o.agnostic = true;
  check_parity(out, geo, o, tag + "agnostic");
  o.agnostic = false;
  o.nms = NmsMode::kFast;
  check_parity(out, geo, o, tag + "fast");
  o.nms = NmsMode::kGreedy;
  o.iou_threshold = 0.6f;  // 3/5 IoUs exist in the tie set: the double-threshold rule
  check_parity(out, geo, o, tag + "iou 0.6");
  o.classes = {1};
  o.max_det = 5;
  check_parity(out, geo, o, tag + "filter max_det");
  PostprocessOptions z;
  z.conf_threshold = 0.f;
  z.iou_threshold = 0.f;
  check_parity(out, geo, z, tag + "thresholds 0");
  z.conf_threshold = 1.f;
  z.iou_threshold = 1.f;
  check_parity(out, geo, z, tag + "thresholds 1");
}

TEST(PostprocessCuda, RandomTieFree) {
  YOLOCU_REQUIRE_GPU();
  random_suite(false);
}

TEST(PostprocessCuda, RandomWithTies) {
  YOLOCU_REQUIRE_GPU();
  random_suite(true);
}

// YOLOv8 / YOLO11 layout [batch, 4 + nc, anchors] (channel-major, no objectness), float32 and
// float16: random outputs (continuous and quantised with ties; a few rows with a NaN class score,
// which the CPU drops whole), every option set, the integer-pad projection of ultralytics 8.x.
Tensor random_output_v8(int batch, int anchors, int nc, bool ties, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Tensor out(DType::kFloat32, {batch, 4 + nc, anchors});
  float* p = out.data_as<float>();
  for (int b = 0; b < batch; ++b)
    for (int a = 0; a < anchors; ++a) {
      float* q = p + static_cast<int64_t>(b) * (4 + nc) * anchors + a;
      auto at = [&](int k) -> float& { return q[static_cast<int64_t>(k) * anchors]; };
      if (ties) {
        at(0) = std::round(u(rng) * 16) * 40, at(1) = std::round(u(rng) * 16) * 40;
        at(2) = 20 + std::round(u(rng) * 4) * 20, at(3) = 20 + std::round(u(rng) * 4) * 20;
        for (int c = 0; c < nc; ++c) at(4 + c) = std::round(u(rng) * 8) / 8;
      } else {
        at(0) = u(rng) * 640, at(1) = u(rng) * 640, at(2) = 5 + u(rng) * 120, at(3) = 5 + u(rng) * 120;
        for (int c = 0; c < nc; ++c) at(4 + c) = u(rng);
      }
      if (a % 97 == 13) at(4 + a % nc) = std::nanf("");
    }
  return out;
}

TEST(PostprocessCuda, V8LayoutMatchesCpu) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<LetterboxGeometry> geo = {letterbox_geometry(810, 1080, 640, 640), letterbox_geometry(640, 480, 640, 640),
                                              letterbox_geometry(1280, 720, 640, 640)};
  for (bool ties : {false, true})
    for (DType dt : {DType::kFloat32, DType::kFloat16}) {
      Tensor out = random_output_v8(3, 2100, 5, ties, ties ? 7 : 8);
      if (dt == DType::kFloat16) out = cast_tensor(out, DType::kFloat16);
      const std::string tag = std::string("v8 ") + (ties ? "ties " : "tie-free ") + dtype_name(dt) + " ";
      auto run = [&](const PostprocessOptions& o, const std::string& what) {
        check_parity(out, geo, o, tag + what, nullptr, 0, OutputLayout::kYolov8);
      };
      run(detect_options(OutputLayout::kYolov8), "predict");
      run(val_options(OutputLayout::kYolov8), "val (multi-label)");
      PostprocessOptions o = detect_options(OutputLayout::kYolov8);
      o.agnostic = true;
      run(o, "agnostic");
      o.agnostic = false;
      o.nms = NmsMode::kFast;
      run(o, "fast");
      o.nms = NmsMode::kGreedy;
      o.classes = {0, 3};
      o.max_det = 7;
      run(o, "filter max_det");
      PostprocessOptions z = detect_options(OutputLayout::kYolov8);
      z.conf_threshold = 0.f;
      z.iou_threshold = 0.f;
      run(z, "thresholds 0");
      z.conf_threshold = 1.f;
      z.iou_threshold = 1.f;
      run(z, "thresholds 1");
      PostprocessOptions small = val_options(OutputLayout::kYolov8);
      small.max_nms = 100;  // more candidates than slots: radix select on the v8 rows
      run(small, "val max_nms 100");
    }
  // one class: multi-label is single-label (ultralytics: multi_label &= nc > 1)
  const Tensor one = random_output_v8(3, 500, 1, false, 9);
  check_parity(one, geo, val_options(OutputLayout::kYolov8), "v8 one class val", nullptr, 0, OutputLayout::kYolov8);
}

// More candidates than slots: the radix-select passes must keep exactly the max_nms best
// (score descending, ties by row then class), like the CPU's sort + cut, and report the rest.
TEST(PostprocessCuda, OverflowKeepsTheBestScored) {
  YOLOCU_REQUIRE_GPU();
  for (bool ties : {false, true}) {
    const std::string tag = ties ? "ties " : "tie-free ";
    Tensor out = random_output(3, 4000, 8, ties, 11);
    // image 2: few candidates (no overflow) next to overflowing images
    float* p2 = out.data_as<float>() + 2 * 4000 * 13;
    for (int r = 0; r < 4000; ++r) p2[r * 13 + 4] = r % 50 == 0 ? 0.9f : 0.f;
    const std::vector<LetterboxGeometry> geo(3, letterbox_geometry(640, 640, 640, 640));
    PostprocessOptions o = val_options();
    o.max_nms = 700;
    o.iou_threshold = 1.f;  // nothing suppressed: the output IS the kept candidate list
    o.max_det = 700;
    check_parity(out, geo, o, tag + "overflow no-suppression");
    o.iou_threshold = 0.45f;
    o.max_det = 300;
    check_parity(out, geo, o, tag + "overflow nms");
    o.multi_label = false;
    o.max_nms = 1000;
    check_parity(out, geo, o, tag + "overflow best-class");
    // workspace capacity below max_nms: equals the CPU with max_nms = capacity
    PostprocessOptions cpu = val_options(), gpu = val_options();
    cpu.max_nms = 500;
    check_parity(out, geo, cpu, tag + "capacity 500", &gpu, 500);
  }
}

// iou 1: nothing is suppressed, so the first max_det detections are the decode's canonical
// order; 4096 of them span 4 NMS chunks (block radix select + bitonic sort per chunk).
TEST(PostprocessCuda, NoSuppressionGivesCanonicalOrder) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  const Tensor a = load_npz(bus).at("output");
  PostprocessOptions o = val_options();
  o.iou_threshold = 1.f;
  o.max_det = kMaxCudaMaxDet;
  const auto r = check_parity(a, {letterbox_geometry(810, 1080, 640, 640)}, o, "bus iou 1");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_GT(r[0].size(), static_cast<size_t>(1024)) << "expected several NMS chunks";
}

// NMS-dominated sets: one-hot class rows, boxes from the benchmark's formula (1000, 5000, 25200).
TEST(PostprocessCuda, RandomBoxSets) {
  YOLOCU_REQUIRE_GPU();
  for (int n : {1000, 5000, 25200}) {
    const int nc = 80;
    Tensor out(DType::kFloat32, {1, n, 5 + nc});
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::uniform_real_distribution<float> u(0.f, 1.f);
    float* p = out.data_as<float>();
    std::memset(p, 0, out.nbytes());
    for (int i = 0; i < n; ++i, p += 5 + nc) {
      p[0] = u(rng) * 640, p[1] = u(rng) * 640, p[2] = 8 + u(rng) * 120, p[3] = 8 + u(rng) * 120;
      p[4] = u(rng);
      p[5 + std::min(nc - 1, static_cast<int>(u(rng) * nc))] = 1.f;
    }
    PostprocessOptions o;
    o.conf_threshold = 0.f;
    o.max_det = 1000;
    const std::vector<LetterboxGeometry> geo{letterbox_geometry(640, 640, 640, 640)};
    check_parity(out, geo, o, "boxes " + std::to_string(n));
    o.agnostic = true;
    check_parity(out, geo, o, "boxes agnostic " + std::to_string(n));
    o.agnostic = false;
    o.nms = NmsMode::kFast;
    check_parity(out, geo, o, "boxes fast " + std::to_string(n));
  }
}

// Raw heads (NCHW, 3 levels) through decode_raw_heads on both sides.
std::vector<Detections> raw_heads_parity(const std::vector<Tensor>& heads, int nc,
                                         const PostprocessOptions& o, const std::string& what) {
  const RawHeadsView hv = raw_heads_view(heads, nc);
  std::vector<std::unique_ptr<DeviceCopy>> d;
  RawHeadsView dv = hv;
  for (int l = 0; l < hv.num_levels; ++l) {
    d.push_back(std::make_unique<DeviceCopy>(heads[static_cast<size_t>(l)]));
    dv.levels[l].data = d.back()->p;
  }
  const std::vector<LetterboxGeometry> geo(static_cast<size_t>(hv.batch),
                                           letterbox_geometry(1280, 720, 640, 640));
  PostprocessWorkspace ws(hv.batch, hv.rows(), nc, o);
  Stream s;
  postprocess_raw_heads_cuda(dv, geo, o, ws, s.s);
  EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess) << what;
  const auto got = ws.results();
  const auto found = ws.candidates();
  postprocess_raw_heads_cuda(dv, geo, o, ws, s.s);
  EXPECT_EQ(cudaStreamSynchronize(s.s), cudaSuccess) << what;
  const auto again = ws.results();
  EXPECT_EQ(got.size(), static_cast<size_t>(hv.batch));
  for (int64_t b = 0; b < hv.batch && b < static_cast<int64_t>(got.size()); ++b) {
    const std::string w = what + " image " + std::to_string(b);
    int64_t over = 0;
    const Candidates c = decode_raw_heads_cpu(hv, b, o, &over);
    EXPECT_EQ(found[static_cast<size_t>(b)], static_cast<int64_t>(c.size()) + over) << w;
    expect_same(project_cpu(c, nms_cpu(c, o), geo[static_cast<size_t>(b)]),
                got[static_cast<size_t>(b)], w);
    expect_bitwise(got[static_cast<size_t>(b)], again[static_cast<size_t>(b)], w + " rerun");
  }
  return got;
}

std::vector<Tensor> random_heads(int batch, int nc, int grid, float mean, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(mean, 2.f);
  std::vector<Tensor> heads;
  for (int l = 0; l < 3; ++l) {
    const int n = grid >> l;
    Tensor t(DType::kFloat32, {batch, 3 * (5 + nc), n, n});
    float* p = t.data_as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = g(rng);
    heads.push_back(std::move(t));
  }
  return heads;
}

TEST(PostprocessCuda, RawHeadsMatchCpu) {
  YOLOCU_REQUIRE_GPU();
  // small: nc 6, grids 16/8/4; yolov5n-sized: nc 80, grids 80/40/20 (25200 rows)
  for (int big = 0; big < 2; ++big) {
    const int nc = big ? 80 : 6, grid = big ? 80 : 16, batch = big ? 2 : 3;
    const std::vector<Tensor> h32 = random_heads(batch, nc, grid, -2.f, 7 + big);
    for (DType dt : {DType::kFloat32, DType::kFloat16}) {
      std::vector<Tensor> h;
      for (const Tensor& t : h32) h.push_back(cast_tensor(t, dt));
      const std::string tag = std::string(big ? "yolov5n-size" : "small") +
                              (dt == DType::kFloat16 ? " fp16 " : " fp32 ");
      for (const PostprocessOptions& o : {detect_options(), val_options()})
        raw_heads_parity(h, nc, o, tag + (o.multi_label ? "val" : "detect"));
    }
  }
}

TEST(PostprocessCuda, EmptyAndWrongInputs) {
  YOLOCU_REQUIRE_GPU();
  Tensor out(DType::kFloat32, {2, 100, 6});
  std::memset(out.data(), 0, out.nbytes());  // obj 0: no candidates
  const std::vector<LetterboxGeometry> geo(2, letterbox_geometry(640, 640, 640, 640));
  const auto r = check_parity(out, geo, detect_options(), "empty");
  for (const auto& d : r) EXPECT_TRUE(d.empty());
  PostprocessWorkspace ws(2, 100, 1, detect_options());
  DeviceCopy d(out);
  OutputView v = output_view(out);
  v.data = d.p;
  Stream s;
  EXPECT_THROW(postprocess_cuda(v, {geo[0]}, detect_options(), ws, s.s), Error);  // 1 geometry
  EXPECT_THROW(postprocess_cuda(v, geo, val_options(), ws, s.s), Error);         // options
  OutputView wrong = v;
  wrong.rows = 99;
  EXPECT_THROW(postprocess_cuda(wrong, geo, detect_options(), ws, s.s), Error);
  std::vector<LetterboxGeometry> bad = geo;
  bad[1].gain = 0;
  EXPECT_THROW(postprocess_cuda(v, bad, detect_options(), ws, s.s), Error);
}

TEST(PostprocessCuda, WorkspaceBytes) {
  YOLOCU_REQUIRE_GPU();
  for (int val = 0; val < 2; ++val)
    for (int64_t b : {1, 32}) {
      const PostprocessOptions o = val ? val_options() : detect_options();
      PostprocessWorkspace ws(b, 25200, 80, o);
      EXPECT_EQ(ws.device_bytes(), ws.plan().device_bytes);
      std::printf("workspace %s batch %lld: %zu device bytes, %zu pinned bytes\n",
                  val ? "val" : "detect", static_cast<long long>(b), ws.device_bytes(),
                  ws.plan().pinned_bytes);
    }
}

}  // namespace

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
                                     int64_t capacity = 0,
                                     OutputLayout layout = OutputLayout::kYolov5,
                                     const CudaNmsConfig& nms = CudaNmsConfig()) {
  const PostprocessOptions& go = gpu_options ? *gpu_options : o;
  const OutputView hv = output_view(out, layout);
  DeviceCopy d(out);
  OutputView dv = hv;
  dv.data = d.p;
  PostprocessWorkspace ws(hv.batch, hv.rows, hv.num_classes(), go, capacity, nms);
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

// ---- NMS paths. The bitmask path (forced with CudaNmsPath::kBitmask, or chosen by count in
// kAuto) and the kept-box path must give the CPU reference's keep list, in order, on crowded sets.

enum class SetKind {
  kOverlapping,  // 100 x 100 px area, boxes 10-60 px: heavy suppression, chains
  kInteger,  // integer corners on a 12 x 12 grid: IoUs exactly 1/2, 1/3, 3/5; scores in 1/8 steps
  kTies,     // continuous boxes, scores in 1/8 steps, every 4th row an earlier row's box
  kSpread,   // 640 x 640, boxes 8-128 px: few overlaps, most boxes kept
};

// A merged output where every row r < counts[b] of image b is one candidate at conf 0: box
// (cx, cy, w, h), objectness = the score (> 0) and a one-hot class score of 1 (score = obj
// exactly); later rows have objectness 0. Classes uniform in [0, nc).
Tensor nms_set(const std::vector<int>& counts, int rows, int nc, SetKind kind, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  const int64_t ch = 5 + nc;
  Tensor out(DType::kFloat32, {static_cast<int64_t>(counts.size()), rows, ch});
  std::memset(out.data(), 0, out.nbytes());
  for (size_t b = 0; b < counts.size(); ++b) {
    float* base = out.data_as<float>() + static_cast<int64_t>(b) * rows * ch;
    for (int r = 0; r < counts[b]; ++r) {
      float* p = base + r * ch;
      switch (kind) {
        case SetKind::kOverlapping:
          p[0] = 100 + u(rng) * 100, p[1] = 100 + u(rng) * 100;
          p[2] = 10 + u(rng) * 50, p[3] = 10 + u(rng) * 50;
          p[4] = 0.05f + 0.95f * u(rng);
          break;
        case SetKind::kInteger: {
          const float x = std::floor(u(rng) * 12), y = std::floor(u(rng) * 12);
          const float w = 1 + std::floor(u(rng) * 5), h = 1 + std::floor(u(rng) * 5);
          p[0] = x + w / 2, p[1] = y + h / 2, p[2] = w, p[3] = h;  // corners exactly x, x + w
          p[4] = (1 + std::floor(u(rng) * 8)) / 8;
          break;
        }
        case SetKind::kTies:
          if (r >= 4 && r % 4 == 0) {
            std::memcpy(p, base + static_cast<int64_t>(rng() % r) * ch, 4 * sizeof(float));
          } else {
            p[0] = 150 + u(rng) * 300, p[1] = 150 + u(rng) * 300;
            p[2] = 20 + u(rng) * 80, p[3] = 20 + u(rng) * 80;
          }
          p[4] = (1 + std::floor(u(rng) * 8)) / 8;
          break;
        case SetKind::kSpread:
          p[0] = u(rng) * 640, p[1] = u(rng) * 640, p[2] = 8 + u(rng) * 120,
          p[3] = 8 + u(rng) * 120;
          p[4] = 0.01f + 0.99f * u(rng);
          break;
      }
      p[5 + (nc > 1 ? static_cast<int>(rng() % static_cast<uint32_t>(nc)) : 0)] = 1.f;
    }
  }
  return out;
}

PostprocessOptions nms_options(float iou, int max_det, bool agnostic = false) {
  PostprocessOptions o;
  o.conf_threshold = 0.f;
  o.iou_threshold = iou;
  o.max_det = max_det;
  o.agnostic = agnostic;
  return o;
}

const CudaNmsConfig kForceBitmask{CudaNmsPath::kBitmask};
const CudaNmsConfig kForceKept{CudaNmsPath::kKeptBoxes};

// Both forced paths and kAuto against the CPU on one output; the forced bitmask workspace must
// hold every image's candidates (else an image would silently take the other path).
void paths_parity(const Tensor& out, const PostprocessOptions& o, const std::string& what) {
  const OutputView v = output_view(out);
  const std::vector<LetterboxGeometry> geo(static_cast<size_t>(v.batch),
                                           letterbox_geometry(640, 640, 640, 640));
  const PostprocessCudaPlan plan =
      plan_postprocess_cuda(v.batch, v.rows, v.num_classes(), o, 0, kForceBitmask);
  ASSERT_GE(plan.bitmask_capacity, std::min<int64_t>(v.rows, o.max_nms)) << what;
  check_parity(out, geo, o, what + " [bitmask]", nullptr, 0, OutputLayout::kYolov5, kForceBitmask);
  check_parity(out, geo, o, what + " [kept boxes]", nullptr, 0, OutputLayout::kYolov5, kForceKept);
  check_parity(out, geo, o, what + " [auto]");
}

TEST(PostprocessCuda, BitmaskPathCrowdedSets) {
  YOLOCU_REQUIRE_GPU();
  const SetKind kinds[] = {SetKind::kOverlapping, SetKind::kInteger, SetKind::kTies,
                           SetKind::kSpread};
  const char* names[] = {"overlapping", "integer", "ties", "spread"};
  for (int k = 0; k < 4; ++k)
    for (int nc : {1, 80}) {
      const Tensor out = nms_set({3001}, 3001, nc, kinds[k], 100 + k);
      const std::string tag = std::string(names[k]) + " nc " + std::to_string(nc) + " n 3001";
      paths_parity(out, nms_options(0.45f, kMaxCudaMaxDet), tag);
      if (nc > 1) paths_parity(out, nms_options(0.45f, kMaxCudaMaxDet, true), tag + " agnostic");
      if (kinds[k] == SetKind::kInteger) {  // IoUs exactly at the threshold: strict >, as a double
        paths_parity(out, nms_options(0.5f, kMaxCudaMaxDet), tag + " iou 0.5");
        paths_parity(out, nms_options(0.6f, kMaxCudaMaxDet), tag + " iou 0.6");
        paths_parity(out, nms_options(1.f / 3.f, kMaxCudaMaxDet), tag + " iou 1/3");
      }
    }
}

TEST(PostprocessCuda, BitmaskPathCountsAndStops) {
  YOLOCU_REQUIRE_GPU();
  // n around the 64-candidate blocks of the sweep (and 0, 1)
  for (int n : {0, 1, 2, 63, 64, 65, 127, 129, 4097})
    for (SetKind kind : {SetKind::kSpread, SetKind::kOverlapping}) {
      const Tensor out = nms_set({n}, std::max(n, 1), 3, kind, 200 + n);
      paths_parity(out, nms_options(0.45f, kMaxCudaMaxDet),
                   std::string(kind == SetKind::kSpread ? "spread" : "overlapping") + " n " +
                       std::to_string(n));
    }
  // max_det reached inside a block of 64, at its edges, and in a later block
  const Tensor spread = nms_set({1000}, 1000, 2, SetKind::kSpread, 300);
  for (int max_det : {1, 37, 63, 64, 65, 100, 999})
    paths_parity(spread, nms_options(0.45f, max_det), "spread max_det " + std::to_string(max_det));
  const Tensor crowded = nms_set({2000}, 2000, 1, SetKind::kOverlapping, 301);
  paths_parity(crowded, nms_options(0.45f, 5), "overlapping max_det 5");
  // thresholds 0 (any overlap suppresses) and 1 (nothing does: the canonical order itself)
  paths_parity(crowded, nms_options(0.f, kMaxCudaMaxDet), "overlapping iou 0");
  paths_parity(crowded, nms_options(1.f, kMaxCudaMaxDet), "overlapping iou 1");
}

// kAuto in one call: crowded images (bitmask path), a small one (kept-box path) and an empty one;
// then an image too large for the bitmask budget (kept-box path although forced).
TEST(PostprocessCuda, BitmaskPathMixedBatchAndFallback) {
  YOLOCU_REQUIRE_GPU();
  const Tensor out = nms_set({3000, 100, 0, 700}, 3000, 80, SetKind::kOverlapping, 400);
  const std::vector<LetterboxGeometry> geo(4, letterbox_geometry(640, 640, 640, 640));
  const PostprocessOptions o = nms_options(0.45f, kMaxCudaMaxDet);
  const PostprocessCudaPlan plan = plan_postprocess_cuda(4, 3000, 80, o);
  ASSERT_GE(plan.bitmask_capacity, 3000);
  ASSERT_EQ(plan.bitmask_min_candidates, kNmsBitmaskAutoMin + 1);
  check_parity(out, geo, o, "mixed batch auto");
  check_parity(out, geo, o, "mixed batch bitmask", nullptr, 0, OutputLayout::kYolov5,
               kForceBitmask);
  CudaNmsConfig small = kForceBitmask;
  small.bitmask_bytes = 1u << 20;  // ~1.4k slots per image at batch 4
  const PostprocessCudaPlan sp = plan_postprocess_cuda(4, 3000, 80, o, 0, small);
  ASSERT_GT(sp.bitmask_capacity, 700);
  ASSERT_LT(sp.bitmask_capacity, 3000);
  check_parity(out, geo, o, "mixed batch, image 0 above the bitmask capacity", nullptr, 0,
               OutputLayout::kYolov5, small);
}

// Small and quick (the compute-sanitizer runs): a batch with images on both paths and an empty
// one, every path; n not a multiple of 64.
TEST(PostprocessCuda, BitmaskPathSmall) {
  YOLOCU_REQUIRE_GPU();
  const Tensor out = nms_set({700, 130, 0, 65}, 700, 3, SetKind::kOverlapping, 700);
  const std::vector<LetterboxGeometry> geo(4, letterbox_geometry(640, 640, 640, 640));
  const PostprocessOptions o = nms_options(0.45f, 300);
  check_parity(out, geo, o, "small auto");
  check_parity(out, geo, o, "small bitmask", nullptr, 0, OutputLayout::kYolov5, kForceBitmask);
  check_parity(out, geo, o, "small kept boxes", nullptr, 0, OutputLayout::kYolov5, kForceKept);
}

// One workspace, alternating crowded and sparse inputs of one shape (direct and graph-replayed):
// the state each call leaves behind must not leak into the next.
TEST(PostprocessCuda, BitmaskPathStateBetweenCalls) {
  YOLOCU_REQUIRE_GPU();
  const Tensor crowded = nms_set({2500, 900}, 2500, 4, SetKind::kTies, 500);
  const Tensor sparse = nms_set({40, 1300}, 2500, 4, SetKind::kSpread, 501);
  const std::vector<LetterboxGeometry> geo(2, letterbox_geometry(640, 640, 640, 640));
  const PostprocessOptions o = nms_options(0.45f, 2000);
  for (const CudaNmsConfig& nms : {CudaNmsConfig(), kForceBitmask, kForceKept}) {
    PostprocessWorkspace ws(2, 2500, 4, o, 0, nms);
    DeviceCopy dc(crowded), ds(sparse);
    OutputView vc = output_view(crowded), vs = output_view(sparse);
    vc.data = dc.p;
    vs.data = ds.p;
    Stream s;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    postprocess_cuda(vc, geo, o, ws, s.s);
    ASSERT_EQ(cudaStreamEndCapture(s.s, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int round = 0; round < 6; ++round) {
      const bool use_crowded = round % 2 == 0;
      if (use_crowded && round == 4)
        ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
      else
        postprocess_cuda(use_crowded ? vc : vs, geo, o, ws, s.s);
      ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
      const auto got = ws.results();
      const Tensor& host = use_crowded ? crowded : sparse;
      for (int b = 0; b < 2; ++b) {
        int64_t found = 0;
        const Detections cpu =
            cpu_image(output_view(host), b, geo[static_cast<size_t>(b)], o, &found);
        const std::string w = "path " + std::to_string(static_cast<int>(nms.path)) + " round " +
                              std::to_string(round) + " image " + std::to_string(b);
        expect_same(cpu, got[static_cast<size_t>(b)], w);
        EXPECT_EQ(ws.candidates()[static_cast<size_t>(b)], found) << w;
      }
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

// The bitmask path behind every source and the overflow (radix select) path: FP16 merged output,
// YOLOv8 layout, more candidates than slots (the emit pass rewrites the slots and their boxes).
TEST(PostprocessCuda, BitmaskPathOtherInputs) {
  YOLOCU_REQUIRE_GPU();
  const Tensor out = nms_set({2000, 1500}, 2000, 5, SetKind::kOverlapping, 600);
  const std::vector<LetterboxGeometry> geo(2, letterbox_geometry(810, 1080, 640, 640));
  const PostprocessOptions o = nms_options(0.45f, 1000);
  check_parity(cast_tensor(out, DType::kFloat16), geo, o, "fp16 bitmask", nullptr, 0,
               OutputLayout::kYolov5, kForceBitmask);
  const Tensor v8 = random_output_v8(2, 2100, 5, true, 601);
  PostprocessOptions v8o = val_options(OutputLayout::kYolov8);
  v8o.max_det = 1000;
  v8o.max_nms = 4000;  // ~9,000 candidates per image: the select + emit passes keep 4000 slots
  ASSERT_GE(plan_postprocess_cuda(2, 2100, 5, v8o, 0, kForceBitmask).bitmask_capacity, 4000);
  check_parity(v8, geo, v8o, "v8 val bitmask", nullptr, 0, OutputLayout::kYolov8, kForceBitmask);
  Tensor many = random_output(3, 4000, 8, true, 602);
  PostprocessOptions ov = val_options();
  ov.max_nms = 700;
  ov.max_det = 700;
  ASSERT_GE(plan_postprocess_cuda(3, 4000, 8, ov, 0, kForceBitmask).bitmask_capacity, 700);
  check_parity(many, std::vector<LetterboxGeometry>(3, geo[0]), ov, "overflow bitmask", nullptr, 0,
               OutputLayout::kYolov5, kForceBitmask);
}

// Raw heads (NCHW, 3 levels) through decode_raw_heads on both sides.
std::vector<Detections> raw_heads_parity(const std::vector<Tensor>& heads, int nc,
                                         const PostprocessOptions& o, const std::string& what,
                                         const CudaNmsConfig& nms = CudaNmsConfig()) {
  const RawHeadsView hv = raw_heads_view(heads, nc);
  std::vector<std::unique_ptr<DeviceCopy>> d;
  RawHeadsView dv = hv;
  for (int l = 0; l < hv.num_levels; ++l) {
    d.push_back(std::make_unique<DeviceCopy>(heads[static_cast<size_t>(l)]));
    dv.levels[l].data = d.back()->p;
  }
  const std::vector<LetterboxGeometry> geo(static_cast<size_t>(hv.batch),
                                           letterbox_geometry(1280, 720, 640, 640));
  PostprocessWorkspace ws(hv.batch, hv.rows(), nc, o, 0, nms);
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
      if (!big) {  // the bitmask path's boxes from the raw heads (decode stores them)
        PostprocessOptions o = val_options();
        o.max_nms = 2000;
        raw_heads_parity(h, nc, o, tag + "val bitmask", kForceBitmask);
      }
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

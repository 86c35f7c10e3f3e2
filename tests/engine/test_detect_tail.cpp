// The GPU engine's fused Detect tail (src/engine/detect_tail.hpp) compiled for the host: every
// element of the merged output, taken in the kernel's order (its tiles of pixels, and in each tile
// anchor by anchor its contiguous run of merged rows), through the kernel's own index and value
// functions, must rebuild the merged output that the graph computes
// node by node (CPU engine), exactly once per element. What this cannot cover (the launch and the
// device's expf) test_cuda_engine checks on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "engine/detect_tail.hpp"
#include "engine/engine_test_util.hpp"
#include "engine/plan.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

namespace {

// NCHW -> NHWC with `pitch` >= C channels per pixel; padding channels hold a huge value that must
// never reach the output.
Tensor nchw_to_nhwc(const Tensor& t, int64_t pitch) {
  const int64_t n = t.dim(0), c = t.dim(1), h = t.dim(2), w = t.dim(3);
  Tensor y(DType::kFloat32, {n, h, w, pitch});
  const float* s = t.data_as<float>();
  float* d = y.data_as<float>();
  for (int64_t i = 0; i < y.numel(); ++i) d[i] = 1e30f;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < h * w; ++p) d[(b * h * w + p) * pitch + k] = s[(b * c + k) * h * w + p];
  return y;
}

// Runs the host instantiation of the tail on `x` and returns it with the node-by-node output.
// pad > 0: the convolutions' outputs are stored with their channels padded to a multiple of pad.
// tile > 0: pixels per tile (else the launcher's choice for FP16 sources).
constexpr int kThreads = 256;  // the kernel's block

std::pair<Tensor, Tensor> tail_and_graph(const std::string& path, const Tensor& x, int64_t pad = 0, int tile = 0) {
  const Model m = load_onnx(path);
  const engine::Plan plan = engine::build_plan(m, {x.shape()});
  const int out_node = plan.values[static_cast<size_t>(plan.outputs[0])].producer;
  engine::DetectHead head;
  EXPECT_TRUE(out_node >= 0 && engine::match_detect_head(plan, out_node, &head));
  if (head.levels.empty()) return {};

  // The head convolutions' outputs (bias added, before the sigmoid), as the GPU engine has them.
  auto convs = std::make_shared<Model>(m);
  convs->graph.outputs.clear();
  for (const auto& L : head.levels) {
    ValueInfo vi;
    vi.name = plan.values[static_cast<size_t>(plan.nodes[static_cast<size_t>(L.conv)].out[0])].name;
    convs->graph.outputs.push_back(vi);
  }
  const std::vector<Tensor> conv_out = CpuEngine(convs).run({x});

  CpuEngineOptions node_by_node;
  node_by_node.fuse_detect_head = false;
  const Tensor graph = CpuEngine(std::make_shared<Model>(m), node_by_node).run({x})[0];

  Tensor got(DType::kFloat32, graph.shape());
  float* g = got.data_as<float>();
  for (int64_t i = 0; i < got.numel(); ++i) g[i] = std::numeric_limits<float>::quiet_NaN();
  int64_t writes = 0, out_of_range = 0, not_contiguous = 0, bad_local = 0;
  for (size_t l = 0; l < head.levels.size(); ++l) {
    const engine::DetectLevel& D = head.levels[l];
    std::vector<float> tables;
    engine::tail::tables_of(D, &tables);
    engine::tail::Level L = engine::tail::level_from(D, tables.data());
    const int64_t channels = conv_out[l].dim(1);
    if (pad > 0) L.pitch = (channels + pad - 1) / pad * pad;
    const int64_t pitch = engine::tail::source_pitch(L);
    const Tensor src = nchw_to_nhwc(conv_out[l], pitch);
    const float* s = src.data_as<float>();
    const int tp = tile > 0 ? tile : engine::tail::tile_pixels_for(pitch, 2);
    const int blocks = static_cast<int>(src.dim(0)) * engine::tail::tiles_per_image(L, tp);
    for (int b = 0; b < blocks; ++b) {  // the kernel's blocks, and in each its threads' order
      const engine::tail::Tile t = engine::tail::tile_of(L, b, tp);
      const float* tile_src = s + engine::tail::tile_source_offset(L, t);  // the block's shared memory
      const int run = t.count * static_cast<int>(L.no), no = static_cast<int>(L.no);
      const int cells = static_cast<int>(L.ny * L.nx);
      for (int a = 0; a < L.na; ++a) {
        for (int th = 0; th < kThreads; ++th) {  // each thread's walk, as the kernel's
          engine::tail::RunWalk wk(th, kThreads, no);
          for (int j = th; j < run; j += kThreads, wk.next()) {
            const int local = wk.local(static_cast<int>(pitch), a);
            if (wk.k != j % no || wk.q != j / no || local < 0 || local >= t.count * pitch || local % pitch >= channels) {
              ++bad_local;
              continue;
            }
            const int p = t.p0 + wk.q;
            const engine::tail::Coord c{t.n, a, p / L.nx, p % L.nx, wk.k};
            const int64_t o = engine::tail::run_output_index(L, head.rows, t, a) + j;
            if (o != engine::tail::output_index(L, head.rows, c)) ++not_contiguous;
            if (o < 0 || o >= got.numel()) {
              ++out_of_range;
              continue;
            }
            g[o] = engine::tail::element(L, a * cells + p, wk.k, tile_src[local]);
            ++writes;
          }
        }
      }
    }
  }
  EXPECT_EQ(out_of_range, 0);
  EXPECT_EQ(bad_local, 0) << "a walk off its element, a value outside the tile's run, or a padding channel";
  EXPECT_EQ(not_contiguous, 0) << "an anchor's run of a tile is not one contiguous stretch of the output";
  EXPECT_EQ(writes, got.numel()) << "every merged element written once";
  int64_t unwritten = 0;
  for (int64_t i = 0; i < got.numel(); ++i) unwritten += std::isnan(g[i]) ? 1 : 0;
  EXPECT_EQ(unwritten, 0);
  return {got, graph};
}

}  // namespace

// Tolerance: the same operations in the same order; only the sigmoid differs (the kernel's
// 1 / (1 + exp(-v)) against oneDNN's vectorised logistic, ~1 ulp), scaled by up to 2 * stride in
// x / y and 4 * anchor (<= 1492 px) in w / h: |d| <= 1e-5 + 1e-6 * |value|, rel L2 <= 1e-6.
TEST(DetectTail, HostInstantiationRebuildsTheMergedOutput) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  auto ref = load_npz(bus);
  const auto [got, graph] = tail_and_graph(path, ref["input"]);
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(test::close_to(got, graph, 1e-5, 1e-6, 1e-6));
  EXPECT_TRUE(test::close_to(got, ref["output"], 1e-3, 2e-5, 1e-5)) << "against ultralytics' own output";
}

// The GPU engine stores the 255-channel head convolutions with 256 channels per pixel: the tail
// must skip the padding channel and still write every merged element once.
TEST(DetectTail, HostInstantiationPaddedChannels) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "reference/bus.npz");
  auto ref = load_npz(bus);
  const auto [got, graph] = tail_and_graph(path, ref["input"], 8);
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(test::close_to(got, graph, 1e-5, 1e-6, 1e-6));
}

TEST(DetectTail, HostInstantiationBatch2NonSquare) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  const auto [got, graph] = tail_and_graph(path, test::uniform_input({2, 3, 320, 256}, 11));
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(test::close_to(got, graph, 1e-5, 1e-6, 1e-6));
}

// Tiles that do not divide a level's pixel count (7: the last tile of every image is short), and
// tiles of one pixel, with padded channels: still every merged element once, from its own value.
TEST(DetectTail, HostInstantiationOddTiles) {
  YOLOCU_REQUIRE_DATA(path, "models/yolov5n_dyn.onnx");
  const Tensor x = test::uniform_input({2, 3, 256, 320}, 5);
  for (int tile : {7, 1}) {
    const auto [got, graph] = tail_and_graph(path, x, 8, tile);
    ASSERT_FALSE(got.empty());
    EXPECT_TRUE(test::close_to(got, graph, 1e-5, 1e-6, 1e-6)) << "tile " << tile;
  }
}

// The launcher's tile: 32 pixels while they fit 32 KB of shared memory, fewer for wide heads, never
// none.
TEST(DetectTail, TilePixels) {
  EXPECT_EQ(engine::tail::tile_pixels_for(256, 2), 32);   // yolov5's padded 255 channels, FP16: 16 KB
  EXPECT_EQ(engine::tail::tile_pixels_for(256, 4), 32);   // FP32: 32 KB
  EXPECT_EQ(engine::tail::tile_pixels_for(1000, 4), 8);
  EXPECT_EQ(engine::tail::tile_pixels_for(20000, 4), 1);  // over 32 KB for one pixel: still one
}

// A thread's walk (no division per step) visits (j / no, j % no) for every j of its stride, also
// for rows wider than the block (no > stride) and one-channel rows.
TEST(DetectTail, RunWalkMatchesDivision) {
  for (int no : {1, 7, 85, 255, 256, 300, 1000})
    for (int first : {0, 1, 100, 255}) {
      engine::tail::RunWalk wk(first, 256, no);
      for (int j = first; j < 20000; j += 256, wk.next()) {
        ASSERT_EQ(wk.q, j / no) << "no " << no << " j " << j;
        ASSERT_EQ(wk.k, j % no) << "no " << no << " j " << j;
      }
    }
}

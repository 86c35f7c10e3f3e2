// NMS against torchvision (Debian /usr/bin/python3 with torch + torchvision, run at test time by
// nms_oracle.py), and fast NMS against greedy on a hand-built case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "postprocess/postprocess_common.hpp"
#include "postprocess_test_util.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

namespace {

constexpr const char* kSystemPython = "/usr/bin/python3";

Candidates sorted_candidates(const float* boxes, const float* scores, const int64_t* classes,
                             int64_t n) {
  Candidates c;
  for (int64_t i = 0; i < n; ++i)
    c.push_back({Box{boxes[4 * i], boxes[4 * i + 1], boxes[4 * i + 2], boxes[4 * i + 3]},
                 scores[i], static_cast<int>(classes[i]), static_cast<int>(i)});
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    return canonical_before(a.score, a.row, a.class_id, b.score, b.row, b.class_id);
  });
  return c;
}

std::vector<int64_t> kept_rows(const Candidates& c, const std::vector<int>& keep) {
  std::vector<int64_t> r;
  for (int k : keep) r.push_back(c[static_cast<size_t>(k)].row);
  return r;
}

std::vector<int64_t> as_vector(const Tensor& t) {
  return std::vector<int64_t>(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
}

TEST(NmsTorchvision, IdenticalKeepLists) {
  std::string out;
  if (test::run_command(std::string(kSystemPython) + " -c 'import torch, torchvision'", &out) != 0)
    GTEST_SKIP() << "no torch/torchvision in " << kSystemPython << ": " << out;
  const std::string path = test::scratch_dir("postprocess") + "/nms_oracle.npz";
  ASSERT_EQ(test::run_command(std::string(kSystemPython) + " " +
                                  test::oracle_script("nms_oracle.py") + " " + path,
                              &out),
            0)
      << out;
  auto z = load_npz(path);
  const int64_t count = z.at("count").data_as<int64_t>()[0];
  ASSERT_GE(count, 50);
  int unstable_argsort = 0;
  for (int64_t k = 0; k < count; ++k) {
    const std::string p = "c" + std::to_string(k) + "_";
    const Tensor& boxes = z.at(p + "boxes");
    const int64_t n = boxes.dim(0);
    const Candidates c = sorted_candidates(boxes.data_as<float>(), z.at(p + "scores").data_as<float>(),
                                           z.at(p + "classes").data_as<int64_t>(), n);
    PostprocessOptions o;
    o.iou_threshold = static_cast<float>(z.at(p + "iou").data_as<double>()[0]);
    o.max_det = static_cast<int>(std::max<int64_t>(n, 1));
    o.agnostic = true;
    // torchvision's nms sorts with a stable sort: its output order is our canonical order.
    EXPECT_EQ(kept_rows(c, nms_cpu(c, o)), as_vector(z.at(p + "agnostic"))) << "case " << k << " agnostic, n " << n;
    o.agnostic = false;
    const std::vector<int64_t> aware = kept_rows(c, nms_cpu(c, o));
    EXPECT_EQ(aware, as_vector(z.at(p + "aware"))) << "case " << k << " class-aware, n " << n;
    // batched_nms above 4000 coordinates loops over classes and merges with an unstable sort:
    // the same set, in an order unspecified among equal scores.
    const std::vector<int64_t> batched = as_vector(z.at(p + "batched"));
    EXPECT_EQ(std::set<int64_t>(aware.begin(), aware.end()),
              std::set<int64_t>(batched.begin(), batched.end()))
        << "case " << k << " batched_nms, n " << n;
    unstable_argsort += z.at(p + "stable_argsort").data_as<int64_t>()[0] == 0;
  }
  // Documented finding (docs/postprocess.md): torch 1.13's CPU argsort(descending=True) is NOT
  // stable on ties (beyond tiny sizes), so ultralytics' pre-NMS sort orders ties arbitrarily;
  // torchvision's nms itself sorts stably.
  EXPECT_GT(unstable_argsort, 0);
}

TEST(NmsTorchvision, ThresholdComparedAsDouble) {
  // IoU 3/5 in float is 0.6000000238 > 0.6: torchvision (CPU) suppresses; so must we.
  EXPECT_EQ(nms_iou_cut(0.6f), std::nextafter(0.6f, 0.f));
  EXPECT_EQ(nms_iou_cut(0.45f), 0.45f);
  EXPECT_EQ(nms_iou_cut(0.5f), 0.5f);
  EXPECT_EQ(nms_iou_cut(0.f), 0.f);
  EXPECT_EQ(nms_iou_cut(1.f), 1.f);
  Candidates c = {{Box{0, 0, 5, 1}, 0.9f, 0, 0}, {Box{0, 0, 3, 1}, 0.8f, 0, 1}};
  PostprocessOptions o;
  o.iou_threshold = 0.6f;
  EXPECT_EQ(nms_cpu(c, o), (std::vector<int>{0}));
  o.iou_threshold = 0.61f;
  EXPECT_EQ(nms_cpu(c, o), (std::vector<int>{0, 1}));
}

// A: [0,10], B: [6,16], C: [12,22] (height 10): IoU(A,B) = IoU(B,C) = 40/160 = 0.25, IoU(A,C) = 0.
Candidates chain() {
  return {{Box{0, 0, 10, 10}, 0.9f, 0, 0}, {Box{6, 0, 16, 10}, 0.8f, 0, 1},
          {Box{12, 0, 22, 10}, 0.7f, 0, 2}};
}

TEST(FastNms, DiffersFromGreedyOnAChain) {
  PostprocessOptions o;
  o.iou_threshold = 0.2f;
  // Greedy: B is suppressed by A; C overlaps only the suppressed B, so C is kept.
  EXPECT_EQ(nms_cpu(chain(), o), (std::vector<int>{0, 2}));
  // Fast: C is dropped because B (suppressed itself) overlaps it.
  o.nms = NmsMode::kFast;
  EXPECT_EQ(nms_cpu(chain(), o), (std::vector<int>{0}));
  // Above 0.25 nothing overlaps enough: both keep everything.
  o.iou_threshold = 0.25f;
  EXPECT_EQ(nms_cpu(chain(), o), (std::vector<int>{0, 1, 2}));
}

TEST(FastNms, ClassAwareAndMaxDet) {
  Candidates c = chain();
  c[1].class_id = 1;  // B in another class: nothing overlaps within a class
  PostprocessOptions o;
  o.iou_threshold = 0.2f;
  o.nms = NmsMode::kFast;
  EXPECT_EQ(nms_cpu(c, o), (std::vector<int>{0, 1, 2}));
  o.agnostic = true;
  EXPECT_EQ(nms_cpu(c, o), (std::vector<int>{0}));
  o.agnostic = false;
  o.max_det = 2;
  EXPECT_EQ(nms_cpu(c, o), (std::vector<int>{0, 1}));
}

TEST(FastNms, NeverKeepsMoreThanGreedyOnRandomSets) {
  // Every box fast NMS keeps is kept by greedy too (fast only over-suppresses), checked by
  // definition: a fast-kept box has no earlier overlapping box at all.
  uint32_t s = 12345;
  auto rnd = [&s] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 16777216.f;
  };
  for (int trial = 0; trial < 20; ++trial) {
    Candidates c;
    for (int i = 0; i < 300; ++i) {
      const float x = rnd() * 600, y = rnd() * 600;
      c.push_back({Box{x, y, x + 10 + rnd() * 100, y + 10 + rnd() * 100}, rnd(), i % 3, i});
    }
    std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
      return canonical_before(a.score, a.row, a.class_id, b.score, b.row, b.class_id);
    });
    PostprocessOptions o;
    o.max_det = 1000;
    const std::vector<int> greedy = nms_cpu(c, o);
    o.nms = NmsMode::kFast;
    const std::vector<int> fast = nms_cpu(c, o);
    const std::set<int> g(greedy.begin(), greedy.end());
    for (int f : fast) {
      EXPECT_TRUE(g.count(f)) << "trial " << trial;
      for (int i = 0; i < f; ++i)
        EXPECT_FALSE(box_iou(nms_box(c[i].box, c[i].class_id, false),
                              nms_box(c[f].box, c[f].class_id, false)) > 0.45f);
    }
    EXPECT_LE(fast.size(), greedy.size());
  }
}

// iou_exceeds (the CUDA kernels' test, postprocess_common.hpp) skips the division when the boxes
// do not overlap; it must decide exactly as `box_iou(a, b) > cut` for every cut nms_iou_cut can
// return: random continuous, integer (IoUs exactly 1/2, 1/3, 3/5 ...), touching, degenerate
// (x2 < x1, zero area), class-offset, NaN, infinite and tiny (underflowing) boxes.
TEST(IouExceeds, DecidesAsBoxIou) {
  uint32_t s = 777;
  auto rnd = [&s] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 16777216.f;
  };
  std::vector<Box> boxes;
  for (int i = 0; i < 120; ++i) {
    const float x = rnd() * 100, y = rnd() * 100;
    boxes.push_back({x, y, x + rnd() * 60, y + rnd() * 60});
    const float ix = std::floor(rnd() * 8), iy = std::floor(rnd() * 8);
    boxes.push_back({ix, iy, ix + 1 + std::floor(rnd() * 4), iy + 1 + std::floor(rnd() * 4)});
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (const Box& b : std::vector<Box>{{0, 0, 0, 0},
                                       {3, 3, 1, 1},
                                       {0, 0, 2, 0},
                                       {2, 0, 4, 2},
                                       {0, 2, 2, 4},
                                       {nan, 0, 2, 2},
                                       {0, 0, nan, nan},
                                       {-inf, -inf, inf, inf},
                                       {0, 0, inf, 2},
                                       {0, 0, 1e-30f, 1e-30f},
                                       {7680, 7680, 7690, 7690},
                                       {1e-20f, 0, 2e-20f, 1e-20f}})
    boxes.push_back(b);
  int checked = 0, true_count = 0;
  for (float t : {0.f, 1e-7f, 0.25f, 1.f / 3.f, 0.45f, 0.5f, 0.6f, 0.7f, 1.f}) {
    const float cut = nms_iou_cut(t);
    for (const Box& a : boxes)
      for (const Box& b : boxes) {
        const bool ref = box_iou(a, b) > cut;
        ASSERT_EQ(iou_exceeds(a, b, cut), ref)
            << "iou " << t << " a [" << a.x1 << " " << a.y1 << " " << a.x2 << " " << a.y2 << "] b ["
            << b.x1 << " " << b.y1 << " " << b.x2 << " " << b.y2 << "]";
        ++checked;
        true_count += ref;
      }
  }
  EXPECT_GT(true_count, checked / 100);  // overlapping pairs were exercised too
}

// A host model of the CUDA bitmask NMS path (postprocess_bitmask.cuh) against nms_cpu: candidates
// in a shuffled slot order, the slot-order mask (bit j of row i: j later in canonical order and
// iou_exceeds) and ranks as the mask tiles write them, then the 64-candidate blocks of the sweep
// with the kernel's own block resolve (resolve_bitmask_block, shared with the device). The model's
// data flow mirrors the kernel's; the GPU parity tests (PostprocessCuda.BitmaskPath*) check the
// kernel itself.
std::vector<int> bitmask_model(const Candidates& c, const PostprocessOptions& o,
                               std::mt19937& rng) {
  const int n = static_cast<int>(c.size()), W = (n + 63) / 64;
  const float cut = nms_iou_cut(o.iou_threshold);
  std::vector<int> slot_of(static_cast<size_t>(n));  // canonical position -> slot
  for (int i = 0; i < n; ++i) slot_of[static_cast<size_t>(i)] = i;
  std::shuffle(slot_of.begin(), slot_of.end(), rng);
  std::vector<int> pos(static_cast<size_t>(n));  // slot -> canonical position (the key)
  std::vector<Box> box(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    const int s = slot_of[static_cast<size_t>(p)];
    pos[static_cast<size_t>(s)] = p;
    box[static_cast<size_t>(s)] =
        nms_box(c[static_cast<size_t>(p)].box, c[static_cast<size_t>(p)].class_id, o.agnostic);
  }
  std::vector<uint64_t> mask(static_cast<size_t>(n) * W, 0);
  std::vector<int> rank(static_cast<size_t>(n), 0), order(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (pos[j] < pos[i])
        ++rank[static_cast<size_t>(i)];
      else if (pos[j] > pos[i] &&
               iou_exceeds(box[static_cast<size_t>(i)], box[static_cast<size_t>(j)], cut))
        mask[static_cast<size_t>(i) * W + j / 64] |= uint64_t{1} << (j % 64);
    }
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(rank[static_cast<size_t>(i)])] = i;
  std::vector<uint64_t> removed(static_cast<size_t>(W), 0);
  auto is_removed = [&](int s) { return (removed[static_cast<size_t>(s >> 6)] >> (s & 63)) & 1; };
  std::vector<int> keep;
  for (int b = 0; b < W && static_cast<int>(keep.size()) < o.max_det; ++b) {
    const int base = b * 64, m = std::min(64, n - base);
    int slot[64];
    uint64_t diag[64] = {}, alive = 0, suppressors = 0;
    for (int a = 0; a < m; ++a) slot[a] = order[static_cast<size_t>(base + a)];
    for (int a = 0; a < m; ++a) {
      if (is_removed(slot[a])) continue;
      alive |= uint64_t{1} << a;
      for (int k = a + 1; k < m; ++k)
        if ((mask[static_cast<size_t>(slot[a]) * W + slot[k] / 64] >> (slot[k] % 64)) & 1)
          diag[a] |= uint64_t{1} << k;
      if (diag[a]) suppressors |= uint64_t{1} << a;
    }
    const uint64_t kept = resolve_bitmask_block(
        alive, suppressors, [&](int a) { return diag[a]; },
        o.max_det - static_cast<int>(keep.size()));
    for (int a = 0; a < m; ++a)
      if ((kept >> a) & 1) {
        keep.push_back(base + a);
        for (int w = 0; w < W; ++w)
          removed[static_cast<size_t>(w)] |= mask[static_cast<size_t>(slot[a]) * W + w];
      }
  }
  return keep;
}

TEST(BitmaskNmsModel, MatchesGreedyReference) {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  int cases = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int n = trial < 6 ? trial : 1 + static_cast<int>(rng() % 400);
    const int kind = trial % 4;
    Candidates c;
    for (int i = 0; i < n; ++i) {
      Box b;
      float score;
      if (kind == 0) {  // heavy overlap
        const float x = 100 + u(rng) * 60, y = 100 + u(rng) * 60;
        b = {x, y, x + 10 + u(rng) * 40, y + 10 + u(rng) * 40};
        score = 0.05f + u(rng);
      } else if (kind == 1) {  // integer corners: IoUs exactly 1/2, 1/3, 3/5; score ties
        const float x = std::floor(u(rng) * 10), y = std::floor(u(rng) * 10);
        b = {x, y, x + 1 + std::floor(u(rng) * 4), y + 1 + std::floor(u(rng) * 4)};
        score = (1 + std::floor(u(rng) * 8)) / 8;
      } else if (kind == 2 && i >= 4 && i % 4 == 0) {  // identical boxes, tied scores
        b = c[rng() % static_cast<uint32_t>(i)].box;
        score = (1 + std::floor(u(rng) * 8)) / 8;
      } else {  // spread
        const float x = u(rng) * 400, y = u(rng) * 400;
        b = {x, y, x + 8 + u(rng) * 80, y + 8 + u(rng) * 80};
        score = kind == 2 ? (1 + std::floor(u(rng) * 8)) / 8 : 0.01f + u(rng);
      }
      c.push_back({b, score, static_cast<int>(rng() % 3), i});
    }
    std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
      return canonical_before(a.score, a.row, a.class_id, b.score, b.row, b.class_id);
    });
    for (float iou : {0.f, 0.45f, 0.5f, 0.6f, 1.f})
      for (int max_det : {1, 37, 64, 65, 4096})
        for (bool agnostic : {false, true}) {
          PostprocessOptions o;
          o.iou_threshold = iou;
          o.max_det = max_det;
          o.agnostic = agnostic;
          ASSERT_EQ(bitmask_model(c, o, rng), nms_cpu(c, o))
              << "trial " << trial << " n " << n << " kind " << kind << " iou " << iou
              << " max_det " << max_det << (agnostic ? " agnostic" : "");
          ++cases;
        }
  }
  EXPECT_EQ(cases, 60 * 5 * 5 * 2);
}

}  // namespace

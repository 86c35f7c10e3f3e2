// The GPU engine's batch-size plan (host-only, no GPU): anchor sizes, the size a padded run
// executes, the tuned size an untuned one derives from, and what a warm-up must prepare.
#include <gtest/gtest.h>

#include <vector>

#include "engine/cuda/tactics/batch_sizes.hpp"

namespace yolocu {
namespace {

using V = std::vector<int>;

TEST(BatchSizes, AnchorsArePowersOfTwoTheMaxAndTheTunedSizes) {
  EXPECT_EQ(engine::batch_anchors(32, {1, 32}), (V{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(engine::batch_anchors(1, {1}), (V{1}));
  EXPECT_EQ(engine::batch_anchors(12, {1, 12}), (V{1, 2, 4, 8, 12}));
  EXPECT_EQ(engine::batch_anchors(128, {1, 128}), (V{1, 2, 4, 8, 16, 32, 64, 128}));
  // tuned sizes that are not powers of two are anchors too (they run without padding)
  EXPECT_EQ(engine::batch_anchors(32, {3, 24, 32}), (V{1, 2, 3, 4, 8, 16, 24, 32}));
  EXPECT_EQ(engine::batch_anchors(8, {8, 1, 8}), (V{1, 2, 4, 8}));
}

TEST(BatchSizes, RunBatchPadsUpToTheNextAnchor) {
  const V a = engine::batch_anchors(32, {1, 32});
  const int want[33] = {0, 1, 2, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16, 16, 16,
                        32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32};
  for (int n = 1; n <= 32; ++n) EXPECT_EQ(engine::run_batch(n, a), want[n]) << "batch " << n;
  // no padding: every size runs as itself
  for (int n = 1; n <= 32; ++n) EXPECT_EQ(engine::run_batch(n, {}), n);
  // a size past the largest anchor (the caller checks max_batch): the largest
  EXPECT_EQ(engine::run_batch(40, a), 32);
  // never more than twice the images, except up to the next tuned size
  const V b = engine::batch_anchors(100, {1, 100});
  for (int n = 1; n <= 100; ++n) {
    EXPECT_GE(engine::run_batch(n, b), n);
    EXPECT_LE(engine::run_batch(n, b), 2 * n) << "batch " << n;
  }
}

TEST(BatchSizes, NearestTunedInRatioTiesToTheLarger) {
  const V t = {1, 32};
  EXPECT_EQ(engine::nearest_tuned(1, t), 1);
  EXPECT_EQ(engine::nearest_tuned(5, t), 1);   // 5/1 < 32/5
  EXPECT_EQ(engine::nearest_tuned(6, t), 32);  // 6/1 > 32/6
  EXPECT_EQ(engine::nearest_tuned(32, t), 32);
  EXPECT_EQ(engine::nearest_tuned(4, {2, 8}), 8);  // 4/2 == 8/4: the larger
  EXPECT_EQ(engine::nearest_tuned(2, {1, 8, 32}), 1);   // 2/1 < 8/2
  EXPECT_EQ(engine::nearest_tuned(3, {1, 8, 32}), 8);   // 3/1 > 8/3
  EXPECT_EQ(engine::nearest_tuned(20, {1, 8, 32}), 32);
  EXPECT_EQ(engine::nearest_tuned(7, {4}), 4);
}

TEST(BatchSizes, SizesToPrepareAreTheDistinctRunSizesNotReady) {
  V all;
  for (int n = 1; n <= 32; ++n) all.push_back(n);
  const V a = engine::batch_anchors(32, {1, 32});
  // a warm-up of every size 1..32 with padding derives 2, 4, 8 and 16 (1 and 32 were tuned)
  EXPECT_EQ(engine::sizes_to_prepare(all, a, {1, 32}), (V{2, 4, 8, 16}));
  // without padding: all 30 untuned sizes
  V untuned;
  for (int n = 2; n <= 31; ++n) untuned.push_back(n);
  EXPECT_EQ(engine::sizes_to_prepare(all, {}, {1, 32}), untuned);
  EXPECT_EQ(engine::sizes_to_prepare({3, 3, 5}, a, {1, 32, 4}), (V{8}));
  EXPECT_TRUE(engine::sizes_to_prepare({}, a, {1}).empty());
}

}  // namespace
}  // namespace yolocu

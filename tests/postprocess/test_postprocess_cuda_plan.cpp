// Host-side logic of the CUDA post-processing (label cpu: runs without a device): workspace
// sizing and argument validation of plan_postprocess_cuda. Prints the workspace bytes.
#include <gtest/gtest.h>

#include <cstdio>

#include "yolocu/error.hpp"
#include "yolocu/postprocess_cuda.hpp"

using namespace yolocu;

namespace {

constexpr int64_t kRows = 25200;
constexpr int kNc = 80;

TEST(PostprocessCudaPlan, DetectSettingsNeverOverflow) {
  const PostprocessCudaPlan p = plan_postprocess_cuda(1, kRows, kNc, detect_options());
  EXPECT_EQ(p.max_candidates, kRows);  // best class: one candidate per row
  EXPECT_EQ(p.capacity, kRows);        // max_nms 30000 > rows: no slot can stay unused
  EXPECT_FALSE(p.select_passes);
  // everything but the bitmask path's buffers fits in 1 MB
  EXPECT_LT(p.device_bytes - p.bitmask_bytes, size_t{1} << 20);
  EXPECT_EQ(p.nms_shared_bytes, size_t{1000} * 24);
  const PostprocessCudaPlan kept = plan_postprocess_cuda(1, kRows, kNc, detect_options(), 0,
                                                         CudaNmsConfig{CudaNmsPath::kKeptBoxes});
  EXPECT_EQ(kept.bitmask_capacity, 0);
  EXPECT_EQ(kept.bitmask_bytes, 0u);
  EXPECT_LT(kept.device_bytes, size_t{1} << 20);
  EXPECT_EQ(kept.device_bytes, p.device_bytes - p.bitmask_bytes);
}

// n slots: n * ceil(n / 64) mask words + a box (16 B), a rank and an order entry (4 B each),
// plus a tile counter per image, each region rounded up to 256 B.
size_t bitmask_bytes_of(size_t batch, size_t n) {
  auto up = [](size_t v) { return (v + 255) / 256 * 256; };
  return up(batch * n * ((n + 63) / 64) * 8) + up(batch * n * 16) + 2 * up(batch * n * 4) +
         up(batch * 4);
}

TEST(PostprocessCudaPlan, BitmaskPathBoundedByItsBudget) {
  const PostprocessOptions o = detect_options();
  for (int64_t b : {1, 2, 8, 32}) {
    const PostprocessCudaPlan p = plan_postprocess_cuda(b, kRows, kNc, o);
    const size_t n = static_cast<size_t>(p.bitmask_capacity);
    EXPECT_LE(p.bitmask_bytes, kDefaultNmsBitmaskBytes) << "batch " << b;
    EXPECT_EQ(p.bitmask_bytes, bitmask_bytes_of(static_cast<size_t>(b), n)) << "batch " << b;
    // the largest multiple of 64 that fits: 64 more would not
    EXPECT_EQ(n % 64, 0u) << "batch " << b;
    EXPECT_GT(bitmask_bytes_of(static_cast<size_t>(b), n + 64), kDefaultNmsBitmaskBytes)
        << "batch " << b;
    EXPECT_EQ(p.bitmask_min_candidates, kNmsBitmaskAutoMin + 1);
    EXPECT_GT(p.device_bytes, p.bitmask_bytes);
  }
  // 16 MiB: 11,456 candidates per image at batch 1 (11,520 would need 16.87 MB), 1,920 at 32
  EXPECT_EQ(plan_postprocess_cuda(1, kRows, kNc, o).bitmask_capacity, 11456);
  EXPECT_EQ(plan_postprocess_cuda(32, kRows, kNc, o).bitmask_capacity, 1920);
  // a budget leaving <= 512 slots per image: no bitmask path in kAuto
  CudaNmsConfig small_budget;
  small_budget.bitmask_bytes = bitmask_bytes_of(128, 512);
  const PostprocessCudaPlan big = plan_postprocess_cuda(128, kRows, kNc, o, 0, small_budget);
  EXPECT_EQ(big.bitmask_capacity, 0);
  EXPECT_EQ(big.bitmask_bytes, 0u);
  // a capacity below the budget's bound: all slots, not a multiple of 64
  const PostprocessCudaPlan small = plan_postprocess_cuda(1, 1000, 1, o);
  EXPECT_EQ(small.capacity, 1000);
  EXPECT_EQ(small.bitmask_capacity, 1000);
  EXPECT_EQ(small.bitmask_bytes, bitmask_bytes_of(1, 1000));
  // at most kMaxNmsBitmaskCandidates, whatever the budget
  CudaNmsConfig huge;
  huge.bitmask_bytes = size_t{1} << 40;
  PostprocessOptions many = o;
  many.max_nms = 100000;
  EXPECT_EQ(plan_postprocess_cuda(1, 60000, 1, many, 0, huge).bitmask_capacity,
            kMaxNmsBitmaskCandidates);
  // kAuto with 512 candidates at most: never crowded, no bitmask memory
  EXPECT_EQ(plan_postprocess_cuda(1, 512, 1, o).bitmask_capacity, 0);
  EXPECT_EQ(plan_postprocess_cuda(1, 513, 1, o).bitmask_capacity, 513);
}

TEST(PostprocessCudaPlan, BitmaskPathOptions) {
  PostprocessOptions o = detect_options();
  CudaNmsConfig forced{CudaNmsPath::kBitmask};
  // forced: every count from 1 up
  const PostprocessCudaPlan f = plan_postprocess_cuda(1, 100, 2, o, 0, forced);
  EXPECT_EQ(f.bitmask_capacity, 100);
  EXPECT_EQ(f.bitmask_min_candidates, 1);  // an empty image has nothing to sweep
  EXPECT_EQ(f.nms_path, CudaNmsPath::kBitmask);
  // fast NMS: no bitmask path in kAuto, an error when forced
  o.nms = NmsMode::kFast;
  EXPECT_EQ(plan_postprocess_cuda(1, kRows, kNc, o).bitmask_capacity, 0);
  EXPECT_THROW(plan_postprocess_cuda(1, kRows, kNc, o, 0, forced), Error);
  o.nms = NmsMode::kGreedy;
  // a budget without room for 64 candidates: an error when forced, no bitmask path in kAuto
  CudaNmsConfig tiny{CudaNmsPath::kBitmask, 1000};
  try {
    plan_postprocess_cuda(1, kRows, kNc, o, 0, tiny);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("bitmask_bytes"), std::string::npos) << e.what();
  }
  tiny.path = CudaNmsPath::kAuto;
  EXPECT_EQ(plan_postprocess_cuda(1, kRows, kNc, o, 0, tiny).bitmask_capacity, 0);
  CudaNmsConfig bad;
  bad.path = static_cast<CudaNmsPath>(7);
  EXPECT_THROW(plan_postprocess_cuda(1, kRows, kNc, o, 0, bad), Error);
  // the slot limit bounds the bitmask path too
  EXPECT_EQ(plan_postprocess_cuda(1, kRows, kNc, val_options(), 700, forced).bitmask_capacity, 700);
}

TEST(PostprocessCudaPlan, ValSettingsBoundedMemory) {
  const PostprocessCudaPlan p1 = plan_postprocess_cuda(1, kRows, kNc, val_options());
  EXPECT_EQ(p1.max_candidates, kRows * kNc);
  EXPECT_EQ(p1.capacity, 30000);
  EXPECT_TRUE(p1.select_passes);
  const PostprocessCudaPlan p32 = plan_postprocess_cuda(32, kRows, kNc, val_options());
  EXPECT_EQ(p32.capacity, 30000);
  // 8 B per slot + 6 x 2048-bin histograms: well under 16 MB at batch 32, plus the bitmask path
  EXPECT_GT(p32.device_bytes, size_t{32} * 30000 * 8);
  EXPECT_LT(p32.device_bytes - p32.bitmask_bytes, size_t{16} << 20);
  EXPECT_LE(p32.bitmask_bytes, kDefaultNmsBitmaskBytes);
  EXPECT_EQ(p32.pinned_bytes, size_t{32} * 8 + size_t{32} * 300 * 24);
}

TEST(PostprocessCudaPlan, PrintsWorkspaceBytes) {
  std::printf("%-8s %-6s %12s %12s %12s %8s %14s %12s\n", "setting", "batch", "slots/img",
              "device B", "pinned B", "select", "bitmask slots", "bitmask B");
  for (int val = 0; val < 2; ++val)
    for (int64_t b : {1, 32}) {
      const PostprocessCudaPlan p =
          plan_postprocess_cuda(b, kRows, kNc, val ? val_options() : detect_options());
      std::printf("%-8s %-6lld %12lld %12zu %12zu %8s %14lld %12zu\n", val ? "val" : "detect",
                  static_cast<long long>(b), static_cast<long long>(p.capacity), p.device_bytes,
                  p.pinned_bytes, p.select_passes ? "yes" : "no",
                  static_cast<long long>(p.bitmask_capacity), p.bitmask_bytes);
    }
}

TEST(PostprocessCudaPlan, CapacityClampedAndFilterCounted) {
  PostprocessOptions o = val_options();
  EXPECT_EQ(plan_postprocess_cuda(1, kRows, kNc, o, 1000).capacity, 1000);
  EXPECT_EQ(plan_postprocess_cuda(1, kRows, kNc, o, 50000).capacity, 30000);  // max_nms
  o.classes = {0, 0, 3, 200};  // 200 >= nc never matches; duplicates count once
  const PostprocessCudaPlan f = plan_postprocess_cuda(1, kRows, kNc, o);
  EXPECT_EQ(f.max_candidates, kRows * 2);
  EXPECT_TRUE(f.select_passes);
  o.classes = {500};
  const PostprocessCudaPlan none = plan_postprocess_cuda(1, kRows, kNc, o);
  EXPECT_EQ(none.max_candidates, 0);
  EXPECT_EQ(none.capacity, 1);
  EXPECT_FALSE(none.select_passes);
  PostprocessOptions d = detect_options();
  d.max_nms = 100;
  const PostprocessCudaPlan small = plan_postprocess_cuda(2, kRows, kNc, d);
  EXPECT_EQ(small.capacity, 100);
  EXPECT_TRUE(small.select_passes);
}

TEST(PostprocessCudaPlan, RejectsBadArguments) {
  const PostprocessOptions o = detect_options();
  EXPECT_THROW(plan_postprocess_cuda(0, kRows, kNc, o), Error);
  EXPECT_THROW(plan_postprocess_cuda(kMaxCudaBatch + 1, kRows, kNc, o), Error);
  EXPECT_THROW(plan_postprocess_cuda(1, 0, kNc, o), Error);
  EXPECT_THROW(plan_postprocess_cuda(1, kRows, 0, o), Error);
  EXPECT_THROW(plan_postprocess_cuda(1, int64_t{1} << 30, 2, o), Error);  // rows * nc >= 2^31
  EXPECT_THROW(plan_postprocess_cuda(1, kRows, kNc, o, -1), Error);
  PostprocessOptions big = o;
  big.max_det = kMaxCudaMaxDet + 1;
  EXPECT_THROW(plan_postprocess_cuda(1, kRows, kNc, big), Error);
  PostprocessOptions bad = o;
  bad.conf_threshold = 2.f;
  EXPECT_THROW(plan_postprocess_cuda(1, kRows, kNc, bad), Error);
  bad = o;
  bad.max_nms = 0;
  EXPECT_THROW(plan_postprocess_cuda(1, kRows, kNc, bad), Error);
  try {
    plan_postprocess_cuda(1, kRows, kNc, big);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_det"), std::string::npos) << e.what();
  }
}

}  // namespace

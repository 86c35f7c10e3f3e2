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
  EXPECT_LT(p.device_bytes, size_t{1} << 20);
  EXPECT_EQ(p.nms_shared_bytes, size_t{1000} * 24);
}

TEST(PostprocessCudaPlan, ValSettingsBoundedMemory) {
  const PostprocessCudaPlan p1 = plan_postprocess_cuda(1, kRows, kNc, val_options());
  EXPECT_EQ(p1.max_candidates, kRows * kNc);
  EXPECT_EQ(p1.capacity, 30000);
  EXPECT_TRUE(p1.select_passes);
  const PostprocessCudaPlan p32 = plan_postprocess_cuda(32, kRows, kNc, val_options());
  EXPECT_EQ(p32.capacity, 30000);
  // 8 B per slot + 6 x 2048-bin histograms + results: well under 16 MB at batch 32
  EXPECT_GT(p32.device_bytes, size_t{32} * 30000 * 8);
  EXPECT_LT(p32.device_bytes, size_t{16} << 20);
  EXPECT_EQ(p32.pinned_bytes, size_t{32} * 8 + size_t{32} * 300 * 24);
}

TEST(PostprocessCudaPlan, PrintsWorkspaceBytes) {
  std::printf("%-8s %-6s %12s %12s %12s %8s\n", "setting", "batch", "slots/img", "device B",
              "pinned B", "select");
  for (int val = 0; val < 2; ++val)
    for (int64_t b : {1, 32}) {
      const PostprocessCudaPlan p =
          plan_postprocess_cuda(b, kRows, kNc, val ? val_options() : detect_options());
      std::printf("%-8s %-6lld %12lld %12zu %12zu %8s\n", val ? "val" : "detect",
                  static_cast<long long>(b), static_cast<long long>(p.capacity), p.device_bytes,
                  p.pinned_bytes, p.select_passes ? "yes" : "no");
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

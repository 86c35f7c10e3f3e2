// DeviceBudget: the byte budget behind max_device_memory (charged before every device allocation
// of an engine or a detector context). Host-only logic: runs without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/device_budget.hpp"
#include "yolocu/error.hpp"

namespace yolocu::detail {
namespace {

TEST(DeviceBudget, ChargesUpToTheLimitAndNamesWhatDoesNotFit) {
  DeviceBudget b(10u << 20, "max_device_memory");
  b.charge(6u << 20, "activations");
  b.charge(4u << 20, "weights");  // exactly the limit
  EXPECT_EQ(b.used(), 10u << 20);
  try {
    b.charge(1, "the input images' upload buffer");
    FAIL() << "no error over the budget";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    const std::string m = e.what();
    EXPECT_NE(m.find("device memory budget of 10.0 MiB (max_device_memory)"), std::string::npos) << m;
    EXPECT_NE(m.find("the input images' upload buffer needs 1 bytes with 10.0 MiB already in use"), std::string::npos) << m;
  }
  EXPECT_EQ(b.used(), 10u << 20) << "a refused charge leaves nothing charged";
  b.refund(4u << 20);
  b.charge(3u << 20, "workspace");
  EXPECT_EQ(b.used(), 9u << 20);
}

TEST(DeviceBudget, NoLimitCountsOnlyAndHugeChargesDoNotWrap) {
  DeviceBudget unlimited(0, "max_device_memory");
  unlimited.charge(size_t{1} << 40, "a lot");
  EXPECT_EQ(unlimited.used(), uint64_t{1} << 40);
  DeviceBudget b(100, "max_device_memory");
  b.charge(50, "a");
  EXPECT_THROW(b.charge(SIZE_MAX, "wrap"), Error);  // used + bytes would wrap around
  EXPECT_THROW(b.charge(101, "over"), Error);
  b.refund(1000);  // more than charged: clamps at zero
  EXPECT_EQ(b.used(), 0u);
  b.set_limit(1);  // what a context gets when the engine took the whole budget
  EXPECT_THROW(b.charge(2, "anything"), Error);
}

TEST(DeviceBudget, ThreadsNeverOvercommit) {
  DeviceBudget b(1000, "max_device_memory");
  std::vector<std::thread> ts;
  std::vector<int> granted(8, 0);
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        try {
          b.charge(7, "x");
          ++granted[static_cast<size_t>(t)];
        } catch (const Error&) {
        }
      }
    });
  for (auto& t : ts) t.join();
  int total = 0;
  for (int g : granted) total += g;
  EXPECT_EQ(total, 1000 / 7);
  EXPECT_EQ(b.used(), static_cast<uint64_t>(total) * 7);
}

TEST(DeviceBudget, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(uint64_t{64} << 20), "64.0 MiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 30), "3.00 GiB");
}

}  // namespace
}  // namespace yolocu::detail

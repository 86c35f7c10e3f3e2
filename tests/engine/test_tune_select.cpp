// The tuner's pure parts (host-only, no GPU): the two-stage choice of the fastest candidate and the
// tuning-time breakdown line.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/cuda/tactics/tune_select.hpp"

namespace yolocu {
namespace {

using engine::pick_fastest;
using engine::retime_set;
using engine::TacticFamily;
using engine::TuneBreakdown;
using engine::TuneTiming;

TEST(TuneSelect, PickFastestSkipsFailuresAndTakesTheFirstOfEqualTimes) {
  EXPECT_EQ(pick_fastest({}), -1);
  EXPECT_EQ(pick_fastest({-1, -1}), -1);
  EXPECT_EQ(pick_fastest({5.0, 3.0, 4.0}), 1);
  EXPECT_EQ(pick_fastest({-1, 3.0, 3.0, 7.0}), 1);
  EXPECT_EQ(pick_fastest({0.0, -1, 2.0}), 0);
}

// Derived batch sizes without runtime compilation: the fastest candidate whose build compiles
// nothing, only when the winner's does.
TEST(TuneSelect, PickPlainTakesTheFastestCandidateThatCompilesNothing) {
  using engine::pick_plain;
  const std::vector<double> us = {3.0, 5.0, -1, 4.0, 4.0};
  EXPECT_EQ(pick_plain(us, {true, false, false, false, false}, 0), 3) << "fastest plain, first of equal times";
  EXPECT_EQ(pick_plain(us, {true, true, false, true, false}, 0), 4) << "a failed plain one is left out";
  EXPECT_EQ(pick_plain(us, {false, true, true, true, true}, 0), -1) << "the winner compiles nothing itself";
  EXPECT_EQ(pick_plain(us, {true, true, false, true, true}, 0), -1) << "no plain candidate with a time";
  EXPECT_EQ(pick_plain({}, {}, -1), -1) << "nothing passed";
  EXPECT_EQ(pick_plain({2.0, 9.0}, {true, false}, 0), 1) << "however slow: the caller decides";
}

TEST(TuneSelect, RetimeSetKeepsThoseWithinTheMarginInIndexOrder) {
  EXPECT_TRUE(retime_set({}, TuneTiming::kRetimeMargin).empty());
  EXPECT_TRUE(retime_set({-1, -1}, TuneTiming::kRetimeMargin).empty());
  // best 4.0: limit 5.0 (inclusive); failed entries never make it.
  const std::vector<size_t> r = retime_set({6.0, 4.0, 5.0, -1, 5.01, 4.5}, 1.25);
  EXPECT_EQ(r, (std::vector<size_t>{1, 2, 5}));
  EXPECT_EQ(retime_set({3.0}, 1.25), (std::vector<size_t>{0}));
}

// The two stages as the tuner runs them: the full sweep picks among the brief sweep's finalists,
// so a candidate far slower in the brief sweep never wins; within the margin, the full sweep decides.
TEST(TuneSelect, TwoStagesAgreeWithTheFullSweepOutsideTheNoise) {
  const std::vector<double> brief = {10.0, 8.1, 20.0, 8.0, -1, 9.9};
  const std::vector<double> full_of_all = {10.2, 7.9, 19.0, 8.05, -1, 9.8};  // what a full sweep of all would give
  const std::vector<size_t> fin = retime_set(brief, TuneTiming::kRetimeMargin);
  ASSERT_EQ(fin, (std::vector<size_t>{0, 1, 3, 5}));
  std::vector<double> full;
  for (size_t i : fin) full.push_back(full_of_all[i]);
  const int f = pick_fastest(full);
  ASSERT_GE(f, 0);
  EXPECT_EQ(static_cast<int>(fin[static_cast<size_t>(f)]), pick_fastest(full_of_all));
}

TEST(TuneSelect, TimingConstants) {
  EXPECT_GE(TuneTiming::kReps, 1);
  EXPECT_GE(TuneTiming::kQuickTimings, 1);
  EXPECT_GE(TuneTiming::kTimings, TuneTiming::kQuickTimings);
  EXPECT_GT(TuneTiming::kRetimeMargin, 1.0);
}

TEST(TuneSelect, FamilyOfId) {
  EXPECT_EQ(engine::family_of("cudnn-graph:e4;24=26"), TacticFamily::kCudnnGraph);
  EXPECT_EQ(engine::family_of("cudnn:IMPLICIT_PRECOMP_GEMM"), TacticFamily::kCudnnLegacy);
  EXPECT_EQ(engine::family_of("own:igemm-bm64"), TacticFamily::kOwn);
  EXPECT_EQ(engine::family_of("cutlass:tb128x64x32-s4"), TacticFamily::kCutlass);
  EXPECT_STREQ(engine::family_name(TacticFamily::kCutlass), "cutlass");
  EXPECT_STREQ(engine::family_name(TacticFamily::kCudnnGraph), "cudnn-graph");
}

TEST(TuneSelect, BreakdownMergesAndDescribesItself) {
  TuneBreakdown a, b;
  a.add_build("cudnn-graph:e1", 120.0, true);
  a.add_build("cudnn-graph:e2", 30.0, false);
  a.add_builds(TacticFamily::kCudnnLegacy, 2.0, 5);
  b.add_build("cudnn-graph:e9;3=1", 400.0, true);
  b.add_builds(TacticFamily::kOwn, 1.0, 2);
  b.check_ms = 7;
  b.checks = 3;
  a.merge(b);
  EXPECT_EQ(a.built[0], 2);
  EXPECT_EQ(a.built[1], 5);
  EXPECT_EQ(a.built[2], 2);
  EXPECT_EQ(a.build_failed, 1);
  EXPECT_DOUBLE_EQ(a.build_ms[0], 550.0);
  EXPECT_DOUBLE_EQ(a.slowest_build_ms, 400.0);
  EXPECT_EQ(a.slowest_build, "cudnn-graph:e9;3=1");
  EXPECT_EQ(a.checks, 3);

  a.prebuild_wall_ms = 600;
  a.prebuild_threads = 16;
  a.choose_ms = 300;
  const std::string line = engine::describe(a);
  EXPECT_EQ(line.rfind("tune breakdown: prebuild wall 600 ms on 16 threads", 0), 0u) << line;
  EXPECT_NE(line.find("build 553 thread-ms over 9 plans + 1 failed"), std::string::npos) << line;
  EXPECT_NE(line.find("slowest 400 ms cudnn-graph:e9;3=1"), std::string::npos) << line;
  EXPECT_NE(line.find("check 7 ms over 3"), std::string::npos) << line;
  EXPECT_EQ(line.find("total"), std::string::npos) << "no total before the engine sets it: " << line;
  EXPECT_EQ(line.find("winners"), std::string::npos) << "no winners before a layer is tuned: " << line;
  a.add_win("cudnn-graph:e4", 0);
  a.add_win("cudnn-graph:e7", 2);
  b = TuneBreakdown{};
  b.add_win("cudnn-graph:e4", 40);  // past the last bin: counted in it
  b.add_win("own:igemm-bm64", -1);
  b.add_win("cudnn:IMPLICIT_PRECOMP_GEMM", -1);
  b.add_win("cutlass:tb64x64x32-s5", -1);
  a.merge(b);
  EXPECT_EQ(a.wins[0], 3);
  EXPECT_EQ(a.graph_win_rank[TuneBreakdown::kRankBins - 1], 1);
  EXPECT_NE(engine::describe(a).find("winners: cudnn-graph 3, legacy 1, own 1, cutlass 1 (cudnn-graph by place in cuDNN's list: 1 0 1 0"),
            std::string::npos)
      << engine::describe(a);
  a.total_ms = 1000;
  a.cache_io_ms = 20;
  EXPECT_NE(engine::describe(a).find("cache file 20 ms, other 80 ms, total 1000 ms"), std::string::npos);
}

// What a cap on the graph plans per layer would cost: the fastest brief time among the kept
// candidates (graph plans before the cap, every other family) minus the fastest of all.
TEST(TuneSelect, CapCostsPriceASmallerMaxGraphPlans) {
  TuneBreakdown b;
  EXPECT_EQ(engine::describe(b).find("capped at"), std::string::npos) << "nothing priced before a layer";
  // layer 1: the best (10 us) is graph plan 8; plan 5 takes 12, plan 2 takes 15, a legacy one 14
  b.add_cap_costs({15.0, 12.0, 10.0, 14.0, -1.0}, {2, 5, 8, -1, 0});
  EXPECT_DOUBLE_EQ(b.brief_best_us, 10.0);
  EXPECT_DOUBLE_EQ(b.cap_loss_us[0], 4.0);  // cap 4: plan 2 (15) or legacy (14) -> 14
  EXPECT_DOUBLE_EQ(b.cap_loss_us[1], 2.0);  // cap 7: plan 5 -> 12
  EXPECT_DOUBLE_EQ(b.cap_loss_us[2], 0.0);  // cap 10: plan 8 kept
  // layer 2: only graph plans at places 6 and 9 passed: a cap of 4 keeps none (counted as the whole)
  TuneBreakdown c;
  c.add_cap_costs({20.0, 18.0}, {6, 9});
  b.merge(c);
  EXPECT_DOUBLE_EQ(b.brief_best_us, 28.0);
  EXPECT_DOUBLE_EQ(b.cap_loss_us[0], 4.0 + 18.0);
  EXPECT_DOUBLE_EQ(b.cap_loss_us[1], 2.0 + 2.0);
  EXPECT_DOUBLE_EQ(b.cap_loss_us[2], 0.0 + 0.0);
  EXPECT_NE(engine::describe(b).find("capped at 4 / 7 / 10 graph plans: +22.0 / +4.0 / +0.0 us over the tuned layers' 28.0 us"),
            std::string::npos)
      << engine::describe(b);
}

}  // namespace
}  // namespace yolocu

// LAPJV against brute force over all permutations on small random matrices (ties included), and
// linear_assignment's cost-limit semantics (lap.lapjv(extend_cost=True, cost_limit)).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "track/lapjv.hpp"
#include "yolocu/error.hpp"

namespace yolocu::track {
namespace {

double total(const std::vector<double>& c, int n, const std::vector<int>& x) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += c[i * n + x[i]];
  return s;
}

double brute_force(const std::vector<double>& c, int n) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  double best = std::numeric_limits<double>::infinity();
  do best = std::min(best, total(c, n, p));
  while (std::next_permutation(p.begin(), p.end()));
  return best;
}

TEST(Lapjv, MatchesBruteForceOnRandomMatrices) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + trial % 7;
    std::vector<double> c(n * n);
    const bool ties = trial % 3 == 0;  // small integers: many equal costs
    for (double& v : c) v = ties ? double(rng() % 4) : std::uniform_real_distribution<double>(-5, 10)(rng);
    const std::vector<int> x = lapjv(c, n);
    std::vector<int> sorted = x;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "not a permutation, trial " << trial;
    ASSERT_NEAR(total(c, n, x), brute_force(c, n), 1e-9) << "trial " << trial << " n " << n;
  }
}

TEST(Lapjv, EmptyAndBadInput) {
  EXPECT_TRUE(lapjv({}, 0).empty());
  EXPECT_THROW(lapjv({1, 2, 3}, 2), Error);
  EXPECT_THROW(lapjv({1, std::numeric_limits<double>::quiet_NaN(), 3, 4}, 2), Error);
}

TEST(LinearAssignment, CostLimitLeavesExpensivePairsUnmatched) {
  // rows 0,1 x cols 0,1,2; limit 0.5: (0,1)=0.1 and (1,0)=0.3 match, (1,2)=0.6 would exceed it
  const std::vector<double> c = {0.9, 0.1, 0.8,  //
                                 0.3, 0.7, 0.6};
  const Assignment a = linear_assignment(c, 2, 3, 0.5);
  ASSERT_EQ(a.matches.size(), 2u);
  EXPECT_EQ(a.matches[0], std::make_pair(0, 1));
  EXPECT_EQ(a.matches[1], std::make_pair(1, 0));
  EXPECT_TRUE(a.unmatched_rows.empty());
  EXPECT_EQ(a.unmatched_cols, std::vector<int>{2});
  const Assignment none = linear_assignment(c, 2, 3, 0.05);
  EXPECT_TRUE(none.matches.empty());
  EXPECT_EQ(none.unmatched_rows, (std::vector<int>{0, 1}));
  EXPECT_EQ(none.unmatched_cols, (std::vector<int>{0, 1, 2}));
}

TEST(LinearAssignment, PrefersTwoCheapPairsOverOneCheaperWithinTheLimit) {
  // limit 0.8: matching (0,0)=0.05 alone leaves row 1 and col 1 unmatched (0.05 + 0.8), while
  // (0,1)=0.3 + (1,0)=0.3 = 0.6 is cheaper: the extended problem takes the pair of matches
  const std::vector<double> c = {0.05, 0.3,  //
                                 0.3,  0.95};
  const Assignment a = linear_assignment(c, 2, 2, 0.8);
  ASSERT_EQ(a.matches.size(), 2u);
  EXPECT_EQ(a.matches[0], std::make_pair(0, 1));
  EXPECT_EQ(a.matches[1], std::make_pair(1, 0));
}

TEST(LinearAssignment, EmptySides) {
  const Assignment a = linear_assignment({}, 0, 3, 0.8);
  EXPECT_TRUE(a.matches.empty());
  EXPECT_EQ(a.unmatched_cols, (std::vector<int>{0, 1, 2}));
  const Assignment b = linear_assignment({}, 2, 0, 0.8);
  EXPECT_EQ(b.unmatched_rows, (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace yolocu::track

#include <gtest/gtest.h>

#include <random>

#include "engine/memory_plan.hpp"

using namespace yolocu::engine;

TEST(MemoryPlan, NoOverlapBetweenLiveBuffers) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferRequest> reqs;
    for (int i = 0; i < 60; ++i) {
      const int a = static_cast<int>(rng() % 40), len = static_cast<int>(rng() % 8);
      reqs.push_back({1 + rng() % 100000, a, a + len});
    }
    const MemoryPlan p = plan_memory(reqs, 64);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(p.offsets[i] % 64, 0u);
      EXPECT_LE(p.offsets[i] + reqs[i].bytes, p.total_bytes);
      for (size_t j = i + 1; j < reqs.size(); ++j) {
        const bool live_together = !(reqs[i].last < reqs[j].first || reqs[j].last < reqs[i].first);
        const bool bytes_overlap = p.offsets[i] < p.offsets[j] + reqs[j].bytes && p.offsets[j] < p.offsets[i] + reqs[i].bytes;
        EXPECT_FALSE(live_together && bytes_overlap) << i << " and " << j;
      }
    }
    EXPECT_LE(p.total_bytes, p.naive_bytes);
  }
}

TEST(MemoryPlan, ChainReusesTwoBuffers) {
  // A chain a->b->c->d: each value dies when the next is written, so two slots suffice.
  std::vector<BufferRequest> reqs = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  const MemoryPlan p = plan_memory(reqs, 64);
  EXPECT_EQ(p.total_bytes, 2 * 1024u);
}

TEST(MemoryPlan, MaySharePredicateKeepsRefusedPairsApart) {
  // The same chain; the predicate refuses a (0) -> c (2): a and c no longer share, b and d still
  // may take the others' bytes; random lifetimes with a random refusal never overlap a refused pair.
  std::vector<BufferRequest> reqs = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  const MemoryPlan p = plan_memory(reqs, 64, [](size_t earlier, size_t later) { return !(earlier == 0 && later == 2); });
  EXPECT_NE(p.offsets[0], p.offsets[2]);
  EXPECT_EQ(p.total_bytes, 3 * 1024u);
  std::mt19937 rng(2);
  std::vector<BufferRequest> many;
  for (int i = 0; i < 60; ++i) {
    const int a = static_cast<int>(rng() % 40), len = static_cast<int>(rng() % 8);
    many.push_back({1 + rng() % 100000, a, a + len});
  }
  const auto refuse = [](size_t a, size_t b) { return (a * 7 + b * 3) % 4 != 0; };
  const MemoryPlan q = plan_memory(many, 64, refuse);
  for (size_t i = 0; i < many.size(); ++i)
    for (size_t j = 0; j < many.size(); ++j) {
      if (i == j || !(many[i].last < many[j].first) || refuse(i, j)) continue;
      const bool bytes_overlap = q.offsets[i] < q.offsets[j] + many[j].bytes && q.offsets[j] < q.offsets[i] + many[i].bytes;
      EXPECT_FALSE(bytes_overlap) << i << " and " << j << " share bytes although refused";
    }
}

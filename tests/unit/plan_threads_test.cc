// Planning on several threads: forEachConcurrently runs every index once
// and rethrows the lowest failure after all have finished; judged plans
// are the same on one thread and on many, and planned at once as one by
// one.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/cost/cost_model.h"
#include "algorithms/planner/concurrent.h"
#include "algorithms/planner/plan_store.h"
#include "base/config.h"
#include "unit/link_presets.h"
#include "unit/topo_fixtures.h"

namespace grove::plan {
namespace {

TEST(PlanThreads, EveryIndexOnceWhateverTheThreads) {
  for (int threads : {1, 2, 8}) {
    for (size_t n : {0u, 1u, 5u, 64u}) {
      std::vector<std::atomic<int>> calls(n);
      detail::forEachConcurrently(n, threads, [&](size_t i) { ++calls[i]; });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(calls[i].load(), 1) << threads << " " << i;
    }
  }
}

TEST(PlanThreads, TheLowestFailureAfterAllFinished) {
  for (int threads : {1, 3}) {
    std::atomic<int> done{0};
    try {
      detail::forEachConcurrently(10, threads, [&](size_t i) {
        ++done;
        if (i == 7 || i == 4) throw std::runtime_error("index " + std::to_string(i));
      });
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "index 4");
    }
    EXPECT_EQ(done.load(), 10);  // the others ran to the end
  }
}

TEST(PlanThreads, ConfiguredThreads) {
  config::setOverride("GROVE_PLAN_THREADS", "3");
  EXPECT_EQ(detail::planThreads(), 3);
  config::setOverride("GROVE_PLAN_THREADS", "0");
  EXPECT_GE(detail::planThreads(), 1);
  config::setOverride("GROVE_PLAN_THREADS", std::nullopt);
}

/// The judged all-reduce and broadcast plans of DGX-1 V100 GPUs 0-5 with
/// GROVE_PLAN_THREADS = threads.
std::vector<TreePlan> judgedPlans(const char* threads) {
  config::setOverride("GROVE_PLAN_THREADS", threads);
  const topo::CommTopology t =
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3, 4, 5});
  const Selector sel(6, presets::deviceRingTraits(), SelectorConfig{});
  TopoPlans plans(PlanGraph::fromTopology(t));
  installTreeJudges(plans, sel, SimParams{}, 16ull << 20);
  std::vector<TreePlan> out = {plans.allReduceTrees(), plans.rootedTrees(0)};
  config::setOverride("GROVE_PLAN_THREADS", std::nullopt);
  return out;
}

void expectSameTrees(const std::vector<Tree>& a, const std::vector<Tree>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].parent, b[i].parent);
    EXPECT_EQ(a[i].upParent, b[i].upParent);
    EXPECT_EQ(a[i].down, b[i].down);
    EXPECT_EQ(a[i].up, b[i].up);
    EXPECT_EQ(a[i].rate, b[i].rate);  // exactly
    EXPECT_EQ(a[i].channels, b[i].channels);
  }
}

TEST(PlanThreads, JudgedPlansAreTheSameOnOneThreadAndMany) {
  const std::vector<TreePlan> one = judgedPlans("1"), many = judgedPlans("4");
  ASSERT_EQ(one.size(), many.size());
  for (size_t p = 0; p < one.size(); ++p) {
    EXPECT_GT(one[p].judged, 1);
    expectSameTrees(one[p].trees, many[p].trees);
    ASSERT_EQ(one[p].larger.size(), many[p].larger.size());
    for (size_t k = 0; k < one[p].larger.size(); ++k) {
      EXPECT_EQ(one[p].larger[k].fromBytes, many[p].larger[k].fromBytes);
      expectSameTrees(one[p].larger[k].trees, many[p].larger[k].trees);
    }
  }
}

TEST(PlanThreads, AllReducePlansAtOnceAreThoseMadeOneByOne) {
  // planAllReduce plans the rings, the trees and the hierarchical plan on
  // threads of their own; each is the plan asked for alone, and each goes
  // to the store (the next communicator plans nothing).
  const topo::CommTopology t =
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3, 4, 5});
  const Selector sel(6, presets::deviceRingTraits(), SelectorConfig{});
  PlanStore::process().clearMemory();
  TopoPlans together(PlanGraph::fromTopology(t)), alone(PlanGraph::fromTopology(t));
  installTreeJudges(together, sel, SimParams{}, 16ull << 20);
  installTreeJudges(alone, sel, SimParams{}, 16ull << 20);
  together.useStore(&PlanStore::process());
  const uint64_t saves = PlanStore::process().saves();
  together.planAllReduce();
  EXPECT_EQ(PlanStore::process().saves(), saves + 4) << "rings, NCCL-like rings, trees, hier";
  const TreePlan& trees = alone.allReduceTrees();
  expectSameTrees(together.allReduceTrees().trees, trees.trees);
  ASSERT_EQ(together.allReduceTrees().larger.size(), trees.larger.size());
  for (size_t k = 0; k < trees.larger.size(); ++k)
    expectSameTrees(together.allReduceTrees().larger[k].trees, trees.larger[k].trees);
  for (auto rings : {&TopoPlans::rings, &TopoPlans::ncclRings}) {
    const RingPlan& a = (together.*rings)();
    const RingPlan& b = (alone.*rings)();
    ASSERT_EQ(a.rings.size(), b.rings.size());
    for (size_t r = 0; r < a.rings.size(); ++r) EXPECT_EQ(a.rings[r].order, b.rings[r].order);
  }
  EXPECT_EQ(together.hierarchical().leaders, alone.hierarchical().leaders);
  TopoPlans next(PlanGraph::fromTopology(t));
  installTreeJudges(next, sel, SimParams{}, 16ull << 20);
  next.useStore(&PlanStore::process());
  const uint64_t hits = PlanStore::process().hits();
  next.planAllReduce();
  EXPECT_EQ(PlanStore::process().hits(), hits + 4);
  expectSameTrees(next.allReduceTrees().trees, trees.trees);
  PlanStore::process().clearMemory();
}

}  // namespace
}  // namespace grove::plan

// Fair shares (fair_share.cc): water-filling against hand-computed rates,
// the channels and shares a packing gets on a real fixture, and the tree
// builder running the channels the plan gives.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "algorithms/builders/builders.h"
#include "algorithms/planner/planner_internal.h"
#include "algorithms/planner/topo_plans.h"
#include "unit/topo_fixtures.h"

namespace grove::plan {
namespace {

using detail::fairRates;
using detail::shareFairly;

TEST(FairShare, StreamsShareALinkEqually) {
  // Link 0 (10 GB/s) is crossed by both trees; A also crosses link 2, B link 1.
  const std::vector<double> cap{10, 10, 100};
  const std::vector<std::map<int, int>> uses{{{0, 1}, {2, 1}}, {{0, 1}, {1, 1}}};
  std::vector<double> r = fairRates(uses, {1, 1}, cap);
  EXPECT_DOUBLE_EQ(r[0], 5);
  EXPECT_DOUBLE_EQ(r[1], 5);
  // Three streams of A and one of B: A takes three quarters of link 0.
  r = fairRates(uses, {3, 1}, cap);
  EXPECT_DOUBLE_EQ(r[0], 7.5);
  EXPECT_DOUBLE_EQ(r[1], 2.5);
}

TEST(FairShare, ATreeHeldBackElsewhereLeavesTheRestToTheOthers) {
  // B is held to 2 by link 1; A gets what B leaves of link 0.
  const std::vector<double> cap{10, 2, 100};
  const std::vector<std::map<int, int>> uses{{{0, 1}, {2, 1}}, {{0, 1}, {1, 1}}};
  const std::vector<double> r = fairRates(uses, {1, 1}, cap);
  EXPECT_DOUBLE_EQ(r[1], 2);
  EXPECT_DOUBLE_EQ(r[0], 8);
}

TEST(FairShare, ATreeCrossingALinkTwiceTakesTwoParts) {
  const std::vector<double> cap{12};
  const std::vector<std::map<int, int>> uses{{{0, 2}}, {{0, 1}}};
  const std::vector<double> r = fairRates(uses, {1, 1}, cap);
  EXPECT_DOUBLE_EQ(r[0], 4);  // 2 x 4 + 4 = 12
  EXPECT_DOUBLE_EQ(r[1], 4);
}

TEST(FairShare, UnboundedLinksNeverHoldATreeBack) {
  const std::vector<double> cap{PlanGraph::kUnbounded, 6};
  const std::vector<std::map<int, int>> uses{{{0, 1}, {1, 1}}, {{0, 1}}};
  const std::vector<double> r = fairRates(uses, {1, 1}, cap);
  EXPECT_DOUBLE_EQ(r[0], 6);
  EXPECT_GE(r[1], PlanGraph::kUnbounded);
}

/// Checks that `trees` (after shareFairly) are a max-min fair allocation of
/// their streams: no bounded link over its capacity, and every tree crosses
/// a full link on which no stream gets more than its own streams do.
void expectFair(const PlanGraph& g, const std::vector<Tree>& trees, bool allReduce) {
  const std::vector<double> cap = g.capacities();
  std::vector<double> load(cap.size(), 0.0);
  std::vector<std::map<int, int>> uses;
  for (const Tree& t : trees) {
    uses.push_back(detail::useOf(t, allReduce));
    for (auto [l, times] : uses.back()) load[static_cast<size_t>(l)] += times * t.rate;
  }
  for (size_t l = 0; l < cap.size(); ++l) {
    if (cap[l] < PlanGraph::kUnbounded / 2) {
      EXPECT_LE(load[l], cap[l] * (1 + 1e-9)) << "link " << l;
    }
  }
  for (size_t t = 0; t < trees.size(); ++t) {
    const double perStream = trees[t].rate / trees[t].channels;
    bool bottleneck = false;
    for (auto [l, times] : uses[t]) {
      if (!(cap[static_cast<size_t>(l)] < PlanGraph::kUnbounded / 2)) continue;
      if (load[static_cast<size_t>(l)] < cap[static_cast<size_t>(l)] * (1 - 1e-9)) continue;
      bool mostHere = true;
      for (size_t o = 0; o < trees.size(); ++o)
        if (uses[o].count(l) && trees[o].rate / trees[o].channels > perStream * (1 + 1e-9))
          mostHere = false;
      bottleneck |= mostHere;
    }
    EXPECT_TRUE(bottleneck) << "tree " << t << " could run faster";
  }
}

TEST(FairShare, APackingGetsChannelsByRateAndItsFairShares) {
  const PlanGraph g =
      PlanGraph::fromTopology(fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 3, 4, 7}));
  PackOptions o;
  o.fairShares = false;
  const TreePlan packed = packAllReduceTrees(g, o);
  ASSERT_GE(packed.trees.size(), 2u);
  std::vector<Tree> trees = packed.trees;
  const double total = shareFairly(trees, true, g.capacities());
  int channels = 0;
  double heavy = 0, light = 1e300;
  int heavyChannels = 0, lightChannels = 0;
  for (const Tree& t : trees) {
    ASSERT_GE(t.channels, 1);
    channels += t.channels;
  }
  for (size_t i = 0; i < trees.size(); ++i) {
    if (packed.trees[i].rate > heavy)
      heavy = packed.trees[i].rate, heavyChannels = trees[i].channels;
    if (packed.trees[i].rate < light)
      light = packed.trees[i].rate, lightChannels = trees[i].channels;
  }
  EXPECT_LE(channels, kMaxTreeChannels);
  // The fewest streams that do (fair_share.cc), never fewer for the heavier.
  EXPECT_GE(heavyChannels, lightChannels);
  // Fair shares never beat the packing, and with channels by rate come close to it.
  EXPECT_LE(total, packed.rate * (1 + 1e-9));
  EXPECT_GE(total, 0.9 * packed.rate);
  expectFair(g, trees, true);
  // What a plan without a judge runs.
  const TreePlan fair = packAllReduceTrees(g);
  for (const Tree& t : fair.trees) EXPECT_GE(t.channels, 1);
  expectFair(g, fair.trees, true);
  EXPECT_GT(fair.packedRate, 0);
  EXPECT_LE(fair.rate, fair.packedRate * (1 + 1e-9));
}

TEST(FairShare, TheTreeBuilderRunsThePlannedChannels) {
  // Two chains over 3 ranks of equal rates, on 3 streams and 1.
  Tree a, b;
  a.root = 0, a.parent = {-1, 0, 1}, a.rate = 1, a.channels = 3;
  b.root = 0, b.parent = {-1, 2, 0}, b.rate = 1, b.channels = 1;
  PlanParams p;
  p.nChannels = 1;
  p.chunkBytes = 1024;
  auto channelsOf = [&](const std::vector<Tree>& trees) {
    std::set<int> used;
    const Program prog = buildTreeBroadcast(
        CollArgs{Coll::kBroadcast, 1 << 16, groveFloat32, groveSum, 0, 1, 3, false}, p, trees);
    for (const Phase& ph : prog.phases)
      for (const Lane& l : ph.lanes)
        for (const Step& s : l.steps) used.insert(s.channel);
    return used.size();
  };
  EXPECT_EQ(channelsOf({a, b}), 4u);
  // A tree without channels leaves the choice to the builder (by rate: one each).
  b.channels = 0;
  EXPECT_EQ(channelsOf({a, b}), 2u);
}

}  // namespace
}  // namespace grove::plan

// The cost model: predictions and the per-size selection table on the
// machine fixtures, and the tree judge.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "algorithms/cost/cost_model.h"
#include "algorithms/cost/flow_sim.h"
#include "base/error.h"
#include "topology/topo_file.h"
#include "unit/link_presets.h"
#include "unit/topo_fixtures.h"

namespace grove::plan {
namespace {

Selector cudaSelector(int nranks) {
  return Selector(nranks, presets::deviceRingTraits(), SelectorConfig{});
}

/// Every size maps to an allowed algorithm, rules ascend and end open.
void expectCoversAllSizes(const Selector& sel, Coll coll) {
  const std::vector<SizeRule>& rules = sel.sizeTable(coll);
  ASSERT_FALSE(rules.empty()) << collName(coll);
  EXPECT_EQ(rules.back().maxBytes, UINT64_MAX) << collName(coll);
  for (size_t i = 1; i < rules.size(); ++i) {
    EXPECT_LT(rules[i - 1].maxBytes, rules[i].maxBytes);
    EXPECT_NE(rules[i - 1].algo, rules[i].algo) << "runs of one winner must merge";
  }
  for (uint64_t b :
       {uint64_t{1}, uint64_t{1000}, uint64_t{1} << 20, uint64_t{3} << 29, UINT64_MAX / 2}) {
    const Algo a = sel.select(coll, b).algo;
    EXPECT_TRUE(algoSupports(a, coll)) << collName(coll) << " " << b;
    EXPECT_TRUE(sel.allowedMask(coll) & (1u << static_cast<unsigned>(a)));
  }
}

TEST(CostModel, PredictionGrowsWithSizeAndMatchesASimulation) {
  const topo::CommTopology t = fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 3, 4, 7});
  TopoPlans plans(PlanGraph::fromTopology(t));
  CollArgs a;
  a.coll = Coll::kAllReduce;
  a.nranks = 4;
  PlanParams params;
  const SimParams p;
  double last = 0;
  for (uint64_t count : {uint64_t{256}, uint64_t{1} << 16, uint64_t{1} << 22}) {
    a.count = count;
    const FlowSimResult r = predict(plans, Algo::kRing, a, params, p);
    EXPECT_GT(r.seconds, last);
    EXPECT_DOUBLE_EQ(r.seconds, predictSeconds(plans, Algo::kRing, a, params, p));
    EXPECT_GE(r.criticalRank, 0);
    last = r.seconds;
  }
  // 16 MiB all-reduce over NVLink (at most 4 x 50 GB/s out of each GPU) takes
  // longer than the bandwidth bound allows.
  EXPECT_GT(last, (16 << 20) / (allReduceBound(plans.graph()) * 1e9));
  a.nranks = 3;
  EXPECT_THROW(predictSeconds(plans, Algo::kRing, a, params, p), Error);
}

TEST(CostModel, TheMemoSimulatesAProgramOnceAndTellsDifferentOnesApart) {
  const topo::CommTopology t = fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 3, 4, 7});
  TopoPlans plans(PlanGraph::fromTopology(t));
  SimMemo memo(plans.graph());
  const CollArgs a = argsFor(Coll::kAllReduce, 4u << 20, 4);
  const PlanParams params;
  const SimParams p;
  const FlowSimResult plain = predict(plans, Algo::kTree, a, params, p);
  const FlowSimResult first = predict(plans, Algo::kTree, a, params, p, &memo);
  const FlowSimResult again = predict(plans, Algo::kTree, a, params, p, &memo);
  EXPECT_EQ(memo.misses(), 1);
  EXPECT_EQ(memo.hits(), 1);
  EXPECT_EQ(first.seconds, plain.seconds);
  EXPECT_EQ(again.seconds, plain.seconds);
  EXPECT_EQ(again.linkBytes, plain.linkBytes);
  EXPECT_EQ(again.events, plain.events);
  // Another size, algorithm, chunk size or simulator knob is another
  // simulation, with its own answer.
  const CollArgs bigger = argsFor(Coll::kAllReduce, (4u << 20) + 64, 4);
  EXPECT_EQ(predictSeconds(plans, Algo::kTree, bigger, params, p, &memo),
            predictSeconds(plans, Algo::kTree, bigger, params, p));
  EXPECT_EQ(predictSeconds(plans, Algo::kRing, a, params, p, &memo),
            predictSeconds(plans, Algo::kRing, a, params, p));
  PlanParams smallChunks = params;
  smallChunks.chunkBytes /= 4;
  EXPECT_EQ(predictSeconds(plans, Algo::kTree, a, smallChunks, p, &memo),
            predictSeconds(plans, Algo::kTree, a, smallChunks, p));
  SimParams slowSteps = p;
  slowSteps.stepOverheadUs *= 10;
  const double slow = predictSeconds(plans, Algo::kTree, a, params, slowSteps, &memo);
  EXPECT_EQ(slow, predictSeconds(plans, Algo::kTree, a, params, slowSteps));
  EXPECT_GT(slow, plain.seconds);
  EXPECT_EQ(memo.misses(), 5);
  EXPECT_EQ(memo.hits(), 1);
  // A memo answers for its own plan graph only.
  TopoPlans other(PlanGraph::fromTopology(t));
  EXPECT_THROW(predict(other, Algo::kTree, a, params, p, &memo), Error);
}

TEST(CostModel, BeyondTwoHundredFiftySixMiBTheLineThroughSixtyFourAndTwoHundredFiftySixMiB) {
  // A pipeline: a fixed fill plus a time per byte -- the line is exact.
  auto pipeline = [](uint64_t b) { return 1e-3 + static_cast<double>(b) * 1e-11; };
  const uint64_t big = 1ull << 30;
  EXPECT_NEAR(secondsBySize(big, pipeline), pipeline(big), 1e-12);
  std::vector<uint64_t> asked;
  secondsBySize(big, [&](uint64_t b) {
    asked.push_back(b);
    return pipeline(b);
  });
  EXPECT_EQ(asked, (std::vector<uint64_t>{64ull << 20, 256ull << 20}));  // the 256 MiB one last
  EXPECT_DOUBLE_EQ(secondsBySize(1 << 20, pipeline), pipeline(1 << 20));
  EXPECT_DOUBLE_EQ(secondsBySize(256ull << 20, pipeline), pipeline(256ull << 20));
  // Times that do not grow with the size: in proportion to 256 MiB's.
  EXPECT_DOUBLE_EQ(extendedSeconds(2.0, 1.0, big), 4.0);
}

TEST(CostModel, TheLineStaysNearTheDirectSimulationAt1GiB) {
  // Trees on 4 GPUs of the DGX-1: the extended 1 GiB time against the
  // simulation of every chunk (within 3 %; in proportion it was further off).
  const topo::CommTopology t = fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3});
  TopoPlans plans(PlanGraph::fromTopology(t));
  CollArgs a;
  a.coll = Coll::kAllReduce;
  a.nranks = 4;
  const PlanParams params;
  const SimParams p;
  auto at = [&](uint64_t bytes) {
    a.count = bytes / 4;
    return predictSeconds(plans, Algo::kTree, a, params, p);
  };
  const uint64_t big = 1ull << 30;
  const double direct = at(big);
  const double line = secondsBySize(big, at);
  std::printf("tree all-reduce of 1 GiB on 4 GPUs: %.3f ms simulated, %.3f ms by the line\n",
              direct * 1e3, line * 1e3);
  EXPECT_NEAR(line / direct, 1.0, 0.03);
}

TEST(CostModel, SizeRulesMergeRunsAndEndOpen) {
  std::vector<TuneRow> rows(4);
  const Algo winners[] = {Algo::kDirect, Algo::kDirect, Algo::kRing, Algo::kTree};
  for (int i = 0; i < 4; ++i) rows[i].bytes = 1024ull << (2 * i), rows[i].winner = winners[i];
  const std::vector<SizeRule> rules = sizeRulesOf(rows);
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].maxBytes, 2 * 4096u);
  EXPECT_EQ(rules[0].algo, Algo::kDirect);
  EXPECT_EQ(rules[1].maxBytes, 2 * 16384u);
  EXPECT_EQ(rules[1].algo, Algo::kRing);
  EXPECT_EQ(rules[2].maxBytes, UINT64_MAX);
  EXPECT_EQ(rules[2].algo, Algo::kTree);
  EXPECT_EQ(tuneSizes().front(), 1024u);
  EXPECT_EQ(tuneSizes().back(), 1ull << 30);
}

/// Prints a tuning's predictions (algbw per algorithm) and checks each
/// winner is the fastest prediction of its row.
void printAndCheckRows(const std::vector<TuneRow>& rows) {
  ASSERT_EQ(rows.size(), tuneSizes().size());
  for (const TuneRow& r : rows) {
    std::printf("%10llu B:", static_cast<unsigned long long>(r.bytes));
    for (int a = 0; a < kNumAlgos; ++a)
      if (r.seconds[a] >= 0)
        std::printf("  %s %.1f GB/s", algoName(static_cast<Algo>(a)), r.bytes / r.seconds[a] / 1e9);
    std::printf("  -> %s\n", algoName(r.winner));
    EXPECT_GE(r.seconds[static_cast<int>(r.winner)], 0);
    // The winner is the fastest: the table never picks what it predicts slower.
    for (int a = 0; a < kNumAlgos; ++a) {
      if (r.seconds[a] < 0) continue;
      EXPECT_LE(r.seconds[static_cast<int>(r.winner)], r.seconds[a]);
    }
  }
}

TEST(CostModel, TableOnDgx1V100Gpus0347CoversAllSizes) {
  const topo::CommTopology t = fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 3, 4, 7});
  TopoPlans plans(PlanGraph::fromTopology(t));
  Selector sel = cudaSelector(4);
  printAndCheckRows(tuneCollective(sel, plans, Coll::kAllReduce, 4, SimParams{}));
  tuneSelector(sel, plans, 4, SimParams{});
  for (Coll c :
       {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter})
    expectCoversAllSizes(sel, c);
  // Tiny messages are latency bound: a latency algorithm (one direct step, or
  // log2(n) doubling rounds) beats any pipeline.
  const Algo tiny = sel.select(Coll::kAllReduce, 1024).algo;
  EXPECT_TRUE(tiny == Algo::kDirect || tiny == Algo::kDoubling) << algoName(tiny);
  // Large ones are bandwidth bound: never the direct all-reduce, which moves
  // (n-1) times the message out of every GPU.
  EXPECT_NE(sel.select(Coll::kAllReduce, 1ull << 30).algo, Algo::kDirect);
  EXPECT_NE(sel.select(Coll::kAllReduce, 1ull << 30).algo, Algo::kDoubling);
  for (const std::string& line : sel.describeTable()) std::printf("%s\n", line.c_str());
}

TEST(CostModel, TuneRespectsOverrides) {
  const topo::CommTopology t = fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2});
  TopoPlans plans(PlanGraph::fromTopology(t));
  SelectorConfig cfg;
  cfg.algo = "allreduce:ring,tree";
  Selector sel(3, presets::deviceRingTraits(), cfg);
  tuneSelector(sel, plans, 3, SimParams{});
  for (const SizeRule& r : sel.sizeTable(Coll::kAllReduce)) EXPECT_NE(r.algo, Algo::kDirect);
  EXPECT_THROW(tuneSelector(sel, plans, 4, SimParams{}), Error);
}

TEST(CostModel, Dgx1V100AllGpusRingsVersusTrees) {
  const topo::CommTopology t =
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3, 4, 5, 6, 7});
  TopoPlans plans(PlanGraph::fromTopology(t));
  Selector sel = cudaSelector(8);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TuneRow> rows = tuneCollective(sel, plans, Coll::kAllReduce, 8, SimParams{});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printAndCheckRows(rows);
  std::printf("tuning all-reduce for 8 ranks took %.2f s (plans included)\n", s);
  const auto t1 = std::chrono::steady_clock::now();
  tuneSelector(sel, plans, 8, SimParams{});
  std::printf("tuneSelector (5 collectives, plans cached) took %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
  expectCoversAllSizes(sel, Coll::kAllReduce);
}

TEST(CostModel, TheTableAt256MiBIsTheSimulationItself) {
  // DGX-1 V100, all 8 GPUs, all-gather: at 16 and 64 MiB the forest is
  // still filling its pipelines, and the line through those two put it at
  // 256 MiB 12 % above its own simulation -- and above rings, which the
  // simulation says are faster. The 256 MiB row is each algorithm's
  // simulation, so the table picks what it predicts fastest there.
  const topo::CommTopology t =
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3, 4, 5, 6, 7});
  TopoPlans plans(PlanGraph::fromTopology(t));
  Selector sel = cudaSelector(8);
  const uint64_t big = 256ull << 20;
  const std::vector<TuneRow> rows = tuneCollective(sel, plans, Coll::kAllGather, 8, SimParams{});
  const TuneRow* row = nullptr;
  for (const TuneRow& r : rows)
    if (r.bytes == big) row = &r;
  ASSERT_NE(row, nullptr);
  const Selection base = sel.select(Coll::kAllGather, big);
  for (Algo a : {Algo::kRing, Algo::kTree}) {
    const double direct =
        predictSeconds(plans, a, argsFor(Coll::kAllGather, big, 8), base.params, SimParams{});
    EXPECT_DOUBLE_EQ(row->seconds[static_cast<int>(a)], direct) << algoName(a);
  }
  const double winner = row->seconds[static_cast<int>(row->winner)];
  for (double s : row->seconds)
    if (s >= 0) {
      EXPECT_LE(winner, s);
    }
}

TEST(CostModel, TheJudgeChoosesHowManyTrees) {
  // DGX-1 V100 GPUs 0-5: the fewest trees keeping 99% of the optimum are
  // not the fastest at 64 MiB; the cost model's choice is never slower than
  // the packer's rule (that set is one of its candidates) and here faster
  // (a set of its own: 7 trees against the rule's 8, 3% faster).
  const topo::CommTopology t =
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3, 4, 5});
  Selector sel = cudaSelector(6);
  TopoPlans rule(PlanGraph::fromTopology(t)), judged(PlanGraph::fromTopology(t));
  const TreeJudge judge = treeJudge(judged.graph(), sel, SimParams{}, 64ull << 20);
  judged.setTreeJudge(judge);
  const TreePlan& a = rule.allReduceTrees();
  const TreePlan& b = judged.allReduceTrees();
  EXPECT_EQ(a.judged, 0);
  EXPECT_GT(b.judged, 1);
  const double ta = judge(a.trees, true, 0), tb = judge(b.trees, true, 0);
  EXPECT_LT(tb, ta * 0.98);
  EXPECT_NE(b.trees.size(), a.trees.size());
  std::printf(
      "0-5 all-reduce at 64 MiB: %zu trees (%.1f GB/s) %.3f ms, judged %zu trees (%.1f GB/s) %.3f "
      "ms\n",
      a.trees.size(), a.rate, ta * 1e3, b.trees.size(), b.rate, tb * 1e3);
  const TreePlan& c = judged.rootedTrees(0);
  EXPECT_GT(c.judged, 0);
  EXPECT_LE(judge(c.trees, false, 0), judge(rule.rootedTrees(0).trees, false, 0) * (1 + 1e-9));
}

TEST(CostModel, TreesRunNearTheirRateWhenTheRootStreams) {
  // DGX-1 V100, 8 GPUs, planned as a communicator plans (the judges at 32
  // and 64 MiB): the trees a 256 MiB all-reduce runs on are predicted at
  // 0.97 of their summed rate. Each root passes its chunks through in one
  // step (reduce and send back down as they come); with the root reducing a
  // chunk first and sending it after, the same planning ran at 0.91-0.95.
  const topo::CommTopology t =
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 2, 3, 4, 5, 6, 7});
  Selector sel = cudaSelector(8);
  TopoPlans plans(PlanGraph::fromTopology(t));
  installTreeJudges(plans, sel, SimParams{}, 32ull << 20);
  const uint64_t bytes = 256ull << 20;
  double rate = 0;
  for (const Tree& tree : plans.allReduceTrees().treesFor(bytes)) rate += tree.rate;
  const double seconds = predictSeconds(plans, Algo::kTree, argsFor(Coll::kAllReduce, bytes, 8),
                                        sel.select(Coll::kAllReduce, bytes).params, SimParams{});
  const double share = static_cast<double>(bytes) / seconds / 1e9 / rate;
  std::printf("256 MiB tree all-reduce: %.1f GB/s of the trees' %.1f (%.3f)\n",
              static_cast<double>(bytes) / seconds / 1e9, rate, share);
  EXPECT_GE(share, 0.96);
}

}  // namespace
}  // namespace grove::plan

// End to end: tree broadcast / reduce / all-reduce, forest all-gather /
// reduce-scatter, rings in any order
// (all-reduce, all-gather, reduce-scatter) and the hierarchical all-reduce,
// built for hand-made trees, rings and plans, run on threads over the
// loopback transport with the real host executor and CPU kernels, for every
// data type and reduction op, compared with a reference computed here
// (inputs chosen so every result is exact).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "algorithms/builders/builders.h"
#include "algorithms/planner/topo_plans.h"
#include "base/dtype.h"
#include "exec_check.h"
#include "ir/validate.h"
#include "tree_check.h"
#include "unit/harness/thread_ranks.h"

namespace grove::plan {
namespace {

using testing::binaryTree;
using testing::chainTree;
using testing::randomRing;
using testing::randomTree;
using testing::starTree;

using testing::BuildFn;
using testing::CallRun;

void execute(const CallRun& x, const BuildFn& build, size_t linkBytes) {
  testing::executeCall(x, build, linkBytes);
}

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

/// Every data type and (for reductions) op, small odd counts, in and out of place.
void sweepTypes(Coll coll, int n, int root, const std::function<BuildFn(const PlanParams&)>& make) {
  const groveDataType_t dtypes[] = {groveInt8,    groveUint8,   groveInt32,   groveUint32,
                                    groveInt64,   groveUint64,  groveFloat16, groveFloat32,
                                    groveFloat64, groveBfloat16};
  std::vector<groveRedOp_t> ops = {groveSum};
  if (reduces(coll)) ops = {groveSum, groveProd, groveMax, groveMin, groveAvg};
  int variant = 0;
  for (groveDataType_t dt : dtypes)
    for (groveRedOp_t op : ops)
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{37}, uint64_t{301}}) {
        ++variant;
        PlanParams p;
        p.nChannels = 1 + variant % 2;
        p.chunkBytes = 64;
        execute(CallRun{coll, n, count, dt, op, variant % 2 == 0, root}, make(p), 256);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// ------------------------------------------------------------------ trees

/// Several trees rooted at `root` (root >= 0) or with different roots.
std::vector<Tree> someTrees(int n, int root) {
  auto at = [&](int k) { return root >= 0 ? root : k % n; };
  return {binaryTree(n, at(0), 2.0), randomTree(n, at(1), 17u, 1.0), starTree(n, at(2), 0.5)};
}

TEST(TreeExec, BroadcastAllTypes) {
  for (int n : {2, 3, 5}) {
    const std::vector<Tree> trees = someTrees(n, n - 1);
    sweepTypes(Coll::kBroadcast, n, n - 1, [&](const PlanParams& p) {
      return [&trees, p](const CollArgs& a) { return buildTreeBroadcast(a, p, trees); };
    });
    if (HasFatalFailure()) return;
  }
}

TEST(TreeExec, ReduceAllTypesAndOps) {
  for (int n : {2, 4}) {
    const std::vector<Tree> trees = someTrees(n, 1);
    sweepTypes(Coll::kReduce, n, 1, [&](const PlanParams& p) {
      return [&trees, p](const CollArgs& a) { return buildTreeReduce(a, p, trees); };
    });
    if (HasFatalFailure()) return;
  }
}

TEST(TreeExec, AllReduceAllTypesAndOps) {
  for (int n : {2, 3, 5}) {
    std::vector<Tree> trees = someTrees(n, -1);
    // and a tree pair: broadcast down a chain, reduce up a star, same root
    trees.push_back(testing::pairOf(chainTree(n, 1), starTree(n, 1, 0.7)));
    sweepTypes(Coll::kAllReduce, n, 0, [&](const PlanParams& p) {
      return [&trees, p](const CollArgs& a) { return buildTreeAllReduce(a, p, trees); };
    });
    if (HasFatalFailure()) return;
  }
}

// Fan-in: stars and a node with six children (one fan-in step of four, then
// one of two with the send up), reduce and all-reduce, every op, half types.
TEST(TreeExec, WideNodesFanInEveryOp) {
  std::vector<int> wide(8, 1);
  wide[0] = -1;
  wide[1] = 0;
  const std::vector<std::vector<Tree>> shapes = {
      {starTree(5, 2)}, {starTree(7, 0)}, {testing::treeOf(0, wide)}, {binaryTree(7, 3)}};
  for (const auto& trees : shapes) {
    const int n = static_cast<int>(trees[0].parent.size()), root = trees[0].root;
    for (groveDataType_t dt : {groveFloat16, groveBfloat16, groveFloat32, groveInt32})
      for (groveRedOp_t op : {groveSum, groveProd, groveMax, groveMin, groveAvg}) {
        PlanParams p;
        p.chunkBytes = 256;
        execute(
            CallRun{Coll::kReduce, n, 301, dt, op, false, root},
            [&](const CollArgs& a) { return buildTreeReduce(a, p, trees); }, 512);
        execute(
            CallRun{Coll::kAllReduce, n, 301, dt, op, true, 0},
            [&](const CollArgs& a) { return buildTreeAllReduce(a, p, trees); }, 512);
        if (HasFatalFailure()) return;
      }
  }
}

// A node with more children than a step serves takes them in groups; its
// parts (one lane each, at once) begin with different groups (inTurn), and
// the results stay exact.
TEST(TreeExec, WideNodesServeTheirChildrenInTurnByPart) {
  const int n = 10;  // the root has nine children: groups of four, four, one
  const std::vector<Tree> trees = {starTree(n, 0)};
  PlanParams p;
  p.chunkBytes = 256;
  p.nChannels = 3;
  CollArgs a;
  a.coll = Coll::kBroadcast;
  a.nranks = n;
  a.rank = 0;
  a.root = 0;
  a.count = 3000;
  a.dtype = groveInt32;
  const Program root = buildTreeBroadcast(a, p, trees);
  std::vector<int> firstPeers;
  for (const Lane& lane : root.phases.at(0).lanes)
    if (!lane.steps.empty() && lane.steps[0].kind == StepKind::kSend)
      firstPeers.push_back(lane.steps[0].sendPeer);
  EXPECT_EQ(firstPeers, (std::vector<int>{1, 5, 9}));  // each part starts one group further
  execute(
      CallRun{Coll::kBroadcast, n, 3000, groveInt32, groveSum, false, 0},
      [&](const CollArgs& c) { return buildTreeBroadcast(c, p, trees); }, 512);
  execute(
      CallRun{Coll::kReduce, n, 3000, groveInt32, groveSum, false, 0},
      [&](const CollArgs& c) { return buildTreeReduce(c, p, trees); }, 512);
  execute(
      CallRun{Coll::kAllReduce, n, 3000, groveInt32, groveMax, true, 0},
      [&](const CollArgs& c) { return buildTreeAllReduce(c, p, trees); }, 512);
}

TEST(TreeExec, LargerMessagesAndEightRanks) {
  for (int n : {1, 4, 8}) {
    const std::vector<Tree> trees = someTrees(n, -1);
    const std::vector<Tree> rooted = someTrees(n, n / 2);
    for (uint64_t count : {uint64_t{5000}, uint64_t{65536 + 3}}) {
      if (n == 8 && count > 10000) continue;  // 8 threads on 2 cores: keep it quick
      PlanParams p;
      p.chunkBytes = count > 10000 ? 16384 : 1024;
      p.nChannels = 2;
      const size_t link = p.chunkBytes + 64;
      execute(
          CallRun{Coll::kAllReduce, n, count, groveFloat32, groveSum, count > 10000, 0},
          [&](const CollArgs& a) { return buildTreeAllReduce(a, p, trees); }, link);
      execute(
          CallRun{Coll::kBroadcast, n, count, groveFloat32, groveSum, false, n / 2},
          [&](const CollArgs& a) { return buildTreeBroadcast(a, p, rooted); }, link);
      execute(
          CallRun{Coll::kReduce, n, count, groveFloat32, groveSum, true, n / 2},
          [&](const CollArgs& a) { return buildTreeReduce(a, p, rooted); }, link);
      if (HasFatalFailure()) return;
    }
  }
}

// Random floats: every rank ends with bitwise the same all-reduce result.
TEST(TreeExec, AllReduceBitwiseIdenticalOnEveryRank) {
  const int n = 5;
  const std::vector<Tree> trees = someTrees(n, -1);
  PlanParams p;
  p.chunkBytes = 256;
  for (groveDataType_t dt : {groveFloat32, groveFloat16, groveBfloat16})
    testing::expectBitwiseIdenticalAllReduce(
        n, dt, [&](const CollArgs& a) { return buildTreeAllReduce(a, p, trees); });
}

// ------------------------------------------------------------------ forests

/// A forest: a random tree rooted at every rank, and a second one (a
/// chain, a star) at some, of uneven rates.
std::vector<Tree> someForest(int n) {
  std::vector<Tree> trees;
  for (int r = 0; r < n; ++r) {
    trees.push_back(randomTree(n, r, 31u + static_cast<unsigned>(r), 1.0 + r));
    if (r % 2 == 0) trees.push_back(chainTree(n, r, 0.5));
    if (r == 1) trees.push_back(starTree(n, r, 2.5));
  }
  return trees;
}

TEST(ForestExec, AllGatherAndReduceScatterAllTypes) {
  for (int n : {2, 3, 5}) {
    const std::vector<Tree> trees = someForest(n);
    sweepTypes(Coll::kAllGather, n, 0, [&](const PlanParams& p) {
      return [&trees, p](const CollArgs& a) { return buildTreeAllGather(a, p, trees); };
    });
    sweepTypes(Coll::kReduceScatter, n, 0, [&](const PlanParams& p) {
      return [&trees, p](const CollArgs& a) { return buildTreeReduceScatter(a, p, trees); };
    });
    if (HasFatalFailure()) return;
  }
}

// Wide nodes (fan-in over scratch slots) and larger messages on 8 ranks.
TEST(ForestExec, StarsAndLargerMessages) {
  for (int n : {1, 4, 8}) {
    std::vector<Tree> trees;
    for (int r = 0; r < n; ++r) trees.push_back(starTree(n, r, 1.0));
    for (int r = 0; r < n; ++r) trees.push_back(binaryTree(n, r, 2.0));
    for (uint64_t count : {uint64_t{301}, uint64_t{5000}}) {
      PlanParams p;
      p.chunkBytes = 1024;
      p.nChannels = 2;
      for (bool inPlace : {false, true}) {
        execute(
            CallRun{Coll::kAllGather, n, count, groveFloat32, groveSum, inPlace, 0},
            [&](const CollArgs& a) { return buildTreeAllGather(a, p, trees); }, 1088);
        execute(
            CallRun{Coll::kReduceScatter, n, count, groveInt32, groveSum, inPlace, 0},
            [&](const CollArgs& a) { return buildTreeReduceScatter(a, p, trees); }, 1088);
        if (HasFatalFailure()) return;
      }
    }
  }
}

/// A forest unlike someForest's: other shapes and rates.
std::vector<Tree> otherForest(int n) {
  std::vector<Tree> trees;
  for (int r = 0; r < n; ++r) {
    trees.push_back(binaryTree(n, r, 1.0));
    if (r % 2 == 1) trees.push_back(randomTree(n, r, 77u + static_cast<unsigned>(r), 3.0));
  }
  return trees;
}

// All-reduce over forests: shards of count / n (uneven, and empty when
// count < n), every type and op, in and out of place; pipelined (each
// shard's pieces as tree pairs, or as trees where both forests agree).
TEST(ForestExec, AllReduceOverForestsEveryTypeAndOp) {
  for (int n : {2, 3, 5}) {
    const std::vector<Tree> rs = someForest(n), ag = otherForest(n);
    sweepTypes(Coll::kAllReduce, n, 0, [&](const PlanParams& p) {
      return [&rs, &ag, p](const CollArgs& a) { return buildForestAllReduce(a, p, rs, ag); };
    });
    for (uint64_t count : {uint64_t{2}, uint64_t{5000}}) {  // fewer elements than ranks, and many
      PlanParams p;
      p.chunkBytes = 1024;
      p.nChannels = 2;
      for (bool inPlace : {false, true})
        execute(
            CallRun{Coll::kAllReduce, n, count, groveInt32, groveSum, inPlace, 0},
            [&](const CollArgs& a) { return buildForestAllReduce(a, p, rs, ag); }, 1088);
    }
    if (HasFatalFailure()) return;
  }
}

// The forest all-reduce pipelines in one phase while its pieces fit their
// channels (a pair takes two of 64), and runs in two phases beyond.
TEST(ForestExec, AllReduceOverForestsInTwoPhasesWhenThePiecesDoNotFit) {
  const int n = 4;
  auto forest = [&](bool rising) {
    std::vector<Tree> trees;  // six trees per root, rates 1..6 or 6..1: 11 pieces a shard
    for (int r = 0; r < n; ++r)
      for (int k = 1; k <= 6; ++k)
        trees.push_back(
            randomTree(n, r, 5u + static_cast<unsigned>(r * 6 + k), rising ? k : 7.0 - k));
    return trees;
  };
  PlanParams p;
  p.chunkBytes = 1024;
  p.nChannels = 2;
  CollArgs a{Coll::kAllReduce, 5000, groveInt32, groveSum, 0, 1, n, false};
  const std::vector<Tree> rs = someForest(n), ag = otherForest(n);
  const Program one = buildForestAllReduce(a, p, rs, ag);
  EXPECT_EQ(one.algo, "forest");
  EXPECT_EQ(one.phases.size(), 1u) << describe(one);
  const std::vector<Tree> up = forest(true), down = forest(false);
  const Program two = buildForestAllReduce(a, p, up, down);
  EXPECT_EQ(two.phases.size(), 2u) << describe(two);
  for (bool inPlace : {false, true})
    execute(
        CallRun{Coll::kAllReduce, n, 5000, groveInt32, groveSum, inPlace, 0},
        [&](const CollArgs& c) { return buildForestAllReduce(c, p, up, down); }, 1088);
}

// ------------------------------------------------------------------ rings in any order, hier

TEST(OrderedRingExec, AllReduceAllGatherReduceScatter) {
  for (int n : {2, 3, 5}) {
    const std::vector<Ring> rings = {randomRing(n, 3u, 1.0), randomRing(n, 4u, 2.5)};
    sweepTypes(Coll::kAllReduce, n, 0, [&](const PlanParams& p) {
      return [&rings, p](const CollArgs& a) { return buildRingsAllReduce(a, p, rings); };
    });
    sweepTypes(Coll::kAllGather, n, 0, [&](const PlanParams& p) {
      return [&rings, p](const CollArgs& a) { return buildRingsAllGather(a, p, rings); };
    });
    sweepTypes(Coll::kReduceScatter, n, 0, [&](const PlanParams& p) {
      return [&rings, p](const CollArgs& a) { return buildRingsReduceScatter(a, p, rings); };
    });
    if (HasFatalFailure()) return;
  }
}

TEST(HierExec, AllReduceAllTypesAndOps) {
  const HierPlan twoByTwo{{{0, 1}, {2, 3}}, {{0, 3}, {1, 2}}, 0};
  const HierPlan uneven{{{0}, {1, 2, 3}, {4}}, {{0, 2, 4}}, 0};
  for (const HierPlan* plan : {&twoByTwo, &uneven}) {
    int n = 0;
    for (const auto& m : plan->machines) n += static_cast<int>(m.size());
    sweepTypes(Coll::kAllReduce, n, 0, [&](const PlanParams& p) {
      return [plan, p](const CollArgs& a) { return buildHierAllReduce(a, p, *plan); };
    });
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace grove::plan

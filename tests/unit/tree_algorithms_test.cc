// Tree, ordered-ring and hierarchical builders x validator x deadlock
// simulation x reference interpreter, over hand-made trees (chains, stars,
// binary and random trees, several weighted trees with different roots),
// rings in random orders, and hierarchical plans; plus the rate split, the
// argument checks, and fan-out steps in the validator and the deadlock
// simulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"
#include "ir/step_traits.h"
#include "ir/validate.h"
#include "tree_check.h"

namespace grove::plan {
namespace {

using testing::binaryTree;
using testing::BuildFn;
using testing::chainTree;
using testing::checkTreeCase;
using testing::randomRing;
using testing::randomTree;
using testing::starTree;
using testing::TreeCase;

/// Tree sets for `n` ranks: rooted at `root` when `root` >= 0, else with
/// different roots (all-reduce).
std::vector<std::vector<Tree>> treeSets(int n, int root) {
  auto at = [&](int k) { return root >= 0 ? root : k % n; };
  std::vector<std::vector<Tree>> sets = {
      {chainTree(n, at(0))},
      {starTree(n, at(1))},
      {binaryTree(n, at(2))},
      {randomTree(n, at(3), 11u + n)},
      {binaryTree(n, at(0), 3.0), chainTree(n, at(1), 1.0), randomTree(n, at(2), 5u, 0.5)},
      {starTree(n, at(1), 0.0), randomTree(n, at(4), 9u, 2.0)},  // a zero-rate tree gets no data
  };
  return sets;
}

/// Sweeps sizes, element sizes, in/out of place and channel counts.
void sweep(Coll coll, int n, int root, const std::function<BuildFn(const PlanParams&)>& make) {
  int variant = 0;
  for (groveDataType_t dt : {groveInt8, groveFloat16, groveFloat32, groveFloat64}) {
    const uint64_t es = dtypeSize(dt);
    for (uint64_t count :
         {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1021}, (uint64_t{1} << 18) / es + 3}) {
      for (bool inPlace : {false, true}) {
        ++variant;
        TreeCase c{coll, n, count, dt, inPlace, root, PlanParams{}};
        c.params.nChannels = 1 + variant % 3;
        c.params.chunkBytes = count <= 1021 ? 64 : 4096;
        checkTreeCase(c, make(c.params));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(TreeBuilders, BroadcastAndReduceOverEveryTreeShape) {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    const int root = (n * 3 + 1) % n;
    for (const std::vector<Tree>& trees : treeSets(n, root)) {
      sweep(Coll::kBroadcast, n, root, [&](const PlanParams& p) {
        return [&trees, p](const CollArgs& a) { return buildTreeBroadcast(a, p, trees); };
      });
      if (HasFatalFailure()) return;
      sweep(Coll::kReduce, n, root, [&](const PlanParams& p) {
        return [&trees, p](const CollArgs& a) { return buildTreeReduce(a, p, trees); };
      });
      if (HasFatalFailure()) return;
    }
  }
}

TEST(TreeBuilders, AllReduceOverTreesWithDifferentRoots) {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    std::vector<std::vector<Tree>> sets = treeSets(n, -1);
    // Tree pairs: reduce up one tree, broadcast down another of the same root.
    sets.push_back({testing::pairOf(chainTree(n, 0), starTree(n, 0))});
    sets.push_back({testing::pairOf(starTree(n, 1 % n, 2.0), randomTree(n, 1 % n, 3u)),
                    testing::pairOf(binaryTree(n, 2 % n), chainTree(n, 2 % n)),
                    chainTree(n, 0, 0.5)});
    for (const std::vector<Tree>& trees : sets) {
      sweep(Coll::kAllReduce, n, 0, [&](const PlanParams& p) {
        return [&trees, p](const CollArgs& a) { return buildTreeAllReduce(a, p, trees); };
      });
      if (HasFatalFailure()) return;
    }
  }
}

/// 0 fans out `bytes` to {1, 2}; 1 and 2 receive them.
std::vector<Program> fanOutPrograms(uint64_t bytes) {
  Step send = detail::netStep(StepKind::kSend, -1, 1, 0, detail::ref(Buf::kInput, 0), {}, bytes);
  send.moreSendPeers[0] = 2;
  std::vector<Program> progs(3);
  progs[0].phases.push_back(Phase{{Lane{{send}}}});
  for (int r : {1, 2}) {
    const Step recv =
        detail::netStep(StepKind::kRecv, 0, -1, 0, {}, detail::ref(Buf::kOutput, 0), bytes);
    progs[r].phases.push_back(Phase{{Lane{{recv}}}});
  }
  return progs;
}

TEST(FanOut, ValidatorChecksEveryDestination) {
  ValidateOptions vo;
  validatePrograms(fanOutPrograms(64), vo);
  auto rejects = [&](const std::vector<Program>& progs, const std::string& what) {
    testing::expectRejected(progs, vo, what);
  };
  auto progs = fanOutPrograms(64);
  progs[2].phases.clear();  // destination 2 never receives
  rejects(progs, "no matching receive");
  progs = fanOutPrograms(64);
  progs[0].phases[0].lanes[0].steps[0].moreSendPeers = {1, -1, -1};
  rejects(progs, "twice");
  progs = fanOutPrograms(64);
  progs[0].phases[0].lanes[0].steps[0].moreSendPeers = {-1, 2, -1};
  rejects(progs, "after an unused");
  progs = fanOutPrograms(64);
  progs[0].phases[0].lanes[0].steps[0].moreSendPeers = {2, 0, -1};
  rejects(progs, "the rank itself");
  progs = fanOutPrograms(64);
  progs[0].phases[0].lanes[0].steps[0].moreSendPeers = {2, 3, -1};
  rejects(progs, "out of range");
  progs = fanOutPrograms(64);
  progs[1].phases[0].lanes[0].steps[0].moreSendPeers = {2, -1, -1};  // on a receive
  rejects(progs, "does not send");
  // A second lane sending to 2 in the same phase collides with the fan-out's stream.
  progs = fanOutPrograms(64);
  progs[0].phases[0].lanes.push_back(
      Lane{{detail::netStep(StepKind::kSend, -1, 2, 0, detail::ref(Buf::kInput, 0), {}, 64)}});
  rejects(progs, "same phase");
}

TEST(FanOut, SimulationWaitsForTheFullestDestination) {
  SimOptions so;
  so.linkCapacity = 64;
  EXPECT_TRUE(simulatePrograms(fanOutPrograms(1000), so).completed);
  // Destination 2 only receives after it has received from 1, which waits on
  // 0's fan-out: 0 stalls once 0->2 is full, so 1000 B cannot pass 64 B links.
  auto progs = fanOutPrograms(1000);
  progs[1].phases[0].lanes[0].steps.push_back(
      detail::netStep(StepKind::kSend, -1, 2, 1, detail::ref(Buf::kOutput, 0), {}, 8));
  progs[2].phases[0].lanes[0].steps.insert(
      progs[2].phases[0].lanes[0].steps.begin(),
      detail::netStep(StepKind::kRecv, 1, -1, 1, {}, detail::ref(Buf::kOutput, 0), 8));
  const SimResult stuck = simulatePrograms(progs, so);
  EXPECT_FALSE(stuck.completed);
  EXPECT_NE(stuck.problem.find("deadlock"), std::string::npos) << stuck.problem;
  so.linkCapacity = 1024;  // room for the whole step: it completes
  EXPECT_TRUE(simulatePrograms(progs, so).completed) << simulatePrograms(progs, so).problem;
}

TEST(TreeBuilders, LargeAllReduceComputes) {
  const std::vector<Tree> trees = {randomTree(6, 2, 3u, 1.5), binaryTree(6, 5, 1.0)};
  TreeCase c{Coll::kAllReduce, 6, (uint64_t{1} << 20) / 4 + 3, groveInt32, true, 0, PlanParams{}};
  c.params.nChannels = 2;
  c.params.chunkBytes = 16 << 10;
  checkTreeCase(
      c, [&](const CollArgs& a) { return buildTreeAllReduce(a, c.params, trees); }, true);
}

TEST(TreeBuilders, StructureOfAMiddleNode) {
  // 0 -> {1, 2}, 1 -> {3, 4}: rank 1 receives from 0 and forwards to 3 and 4 in one step.
  const Tree t = testing::treeOf(0, {-1, 0, 0, 1, 1});
  CollArgs a{Coll::kBroadcast, 16, groveFloat32, groveSum, 0, 1, 5, false};
  PlanParams p;
  p.chunkBytes = 32;  // two chunks of 8 floats
  Program prog = buildTreeBroadcast(a, p, {t});
  EXPECT_EQ(prog.algo, "tree");
  ASSERT_EQ(prog.phases.size(), 1u);
  ASSERT_EQ(prog.phases[0].lanes.size(), 1u);
  const auto& steps = prog.phases[0].lanes[0].steps;
  ASSERT_EQ(steps.size(), 2u) << describe(prog);
  EXPECT_EQ(steps[0].kind, StepKind::kRecvCopySend);
  EXPECT_EQ(steps[0].recvPeer, 0);
  EXPECT_EQ(steps[0].sendPeer, 3);
  EXPECT_EQ(steps[0].moreSendPeers[0], 4);
  EXPECT_EQ(steps[0].moreSendPeers[1], -1);
  EXPECT_EQ(steps[0].dst.buf, Buf::kOutput);
  EXPECT_EQ(steps[1].dst.offset, 32u);
  EXPECT_NE(describe(steps[0]).find("0->[me]->{3,4}"), std::string::npos) << describe(steps[0]);
  // All-reduce: a middle rank has an up lane and a down lane, both on the
  // part's channel (the two directions of an edge are different streams).
  a.coll = Coll::kAllReduce;
  prog = buildTreeAllReduce(a, p, {t});
  ASSERT_EQ(prog.phases[0].lanes.size(), 2u);
  const Step up = prog.phases[0].lanes[0].steps.back();
  const Step down = prog.phases[0].lanes[1].steps.front();
  EXPECT_EQ(up.kind, StepKind::kRecvReduceSend);
  EXPECT_EQ(up.sendPeer, 0);
  EXPECT_EQ(up.channel, down.channel);
  EXPECT_FALSE(up.final);
  // ... and it reduces both children in one fan-in step.
  EXPECT_EQ(up.recvPeer, 3);
  EXPECT_EQ(up.moreRecvPeers[0], 4);
  EXPECT_EQ(up.moreRecvPeers[1], -1);
  EXPECT_EQ(up.src.buf, Buf::kInput);
  EXPECT_NE(describe(up).find("{3,4}->[me]->0"), std::string::npos) << describe(up);
  // The root streams: one final step per chunk reduces both children's
  // contributions into the output and sends the result back down.
  a.rank = 0;
  prog = buildTreeAllReduce(a, p, {t});
  ASSERT_EQ(prog.phases[0].lanes.size(), 1u);
  const auto& rs = prog.phases[0].lanes[0].steps;
  ASSERT_EQ(rs.size(), 2u) << describe(prog);
  for (const Step& st : rs) {
    EXPECT_EQ(st.kind, StepKind::kRecvReduceCopySend);
    EXPECT_EQ(recvPeerCount(st), 2);
    EXPECT_EQ(recvPeerAt(st, 1), 2);
    EXPECT_EQ(sendPeerCount(st), 2);
    EXPECT_EQ(sendPeerAt(st, 0), 1);
    EXPECT_EQ(sendPeerAt(st, 1), 2);
    EXPECT_TRUE(st.final);
    EXPECT_EQ(st.src.buf, Buf::kInput);
    EXPECT_EQ(st.dst.buf, Buf::kOutput);
    EXPECT_EQ(st.channel, down.channel);
  }
  EXPECT_EQ(rs[1].dst.offset, 32u);
}

TEST(TreeBuilders, APartGoesInNearEqualChunks) {
  // A part of 42 floats in chunks of at most 8 goes as six chunks of 7
  // (not five of 8 and a short 2, whose step would cost as much for less
  // and end the tree's pipeline out of step), one after another.
  const Tree t = testing::treeOf(0, {-1, 0});
  CollArgs a{Coll::kBroadcast, 0, groveFloat32, groveSum, 0, 0, 2, false};
  PlanParams p;
  p.chunkBytes = 32;
  for (uint64_t count : {uint64_t{42}, uint64_t{32}, uint64_t{6}, uint64_t{35}}) {
    a.count = count;
    const Program prog = buildTreeBroadcast(a, p, {t});
    ASSERT_EQ(prog.phases.size(), 1u);
    uint64_t total = 0;
    int parts = 0;
    for (const Lane& lane : prog.phases[0].lanes) {  // a lane per part, and the root's own copy
      if (lane.steps.at(0).kind != StepKind::kSend) continue;
      ++parts;
      const uint64_t first = lane.steps.at(0).src.offset / 4;
      uint64_t offset = first, least = count, most = 0;
      for (const Step& st : lane.steps) {
        EXPECT_EQ(st.src.offset, offset * 4);
        offset += st.bytes / 4;
        least = std::min<uint64_t>(least, st.bytes / 4);
        most = std::max<uint64_t>(most, st.bytes / 4);
      }
      const uint64_t part = offset - first;
      EXPECT_EQ(lane.steps.size(), (part + 7) / 8) << describe(prog);
      EXPECT_LE(most, 8u);
      EXPECT_LE(most - least, 1u) << describe(prog);
      total += part;
    }
    EXPECT_EQ(total, count);
    if (count == 42) {
      EXPECT_EQ(parts, 1);
      EXPECT_EQ(prog.phases[0].lanes[0].steps.size(), 6u);
      EXPECT_EQ(prog.phases[0].lanes[0].steps[5].bytes, 7u * 4);
    }
  }
}

TEST(TreeBuilders, AllReduceRootInTwoStepsWhenItCannotStream) {
  // A tree pair (reduce up a star, broadcast down a chain, root 0): the
  // directions need channels of their own, so the root reduces, then sends.
  CollArgs a{Coll::kAllReduce, 16, groveFloat32, groveSum, 0, 0, 4, false};
  PlanParams p;
  p.chunkBytes = 64;  // one chunk
  const Tree pair = testing::pairOf(chainTree(4, 0), starTree(4, 0));
  Program prog = buildTreeAllReduce(a, p, {pair});
  auto steps = prog.phases[0].lanes[0].steps;
  ASSERT_EQ(steps.size(), 2u) << describe(prog);
  EXPECT_EQ(steps[0].kind, StepKind::kRecvReduce);
  EXPECT_EQ(recvPeerCount(steps[0]), 3);
  EXPECT_TRUE(steps[0].final);
  EXPECT_EQ(steps[1].kind, StepKind::kSend);
  EXPECT_EQ(steps[1].sendPeer, 1);
  EXPECT_NE(steps[0].channel, steps[1].channel);
  // A root with more children than one step takes (a star of 6): the same.
  a.nranks = 6;
  prog = buildTreeAllReduce(a, p, {starTree(6, 0)});
  steps = prog.phases[0].lanes[0].steps;
  ASSERT_EQ(steps.size(), 4u) << describe(prog);  // fold 4, fold 1 (final), send 4, send 1
  EXPECT_EQ(steps[0].kind, StepKind::kRecvReduce);
  EXPECT_EQ(steps[1].kind, StepKind::kRecvReduce);
  EXPECT_TRUE(steps[1].final);
  EXPECT_EQ(steps[2].kind, StepKind::kSend);
  EXPECT_EQ(steps[3].kind, StepKind::kSend);
}

TEST(TreeBuilders, WideNodesFanOutInGroupsOfFour) {
  // A star of 11 ranks rooted at 0 (10 children: 4 + 4 + 2 per chunk), and 0 -> 1 -> {2..10}
  // (rank 1 forwards to 4 children, then sends to 4 and 1 more).
  const Tree star = starTree(11, 0);
  std::vector<int> parent(11, 1);
  parent[0] = -1;
  parent[1] = 0;
  const Tree deep = testing::treeOf(0, parent);
  CollArgs a{Coll::kBroadcast, 64, groveFloat32, groveSum, 0, 0, 11, false};
  PlanParams p;
  p.chunkBytes = 128;  // two chunks
  Program prog = buildTreeBroadcast(a, p, {star});
  const auto& rs = prog.phases[0].lanes[0].steps;
  ASSERT_EQ(rs.size(), 6u) << describe(prog);
  EXPECT_EQ(sendPeerCount(rs[0]), 4);
  EXPECT_EQ(sendPeerCount(rs[1]), 4);
  EXPECT_EQ(sendPeerCount(rs[2]), 2);
  EXPECT_EQ(sendPeerAt(rs[2], 1), 10);
  a.rank = 1;
  prog = buildTreeBroadcast(a, p, {deep});
  const auto& ms = prog.phases[0].lanes[0].steps;
  ASSERT_EQ(ms.size(), 6u) << describe(prog);
  EXPECT_EQ(ms[0].kind, StepKind::kRecvCopySend);
  EXPECT_EQ(sendPeerCount(ms[0]), 4);
  EXPECT_EQ(ms[1].kind, StepKind::kSend);
  EXPECT_EQ(ms[1].src.buf, Buf::kOutput);
  EXPECT_EQ(sendPeerAt(ms[1], 0), 6);
  EXPECT_EQ(sendPeerCount(ms[2]), 1);
  // Both shapes compute, validate and simulate without deadlock for every rank.
  for (const Tree& t : {star, deep}) {
    for (Coll coll : {Coll::kBroadcast, Coll::kAllReduce}) {
      TreeCase c{coll, 11, 1021, groveFloat32, false, 0, p};
      checkTreeCase(c, [&](const CollArgs& x) {
        return coll == Coll::kBroadcast ? buildTreeBroadcast(x, p, {t})
                                        : buildTreeAllReduce(x, p, {t});
      });
    }
  }
}

TEST(TreeBuilders, ReduceMiddleNodeUsesScratch) {
  // Rank 1 has six children: a fan-in of four into scratch, then the last two
  // with the send up. With four children (one step) it needs no scratch.
  const Tree t = testing::treeOf(0, {-1, 0, 1, 1, 1, 1, 1, 1});
  CollArgs a{Coll::kReduce, 100, groveFloat32, groveSum, 0, 1, 8, false};
  PlanParams p;
  p.chunkBytes = 64;
  const Program prog = buildTreeReduce(a, p, {t});
  EXPECT_EQ(prog.scratchBytes, 64u);
  const auto& steps = prog.phases[0].lanes[0].steps;
  ASSERT_EQ(steps.size(), 14u) << describe(prog);  // seven chunks of up to 16 floats
  EXPECT_EQ(steps[0].kind, StepKind::kRecvReduce);
  EXPECT_EQ(recvPeerCount(steps[0]), 4);
  EXPECT_EQ(steps[0].dst.buf, Buf::kScratch);
  EXPECT_FALSE(steps[0].final);
  EXPECT_EQ(steps[1].kind, StepKind::kRecvReduceSend);
  EXPECT_EQ(recvPeerCount(steps[1]), 2);
  EXPECT_EQ(steps[1].recvPeer, 6);
  EXPECT_EQ(steps[1].src.buf, Buf::kScratch);
  a.rank = 0;
  EXPECT_EQ(buildTreeReduce(a, p, {t}).scratchBytes, 0u);
  const Tree four = testing::treeOf(0, {-1, 0, 1, 1, 1, 1});
  a.rank = 1;
  a.nranks = 6;
  EXPECT_EQ(buildTreeReduce(a, p, {four}).scratchBytes, 0u);
  // Both shapes compute, validate and simulate without deadlock for every rank.
  for (const Tree& tree : {t, four}) {
    for (Coll coll : {Coll::kReduce, Coll::kAllReduce}) {
      TreeCase c{coll, static_cast<int>(tree.parent.size()), 1021, groveFloat32, false, 0, p};
      checkTreeCase(c, [&](const CollArgs& x) {
        return coll == Coll::kReduce ? buildTreeReduce(x, p, {tree})
                                     : buildTreeAllReduce(x, p, {tree});
      });
    }
  }
}

TEST(TreeBuilders, RejectBadTrees) {
  CollArgs a{Coll::kBroadcast, 8, groveFloat32, groveSum, 0, 0, 4, false};
  const PlanParams p;
  auto expectError = [&](const std::vector<Tree>& trees, const char* what) {
    try {
      buildTreeBroadcast(a, p, trees);
      ADD_FAILURE() << "expected an error: " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), groveInvalidArgument) << what;
      EXPECT_NE(std::string(e.what()).find("tree"), std::string::npos) << e.what();
    }
  };
  expectError({}, "no trees");
  expectError({testing::treeOf(0, {-1, 2, 1, 0})}, "cycle 1 <-> 2");
  expectError({testing::treeOf(0, {-1, 0, 0})}, "too few parents");
  expectError({testing::treeOf(1, {1, -1, 1, 1})}, "root is not the call's root");
  expectError({testing::treeOf(0, {-1, 0, 7, 0})}, "parent out of range");
  expectError({chainTree(4, 0, -1.0)}, "negative rate");
  expectError(std::vector<Tree>(65, chainTree(4, 0)), "more trees than channels");
  expectError({testing::pairOf(chainTree(4, 0), starTree(4, 0))}, "a tree pair outside all-reduce");
  a.coll = Coll::kAllReduce;
  EXPECT_THROW(buildTreeAllReduce(a, p, std::vector<Tree>(33, chainTree(4, 0))), Error);
  EXPECT_THROW(buildTreeAllReduce(a, p, {testing::pairOf(chainTree(4, 0), starTree(4, 1))}), Error)
      << "the reduce tree of a pair must have the same root";
  EXPECT_THROW(buildTreeAllReduce(
                   a, p, {testing::pairOf(chainTree(4, 0), testing::treeOf(0, {-1, 2, 1, 0}))}),
               Error)
      << "a reduce tree with a cycle";
  EXPECT_NO_THROW(buildTreeAllReduce(a, p, std::vector<Tree>(32, chainTree(4, 1))));
}

// ------------------------------------------------------------------ rings in any order

TEST(OrderedRings, AllReduceAllGatherReduceScatterInRandomOrders) {
  for (int n : {1, 2, 3, 5, 8}) {
    const std::vector<std::vector<Ring>> sets = {
        {randomRing(n, 1u)},
        {randomRing(n, 2u, 2.0), randomRing(n, 3u, 1.0)},
        {randomRing(n, 4u, 0.0), randomRing(n, 5u, 1.0), randomRing(n, 6u, 0.25)},
    };
    for (const std::vector<Ring>& rings : sets) {
      sweep(Coll::kAllReduce, n, 0, [&](const PlanParams& p) {
        return [&rings, p](const CollArgs& a) { return buildRingsAllReduce(a, p, rings); };
      });
      if (HasFatalFailure()) return;
    }
  }
}

// All-gather / reduce-scatter: structure and deadlock freedom here; their
// bytes are checked end to end in tree_algorithms_exec_test.cc.
TEST(OrderedRings, AllGatherAndReduceScatterValidateAndSimulate) {
  for (int n : {2, 3, 6}) {
    const std::vector<Ring> rings = {randomRing(n, 7u, 1.0), randomRing(n, 8u, 3.0)};
    for (Coll coll : {Coll::kAllGather, Coll::kReduceScatter}) {
      for (uint64_t count : {uint64_t{0}, uint64_t{5}, uint64_t{999}}) {
        CollArgs base{coll, count, groveFloat32, groveSum, 0, 0, n, false};
        PlanParams p;
        p.chunkBytes = 64;
        p.nChannels = 2;
        std::vector<Program> progs;
        ValidateOptions vo;
        vo.elemSize = 4;
        for (int r = 0; r < n; ++r) {
          base.rank = r;
          progs.push_back(coll == Coll::kAllGather ? buildRingsAllGather(base, p, rings)
                                                   : buildRingsReduceScatter(base, p, rings));
          vo.sizes.push_back(bufferSizesFor(base));
        }
        ASSERT_NO_THROW(validatePrograms(progs, vo));
        SimOptions so;
        so.elemSize = 4;
        so.linkCapacity = 80;
        ASSERT_TRUE(simulatePrograms(progs, so).completed);
      }
    }
  }
}

TEST(OrderedRings, IdentityRingEqualsRankOrderRing) {
  CollArgs a{Coll::kAllReduce, 1000, groveFloat32, groveSum, 0, 2, 4, false};
  PlanParams p;
  p.chunkBytes = 128;
  p.nChannels = 2;
  Ring id;
  id.order = {0, 1, 2, 3};
  EXPECT_EQ(describe(buildRingsAllReduce(a, p, {id})), describe(buildRingAllReduce(a, p)));
  // Reversed order: rank 2 receives from 3 and sends to 1.
  Ring rev;
  rev.order = {3, 2, 1, 0};
  const Step& s = buildRingsAllReduce(a, p, {rev}).phases[0].lanes[0].steps[1];
  EXPECT_EQ(s.recvPeer, 3);
  EXPECT_EQ(s.sendPeer, 1);
  Ring bad;
  bad.order = {0, 1, 1, 3};
  EXPECT_THROW(buildRingsAllReduce(a, p, {bad}), Error);
  EXPECT_THROW(buildRingsAllReduce(a, p, {}), Error);
}

// ------------------------------------------------------------------ hierarchical

TEST(HierBuilder, MachinesLeadersAndChannels) {
  struct PlanCase {
    int n;
    HierPlan plan;
  };
  std::vector<PlanCase> plans;
  plans.push_back({4, HierPlan{{{0, 1}, {2, 3}}, {{0, 2}, {1, 3}}, 0}});
  plans.push_back({4, HierPlan{{{0, 1, 2, 3}}, {{2}}, 0}});
  plans.push_back({3, HierPlan{{{0}, {1}, {2}}, {{0, 1, 2}}, 0}});
  plans.push_back({6, HierPlan{{{0}, {1, 2, 3}, {4, 5}}, {{0, 3, 4}, {0, 1, 5}, {0, 2, 4}}, 0}});
  plans.push_back({8, HierPlan{{{0, 2, 4, 6}, {1, 3, 5, 7}}, {{6, 1}}, 0}});
  for (const PlanCase& pc : plans) {
    sweep(Coll::kAllReduce, pc.n, 0, [&](const PlanParams& p) {
      return [&pc, p](const CollArgs& a) { return buildHierAllReduce(a, p, pc.plan); };
    });
    if (HasFatalFailure()) return;
  }
}

TEST(HierBuilder, RejectsBadPlans) {
  CollArgs a{Coll::kAllReduce, 8, groveFloat32, groveSum, 0, 0, 4, false};
  const PlanParams p;
  EXPECT_THROW(buildHierAllReduce(a, p, HierPlan{}), Error);
  EXPECT_THROW(buildHierAllReduce(a, p, HierPlan{{{0, 1}, {2}}, {{0, 2}}, 0}),
               Error);  // rank 3 missing
  EXPECT_THROW(buildHierAllReduce(a, p, HierPlan{{{0, 1}, {2, 3, 1}}, {{0, 2}}, 0}),
               Error);  // rank 1 twice
  EXPECT_THROW(buildHierAllReduce(a, p, HierPlan{{{0, 1}, {2, 3}}, {{0, 1}}, 0}),
               Error);  // leader elsewhere
  EXPECT_THROW(buildHierAllReduce(a, p, HierPlan{{{0, 1}, {2, 3}}, {{0}}, 0}),
               Error);  // too few leaders
}

// ------------------------------------------------------------------ rate split

TEST(RateSplit, ProportionalContiguousAndComplete) {
  auto spans = detail::rateSplit(100, {3.0, 1.0}, "t");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].offset, 0u);
  EXPECT_EQ(spans[0].count, 75u);
  EXPECT_EQ(spans[1].offset, 75u);
  EXPECT_EQ(spans[1].count, 25u);
  spans = detail::rateSplit(10, {0.0, 1.0, 0.0}, "t");
  EXPECT_EQ(spans[0].count, 0u);
  EXPECT_EQ(spans[1].count, 10u);
  EXPECT_EQ(spans[2].count, 0u);
  spans = detail::rateSplit(10, {0.0, 0.0, 0.0}, "t");
  EXPECT_EQ(spans[0].count + spans[1].count + spans[2].count, 10u);
  EXPECT_EQ(spans[0].count, 4u);
  spans = detail::rateSplit(7, {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, "t");
  uint64_t sum = 0, next = 0;
  for (const auto& s : spans) {
    EXPECT_EQ(s.offset, next);
    next += s.count;
    sum += s.count;
  }
  EXPECT_EQ(sum, 7u);
  EXPECT_THROW(detail::rateSplit(10, {}, "t"), Error);
  EXPECT_THROW(detail::rateSplit(10, {1.0, std::numeric_limits<double>::quiet_NaN()}, "t"), Error);
}

}  // namespace
}  // namespace grove::plan

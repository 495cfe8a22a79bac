// The device interpreter (exec/device/dev_lane.h) run by the host emulation
// (exec/device/emulate.h) against the host executor: every collective the
// builders make (rank-order rings, direct, planned trees, rings and the
// hierarchical plan on topology fixtures, hand-made wide trees for fan-in and
// fan-out), 2..5 and 8 ranks, five data types, every op, in and out of
// place, sizes 0 to 1 MiB + 5 elements, rings that wrap many times and the
// default size, long local steps cut into lanes; every byte of every rank
// compared. Then a group of two
// calls, and the failures: abort, timeout, a closed ring, a failure seen by
// the other lanes, and invalid calls.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "algorithm_combos.h"
#include "algorithms/builders/builders.h"
#include "algorithms/planner/topo_plans.h"
#include "algorithms/select/selector.h"
#include "base/error.h"
#include "dev_emu.h"
#include "topology/comm_topology.h"
#include "tree_check.h"
#include "unit/topo_fixtures.h"

namespace grove::exec::dev {
namespace {

using plan::Coll;
using plan::CollArgs;
using plan::PlanParams;
using testing::compareCall;

constexpr uint64_t kSmallRing = 4096;       // with chunkBytes 1 KiB: wraps many times
constexpr uint64_t kDefaultRing = 1 << 20;  // the transports' default buffer
const groveDataType_t kTypes[] = {groveFloat32, groveInt32, groveFloat16, groveBfloat16,
                                  groveFloat64};
const groveRedOp_t kOps[] = {groveSum, groveProd, groveMax, groveMin, groveAvg};

using testing::builder;
using testing::smallChunks;

// Every (collective, algorithm) pair, every rank count, small sizes; types,
// ops, placement, roots and channel counts rotate.
TEST(DevEmulation, EveryCollectiveSmallRings) { testing::compareEveryCollective({2, 3, 4, 5, 8}); }

// Every type with every op on the reducing collectives.
TEST(DevEmulation, EveryTypeAndOp) {
  int v = 0;
  for (groveDataType_t dt : kTypes)
    for (groveRedOp_t op : kOps)
      for (auto [coll, algo] : {std::pair{Coll::kAllReduce, plan::Algo::kRing},
                                std::pair{Coll::kAllReduce, plan::Algo::kDirect},
                                std::pair{Coll::kReduceScatter, plan::Algo::kRing},
                                std::pair{Coll::kReduce, plan::Algo::kRing}}) {
        ++v;
        const int n = 3 + v % 2;
        compareCall({coll, n, 1000, dt, op, v % 3 == 0, v % n},
                    builder(algo, smallChunks(1 + v % 2)), kSmallRing);
        if (HasFatalFailure()) return;
      }
}

// Large messages: rings that wrap thousands of times, and the default rings
// with the default chunks.
TEST(DevEmulation, LargeMessages) { testing::compareLargeMessages(); }

// Long local steps cut into lanes of their own (LowerOptions, as on a GPU):
// every collective and algorithm, 1 to 4 ranks, in and out of place.
TEST(DevEmulation, LongLocalStepsCutIntoLanes) {
  const LowerOptions cut{4096, 5};
  int v = 0;
  for (const plan::testing::Combo& combo : plan::testing::kCombos)
    for (int n : {1, 2, 3, 4})
      for (bool inPlace : {false, true}) {
        // in place too: all-to-all stages the leaving blocks in scratch
        ++v;
        const plan::testing::CallRun x{combo.coll,        n,       20000 + 3, kTypes[v % 5],
                                       kOps[(v / 5) % 5], inPlace, v % n};
        compareCall(x, builder(combo.algo, smallChunks(1 + v % 2)), kSmallRing, cut);
        if (HasFatalFailure()) return;
      }
}

// Trees, forests, rings and the hierarchical plan that the planners make
// for topology fixtures.
TEST(DevEmulation, PlannedTreesRingsAndHier) {
  plan::TopoPlans dgx(plan::PlanGraph::fromTopology(
      fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 3, 4, 7})));
  int v = 0;
  for (Coll coll :
       {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter})
    for (plan::Algo algo :
         {plan::Algo::kTree, plan::Algo::kRing, plan::Algo::kHier, plan::Algo::kForest}) {
      if (!plan::algoSupports(algo, coll)) continue;
      for (uint64_t count : {uint64_t{1}, uint64_t{1000}, uint64_t{(1 << 16) + 3}}) {
        ++v;
        const bool small = v % 2 == 0;
        compareCall({coll, 4, count, kTypes[v % 5], kOps[v % 5], v % 3 == 0, v % 4},
                    builder(algo, small ? smallChunks(2) : PlanParams{}, &dgx),
                    small ? kSmallRing : kDefaultRing);
        if (HasFatalFailure()) return;
      }
    }
  plan::TopoPlans cluster(plan::PlanGraph::fromTopology(
      topo::placeRanks(fixtures::fixture("cluster_2x4nic.json"), 8, 0, topo::DeviceKind::kCuda)));
  for (uint64_t count : {uint64_t{1000}, uint64_t{(1 << 16) + 3}}) {
    compareCall({Coll::kAllReduce, 8, count, groveFloat16, groveSum, count % 2 == 0, 0},
                builder(plan::Algo::kHier, smallChunks(1), &cluster), kSmallRing);
    compareCall({Coll::kAllReduce, 8, count, groveFloat32, groveAvg, false, 0},
                builder(plan::Algo::kTree, smallChunks(1), &cluster), kSmallRing);
    // Forests: a tree rooted at every rank, many trees at once.
    compareCall({Coll::kAllGather, 8, count, groveBfloat16, groveSum, count % 2 == 1, 0},
                builder(plan::Algo::kTree, smallChunks(1), &cluster), kSmallRing);
    compareCall({Coll::kReduceScatter, 8, count, groveFloat32, groveMax, count % 2 == 0, 0},
                builder(plan::Algo::kTree, smallChunks(2), &cluster), kSmallRing);
    // All-reduce over both forests: shards of count / 8.
    compareCall({Coll::kAllReduce, 8, count, groveFloat16, groveAvg, count % 2 == 1, 0},
                builder(plan::Algo::kForest, smallChunks(1), &cluster), kSmallRing);
    if (HasFatalFailure()) return;
  }
}

// Wide tree nodes: fan-in of up to 4 sources (reduce) and fan-out to up to
// 4 destinations (broadcast), every op on the half types.
TEST(DevEmulation, WideTreesFanInAndFanOut) {
  std::vector<int> wide(8, 1);
  wide[0] = -1;
  wide[1] = 0;
  const std::vector<std::vector<plan::Tree>> shapes = {{plan::testing::starTree(5, 2)},
                                                       {plan::testing::treeOf(0, wide)}};
  for (const auto& trees : shapes) {
    const int n = static_cast<int>(trees[0].parent.size()), root = trees[0].root;
    for (groveDataType_t dt : {groveFloat16, groveBfloat16, groveFloat32})
      for (groveRedOp_t op : kOps) {
        const PlanParams p = smallChunks(1);
        compareCall(
            {Coll::kReduce, n, 3001, dt, op, false, root},
            [&](const CollArgs& a) { return plan::buildTreeReduce(a, p, trees); }, kSmallRing);
        compareCall(
            {Coll::kAllReduce, n, 3001, dt, op, true, 0},
            [&](const CollArgs& a) { return plan::buildTreeAllReduce(a, p, trees); }, kSmallRing);
        if (HasFatalFailure()) return;
      }
    compareCall(
        {Coll::kBroadcast, n, 70001, groveInt32, groveSum, false, root},
        [&](const CollArgs& a) { return plan::buildTreeBroadcast(a, smallChunks(2), trees); },
        kSmallRing);
  }
}

// Calls in one launch share the rings: the first leaves the streams at
// positions that are not 16-byte aligned, so the second starts with the
// wire rule's padding.
TEST(DevEmulation, GroupOfCallsSharesRings) {
  const plan::testing::CallRun a{Coll::kAllReduce, 3, 7, groveFloat16, groveSum, false, 0};
  const plan::testing::CallRun b{Coll::kAllGather, 3, 1001, groveFloat32, groveSum, true, 0};
  const plan::testing::CallRun c{Coll::kBroadcast, 3, 333, groveInt32, groveSum, false, 2};
  testing::compareGroup(
      {a, b},
      {builder(plan::Algo::kRing, smallChunks(1)), builder(plan::Algo::kRing, smallChunks(1))},
      kSmallRing);
  testing::compareGroup(
      {c, a, b},
      {builder(plan::Algo::kDirect, smallChunks(2)), builder(plan::Algo::kDirect, smallChunks(2)),
       builder(plan::Algo::kRing, smallChunks(2))},
      kSmallRing);
}

}  // namespace
}  // namespace grove::exec::dev

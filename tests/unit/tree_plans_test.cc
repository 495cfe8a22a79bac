// Trees, rings and hierarchical plans from the planners (TopoPlans on the
// topology fixtures), lowered to programs by build(algo, args, params,
// plans), checked by the validator, the deadlock simulation and the
// reference interpreter, and run on thread ranks over the host executor.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "algorithms/builders/builders.h"
#include "algorithms/cost/cost_model.h"
#include "algorithms/planner/topo_plans.h"
#include "algorithms/select/selector.h"
#include "topology/comm_topology.h"
#include "topology/topo_file.h"
#include "tree_check.h"
#include "unit/harness/thread_ranks.h"
#include "unit/topo_fixtures.h"

namespace grove::plan {
namespace {

using fixtures::fixture;
using fixtures::onGpus;
using testing::checkTreeCase;
using testing::TreeCase;

/// Lowers every algorithm the plans support for allreduce, broadcast,
/// reduce, all-gather and reduce-scatter, and checks each over several sizes.
void checkPlans(TopoPlans& plans, int n) {
  for (Coll coll : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather,
                    Coll::kReduceScatter}) {
    for (Algo algo : {Algo::kTree, Algo::kRing, Algo::kHier, Algo::kForest}) {
      if (!algoSupports(algo, coll)) continue;
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{777}, uint64_t{40000}}) {
        TreeCase c{coll,        n, count, groveInt32, count % 2 == 1, (count % 3 == 0) ? 0 : n - 1,
                   PlanParams{}};
        c.params.chunkBytes = count > 1000 ? 4096 : 64;
        c.params.nChannels = 2;
        SCOPED_TRACE(algoName(algo));
        checkTreeCase(
            c, [&](const CollArgs& a) { return build(algo, a, c.params, &plans); },
            /*interpret=*/true);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(PlannedPrograms, Dgx1V100FourGpus) {
  TopoPlans plans(PlanGraph::fromTopology(onGpus(fixture("dgx1_v100.json"), {0, 3, 4, 7})));
  ASSERT_FALSE(plans.allReduceTrees().trees.empty());
  ASSERT_FALSE(plans.rootedTrees(0).trees.empty());
  checkPlans(plans, 4);
}

TEST(PlannedPrograms, EveryFixtureAllGpus) {
  for (const char* name :
       {"dgx1_v100.json", "dgx1_p100.json", "pcie_8gpu_2socket.json", "dgx_a100.json"}) {
    SCOPED_TRACE(name);
    const topo::Graph g = fixture(name);
    TopoPlans plans(PlanGraph::fromTopology(topo::placeRanks(g, 8, 0, topo::DeviceKind::kCuda)));
    checkPlans(plans, 8);
    if (HasFatalFailure()) return;
  }
}

// On an NVSwitch box with the cost model's judges the forests are the
// split ones (NVLink chains, then trees over PCIe): every collective they
// serve, the all-reduce over forests too, lowers and computes exactly, and
// the all-reduce over forests runs on the real executor.
TEST(PlannedPrograms, SplitForestsOnAnNvSwitchBox) {
  const topo::Graph g = fixture("dgx_a100.json");
  const int n = 8;
  TopoPlans plans(PlanGraph::fromTopology(topo::placeRanks(g, n, 0, topo::DeviceKind::kCuda)));
  LinkTraits traits{};
  traits.deviceRings = true;
  const Selector sel(n, traits, SelectorConfig{});
  installTreeJudges(plans, sel, simParamsFor(traits), 32ull << 20);
  ASSERT_TRUE(plans.allGatherTrees().split);
  ASSERT_TRUE(plans.reduceScatterTrees().split);
  checkPlans(plans, n);
  if (HasFatalFailure()) return;
  const uint64_t count = 40003;
  PlanParams p;
  p.chunkBytes = 8192;
  std::vector<std::vector<int32_t>> buf(n, std::vector<int32_t>(count));
  std::vector<Program> progs;
  std::vector<exec::Buffers> bufs(n);
  for (int r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < count; ++i) buf[r][i] = static_cast<int32_t>((i * 7 + r) % 13);
    progs.push_back(build(Algo::kForest,
                          CollArgs{Coll::kAllReduce, count, groveInt32, groveSum, 0, r, n, true}, p,
                          &plans));
    bufs[r].input = bufs[r].output = buf[r].data();
  }
  harness::runProgramsOnThreads(progs, bufs, exec::ReduceSpec{groveInt32, groveSum, n}, 16384);
  for (int r = 0; r < n; ++r)
    for (uint64_t i = 0; i < count; ++i) {
      int32_t want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<int32_t>((i * 7 + q) % 13);
      ASSERT_EQ(buf[r][i], want) << "rank " << r << " element " << i;
    }
}

TEST(PlannedPrograms, ClusterHierarchicalAndHostRanks) {
  const topo::Graph cluster = fixture("cluster_2x4nic.json");
  TopoPlans plans(
      PlanGraph::fromTopology(topo::placeRanks(cluster, 8, 0, topo::DeviceKind::kCuda)));
  ASSERT_GE(plans.hierarchical().machines.size(), 2u);
  checkPlans(plans, 8);
  if (HasFatalFailure()) return;
  // Host ranks sharing one CPU node: trees over the shared port.
  TopoPlans host(PlanGraph::fromTopology(
      topo::placeRanks(fixture("cpu_host.json"), 4, 0, topo::DeviceKind::kHost)));
  checkPlans(host, 4);
}

// Planned tree routes reach the programs: every send link whose tree edge
// has a planned route carries it (Program::routes), the route leaves this
// rank's vertex and ends at the peer's; the trees run on their planned channels.
TEST(PlannedPrograms, TreeProgramsCarryPlannedRoutesAndChannels) {
  TopoPlans plans(PlanGraph::fromTopology(onGpus(fixture("dgx1_v100.json"), {0, 3, 4, 7})));
  const TreePlan& tp = plans.allReduceTrees();
  ASSERT_GE(tp.trees.size(), 2u);
  const PlanGraph& g = plans.graph();
  PlanParams p;
  p.nChannels = 1;
  size_t planned = 0;
  for (const Tree& t : tp.trees)
    for (const auto& r : t.down) planned += r.empty() ? 0 : 1;
  ASSERT_GT(planned, 0u) << "the planner left every route to the default";
  size_t seen = 0;
  std::vector<Program> progs;
  for (int r = 0; r < 4; ++r)
    progs.push_back(build(
        Algo::kTree, CollArgs{Coll::kAllReduce, 1 << 20, groveFloat32, groveSum, 0, r, 4, false}, p,
        &plans));
  for (int r = 0; r < 4; ++r) {
    for (const LinkRoute& lr : progs[static_cast<size_t>(r)].routes) {
      // The other end records the same route for the same link.
      bool mirrored = false;
      for (const LinkRoute& o : progs.at(static_cast<size_t>(lr.peer)).routes)
        mirrored |=
            o.peer == r && o.channel == lr.channel && o.send != lr.send && o.links == lr.links;
      EXPECT_TRUE(mirrored) << "rank " << r << " peer " << lr.peer << " channel " << lr.channel;
      ASSERT_FALSE(lr.links.empty());
      const int from = lr.send ? r : lr.peer, to = lr.send ? lr.peer : r;
      EXPECT_EQ(g.links().at(static_cast<size_t>(lr.links.front())).from, g.rankVertex(from));
      EXPECT_EQ(g.links().at(static_cast<size_t>(lr.links.back())).to, g.rankVertex(to));
      ++seen;
    }
  }
  EXPECT_GT(seen, 0u);
  // Planned rings record both ends of each hop alike.
  std::vector<Program> rings;
  for (int r = 0; r < 4; ++r)
    rings.push_back(build(
        Algo::kRing, CollArgs{Coll::kAllReduce, 1 << 20, groveFloat32, groveSum, 0, r, 4, false}, p,
        &plans));
  for (int r = 0; r < 4; ++r)
    for (const LinkRoute& lr : rings[static_cast<size_t>(r)].routes) {
      bool mirrored = false;
      for (const LinkRoute& o : rings.at(static_cast<size_t>(lr.peer)).routes)
        mirrored |=
            o.peer == r && o.channel == lr.channel && o.send != lr.send && o.links == lr.links;
      EXPECT_TRUE(mirrored) << "ring: rank " << r << " peer " << lr.peer << " channel "
                            << lr.channel;
    }
  // Channels: the program runs the channels the plan gave each tree
  // (fair_share.cc), one per part (both directions on it), or one per part
  // and direction for a tree pair.
  int plannedChannels = 0;
  for (const Tree& t : tp.trees) {
    ASSERT_GE(t.channels, 1);
    plannedChannels += (t.isPair() ? 2 : 1) * t.channels;
  }
  const Program root0 =
      build(Algo::kTree,
            CollArgs{Coll::kAllReduce, 1 << 20, groveFloat32, groveSum, 0, 0, 4, false}, p, &plans);
  std::set<int> channels;
  for (const Phase& ph : root0.phases)
    for (const Lane& l : ph.lanes)
      for (const Step& s : l.steps) channels.insert(s.channel);
  EXPECT_EQ(channels.size(), static_cast<size_t>(plannedChannels));
}

// The lowered programs of a planned all-reduce run on the real executor.
TEST(PlannedPrograms, TreeAllReduceRunsOnThreads) {
  TopoPlans plans(PlanGraph::fromTopology(onGpus(fixture("dgx1_v100.json"), {0, 3, 4, 7})));
  const int n = 4;
  const uint64_t count = 50001;
  PlanParams p;
  p.chunkBytes = 8192;
  for (Algo algo : {Algo::kTree, Algo::kRing, Algo::kHier}) {
    std::vector<std::vector<float>> buf(n, std::vector<float>(count));
    std::vector<Program> progs;
    std::vector<exec::Buffers> bufs(n);
    for (int r = 0; r < n; ++r) {
      for (uint64_t i = 0; i < count; ++i) buf[r][i] = static_cast<float>((i * 7 + r) % 13);
      progs.push_back(
          build(algo, CollArgs{Coll::kAllReduce, count, groveFloat32, groveSum, 0, r, n, true}, p,
                &plans));
      bufs[r].input = bufs[r].output = buf[r].data();
    }
    harness::runProgramsOnThreads(progs, bufs, exec::ReduceSpec{groveFloat32, groveSum, n}, 16384);
    for (int r = 0; r < n; ++r)
      for (uint64_t i = 0; i < count; i += 101) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += static_cast<float>((i * 7 + q) % 13);
        ASSERT_EQ(buf[r][i], want) << algoName(algo) << " rank " << r << " element " << i;
      }
  }
}

}  // namespace
}  // namespace grove::plan

// The planner against the proven optimum:
// - column generation (detail::optimalTrees) against the LP over every
//   spanning tree, enumerated, on small graphs where each pair of GPUs has
//   one route;
// - every survey row's packings (what a communicator runs) within 1 % of the
//   tree LP optimum stored in tests/fixtures/plan_optimum.json (written by
//   scripts/plan-optimum), and the reported optimum equal to it.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "algorithms/planner/planner_internal.h"
#include "algorithms/planner/topo_plans.h"
#include "topology/comm_topology.h"
#include "topology/json.h"
#include "topology/topo_file.h"

namespace grove::plan {
namespace {

using topo::Graph;
using topo::NodeId;

// Every labelled tree on n vertices, as parents rooted at 0 (Pruefer codes).
std::vector<std::vector<int>> allTrees(int n) {
  std::vector<std::vector<int>> out;
  std::vector<int> code(static_cast<size_t>(n - 2), 0);
  while (true) {
    std::vector<int> degree(static_cast<size_t>(n), 1);
    for (int c : code) ++degree[static_cast<size_t>(c)];
    std::vector<std::vector<int>> adj(static_cast<size_t>(n));
    for (int c : code) {
      int leaf = 0;
      while (degree[static_cast<size_t>(leaf)] != 1) ++leaf;
      adj[static_cast<size_t>(leaf)].push_back(c);
      adj[static_cast<size_t>(c)].push_back(leaf);
      --degree[static_cast<size_t>(leaf)];
      --degree[static_cast<size_t>(c)];
    }
    std::vector<int> last;
    for (int v = 0; v < n; ++v)
      if (degree[static_cast<size_t>(v)] == 1) last.push_back(v);
    adj[static_cast<size_t>(last[0])].push_back(last[1]);
    adj[static_cast<size_t>(last[1])].push_back(last[0]);
    std::vector<int> parent(static_cast<size_t>(n), -2), stack{0};
    parent[0] = -1;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      for (int w : adj[static_cast<size_t>(u)])
        if (parent[static_cast<size_t>(w)] == -2)
          parent[static_cast<size_t>(w)] = u, stack.push_back(w);
    }
    out.push_back(parent);
    size_t i = 0;  // next code
    while (i < code.size() && ++code[i] == n) code[i++] = 0;
    if (i == code.size()) break;
  }
  return out;
}

// A machine of n GPUs and no links yet; `gpu` gets their nodes.
Graph gpuBox(int n, std::vector<NodeId>* gpu) {
  Graph g;
  const NodeId m = g.addMachine("box");
  for (int i = 0; i < n; ++i) {
    topo::Node node;
    node.kind = topo::NodeKind::kGpu;
    node.name = "gpu" + std::to_string(i);
    node.index = i;
    node.machine = m;
    gpu->push_back(g.addNode(node));
  }
  return g;
}

// One rank on each GPU.
topo::CommTopology onEachGpu(const Graph& g, const std::vector<NodeId>& gpu) {
  topo::CommTopology t;
  t.graph = g;
  for (NodeId id : gpu) t.ranks.push_back({id, g.node(id).machine, 0});
  return t;
}

// n GPUs, each pair linked (NVLink, random bandwidth) with probability 0.8.
topo::CommTopology randomBox(int n, std::mt19937& rng) {
  std::vector<NodeId> gpu;
  Graph g = gpuBox(n, &gpu);
  std::uniform_real_distribution<double> coin(0, 1);
  std::uniform_int_distribution<int> bw(1, 6);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      if (b != a + 1 && coin(rng) > 0.8) continue;  // the path 0-1-..-n-1 keeps it connected
      topo::Link l;
      l.from = gpu[static_cast<size_t>(a)];
      l.to = gpu[static_cast<size_t>(b)];
      l.kind = topo::LinkKind::kNvLink;
      l.bw = 5.0 * bw(rng);
      l.latencyUs = 1;
      g.addBidi(l);
    }
  return onEachGpu(g, gpu);
}

TEST(PlannerOptimum, ColumnGenerationMatchesTheLpOverEveryTree) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 12; ++trial) {
    const int n = 3 + trial % 3;
    const PlanGraph g = PlanGraph::fromTopology(randomBox(n, rng));
    const std::vector<double> cap = g.capacities();
    for (bool allReduce : {true, false}) {
      std::vector<detail::Candidate> cands;
      for (const std::vector<int>& parent : allTrees(n)) {
        Tree t;
        t.parent = parent;
        t.down.assign(static_cast<size_t>(n), {});
        t.up.assign(static_cast<size_t>(n), {});
        bool ok = true;
        for (int v = 1; v < n; ++v) {
          const int p = parent[static_cast<size_t>(v)];
          t.down[static_cast<size_t>(v)] = g.widestRoute(p, v);
          t.up[static_cast<size_t>(v)] = g.widestRoute(v, p);
          ok = ok && !t.down[static_cast<size_t>(v)].empty();
        }
        if (!ok) continue;
        const std::map<int, int> use = detail::useOf(t, allReduce);
        cands.push_back(detail::Candidate{{use.begin(), use.end()}, 0});
      }
      std::vector<int> all(cands.size());
      for (size_t k = 0; k < all.size(); ++k) all[k] = static_cast<int>(k);
      const double lp = detail::solveSubset(cands, all, cap);
      const detail::TreeOptimum opt = detail::optimalTrees(g, 0, allReduce, cap, {}, 1e-9, 1000);
      SCOPED_TRACE("trial " + std::to_string(trial) + (allReduce ? " all-reduce" : " broadcast"));
      EXPECT_NEAR(opt.value, lp, 1e-6 * lp);
      EXPECT_NEAR(opt.upper, lp, 1e-6 * lp);
      // The columns are a feasible packing at that rate.
      const std::vector<double> load = linkLoad(g, opt.trees, allReduce);
      double rate = 0;
      for (const Tree& t : opt.trees) rate += t.rate;
      EXPECT_NEAR(rate, opt.value, 1e-9 * rate);
      for (size_t l = 0; l < cap.size(); ++l)
        EXPECT_LE(load[l], cap[l] * (1 + 1e-9)) << "link " << l;
    }
  }
}

TEST(PlannerOptimum, TreePairsWhereLinksAreOneWay) {
  // Three GPUs on a one-way ring: 0->1->2->0 at 10 GB/s, the way back at 1.
  // A tree used both ways crosses two slow links (at most 1.5 GB/s in all);
  // a pair reduces and broadcasts along the fast direction.
  std::vector<NodeId> gpu;
  Graph g = gpuBox(3, &gpu);
  for (int i = 0; i < 3; ++i)
    for (int back = 0; back < 2; ++back) {
      topo::Link l;
      l.from = gpu[static_cast<size_t>(back ? (i + 1) % 3 : i)];
      l.to = gpu[static_cast<size_t>(back ? i : (i + 1) % 3)];
      l.kind = topo::LinkKind::kNvLink;
      l.bw = back ? 1 : 10;
      l.latencyUs = 1;
      g.addLink(l);
    }
  const PlanGraph pg = PlanGraph::fromTopology(onEachGpu(g, gpu));
  const TreePlan plan = packAllReduceTrees(pg);
  EXPECT_GT(plan.rate, 3.0) << "at least twice what trees used both ways can reach";
  EXPECT_GE(plan.packedRate, 0.99 * plan.optimum);
  const double rsag = 1 / (1 / allGatherBound(pg).rate + 1 / reduceScatterBound(pg).rate);
  EXPECT_GE(plan.packedRate, 0.99 * rsag) << "pairs cover reduce-scatter + all-gather";
  EXPECT_GE(plan.rate, 0.95 * plan.packedRate) << "fair shares";
  bool pair = false;
  for (const Tree& tree : plan.trees) pair = pair || !tree.upParent.empty();
  EXPECT_TRUE(pair);
  const std::vector<double> load = linkLoad(pg, plan.trees, true);
  for (size_t l = 0; l < load.size(); ++l) EXPECT_LE(load[l], pg.links()[l].cap * (1 + 1e-9));
  std::printf("one-way ring: pairs %.2f GB/s (optimum %.2f, reduce-scatter + all-gather %.2f)\n",
              plan.rate, plan.optimum, rsag);
}

TEST(PlannerOptimum, ShardCutsWithSharedPorts) {
  // Four ranks on one CPU, each joined to it by a 10 GB/s port: every rank
  // draws the three other shards through its port, so all-gather runs at
  // 4 * 10 / 3 (a rank's own shard does not cross its port).
  Graph g;
  const NodeId m = g.addMachine("box");
  topo::Node cpu;
  cpu.kind = topo::NodeKind::kCpu;
  cpu.name = "cpu0";
  cpu.machine = m;
  g.addNode(cpu);
  PlanGraphOptions o;
  o.sharedPortBw = 10;
  const PlanGraph pg =
      PlanGraph::fromTopology(topo::placeRanks(g, 4, 0, topo::DeviceKind::kHost), o);
  const CutBound ag = allGatherBound(pg), rs = reduceScatterBound(pg);
  EXPECT_NEAR(ag.rate, 40.0 / 3, 1e-9);
  EXPECT_NEAR(rs.rate, 40.0 / 3, 1e-9);
  EXPECT_EQ(ag.inside.size(), 1u);
  EXPECT_NEAR(ag.crossing, 10, 1e-9);
}

TEST(PlannerOptimum, CertificatesOnTheFixtures) {
  // DGX-1 V100 GPUs 0,1,6,7: the two NVLink pairs meet only through PCIe
  // uplinks; the all-gather cut holds one pair, 15.76 GB/s entering it.
  const std::string dir = GROVE_TOPO_FIXTURES;
  const Graph dgx = topo::loadTopologyFile(dir + "/dgx1_v100.json");
  const PlanGraph pg =
      PlanGraph::fromTopology(topo::placeRanksOn(dgx, {"gpu0", "gpu1", "gpu6", "gpu7"}));
  const CutBound ag = allGatherBound(pg);
  EXPECT_NEAR(ag.rate, 31.52, 1e-6);
  EXPECT_EQ(ag.inside.size(), 2u);
  EXPECT_NEAR(ag.crossing, 15.76, 1e-6);
  EXPECT_NEAR(allReduceBound(pg), 15.76, 1e-6);
  // ring4 (links 25, 25, 50, 25): the trees' optimum 37.5 is above
  // reduce-scatter + all-gather and below every two-way cut; whatever
  // partition the dual gives is a bound, so never below the optimum.
  const PlanGraph ring = PlanGraph::fromTopology(topo::placeRanksOn(
      topo::loadTopologyFile(dir + "/ring4_addr.json"), {"gpu0", "gpu1", "gpu2", "gpu3"}));
  EXPECT_NEAR(allReduceBound(ring), 37.5, 1e-6);
  const PartitionBound part = allReducePartition(ring);
  EXPECT_GE(part.rate, 37.5 * (1 - 1e-9));
  EXPECT_GE(part.parts.size(), 2u);
  EXPECT_NEAR(1 / (1 / allGatherBound(ring).rate + 1 / reduceScatterBound(ring).rate), 100.0 / 3,
              1e-6);
}

TEST(PlannerOptimum, PackingsWithinOnePercentOfTheStoredOptimum) {
  const std::string dir = GROVE_TOPO_FIXTURES;
  std::ifstream in(dir + "/../plan_optimum.json");
  ASSERT_TRUE(in) << "tests/fixtures/plan_optimum.json is missing (scripts/plan-optimum writes it)";
  std::stringstream text;
  text << in.rdbuf();
  const topo::json::Value doc = topo::json::parse(text.str(), "plan_optimum.json");
  const topo::json::Value* rows = doc.get("rows");
  ASSERT_TRUE(rows && rows->isArray() && rows->items.size() >= 70);
  std::map<std::string, Graph> graphs;
  double worstAr = 1, worstBc = 1, worstFairAr = 1, worstFairBc = 1;
  for (const topo::json::Value& row : rows->items) {
    const std::string name = row.get("topology")->text;
    if (!graphs.count(name))
      graphs.emplace(name, topo::loadTopologyFile(dir + "/" + name + ".json"));
    std::vector<std::string> nodes;
    for (const topo::json::Value& v : row.get("nodes")->items) nodes.push_back(v.text);
    SCOPED_TRACE(name + " " + row.get("gpus")->text);
    TopoPlans plans(PlanGraph::fromTopology(topo::placeRanksOn(graphs.at(name), nodes)));
    const double ar = row.get("allreduce")->number, bc = row.get("broadcast")->number;
    const TreePlan& art = plans.allReduceTrees();
    const TreePlan& bct = plans.rootedTrees(0);
    EXPECT_NEAR(art.optimum, ar, 1e-5 * ar);
    EXPECT_NEAR(bct.optimum, bc, 1e-5 * bc);
    EXPECT_NEAR(art.bound, ar, 1e-5 * ar) << "the all-reduce bound is the proven optimum";
    // The packer's own packing (the plan may be the heterogeneous split
    // instead, when its trees run faster).
    const TreePlan jointAr = packAllReduceTrees(plans.graph());
    const TreePlan jointBc = packTrees(plans.graph(), 0);
    EXPECT_GE(jointAr.packedRate, 0.99 * ar) << jointAr.trees.size() << " trees";
    EXPECT_GE(jointBc.packedRate, 0.99 * bc) << jointBc.trees.size() << " trees";
    EXPECT_LE(art.packedRate, ar * (1 + 1e-6));
    EXPECT_LE(bct.packedRate, bc * (1 + 1e-6));
    // What the trees run at with their streams sharing links fairly.
    EXPECT_GE(art.rate, 0.95 * ar) << art.trees.size() << " trees";
    EXPECT_GE(bct.rate, 0.95 * bc) << bct.trees.size() << " trees";
    EXPECT_LE(art.rate, art.packedRate * (1 + 1e-9));
    EXPECT_LE(bct.rate, bct.packedRate * (1 + 1e-9));
    worstAr = std::min(worstAr, jointAr.packedRate / ar);
    worstBc = std::min(worstBc, jointBc.packedRate / bc);
    worstFairAr = std::min(worstFairAr, art.rate / ar);
    worstFairBc = std::min(worstFairBc, bct.rate / bc);
  }
  std::printf("worst packed / optimum: all-reduce %.4f, broadcast %.4f over %zu rows\n", worstAr,
              worstBc, rows->items.size());
  std::printf("worst fair shares / optimum: all-reduce %.4f, broadcast %.4f\n", worstFairAr,
              worstFairBc);
}

}  // namespace
}  // namespace grove::plan

// The planner mathematics (algorithms/planner/topo_plans.h): plan graph, routes, max
// flow and bounds, ring search, tree packing, heterogeneous split,
// hierarchical plans, on every topology fixture and on hand-built graphs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "algorithms/planner/topo_plans.h"
#include "base/error.h"
#include "topology/comm_topology.h"
#include "topology/topo_file.h"
#include "unit/topo_fixtures.h"

namespace grove::plan {
namespace {

using fixtures::fixture;
using fixtures::onGpus;
using topo::CommTopology;
using topo::DeviceKind;
using topo::Graph;
using topo::LinkKind;
using topo::NodeKind;

struct Case {
  std::string name;
  CommTopology topo;
};

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const char* f : {"dgx1_p100.json", "dgx1_v100.json", "dgx2.json", "dgx_a100.json",
                        "dgx_h100.json", "pcie_8gpu_2socket.json", "dgx1_v100_nccl.xml"}) {
    Graph g = fixture(f);
    int gpus = static_cast<int>(g.nodesOfKind(NodeKind::kGpu).size());
    cases.push_back({f, topo::placeRanks(g, gpus, 0, DeviceKind::kCuda)});
  }
  Graph cl = fixture("cluster_2x4nic.json");
  cases.push_back({"cluster_2x4nic.json", topo::placeRanks(cl, 16, 8, DeviceKind::kCuda)});
  Graph v = fixture("dgx1_v100.json");
  cases.push_back({"dgx1_v100{0,3,4,7}", onGpus(v, {0, 3, 4, 7})});
  cases.push_back({"dgx1_v100{0,1,5}", onGpus(v, {0, 1, 5})});
  cases.push_back({"dgx1_v100{0,1,4}", onGpus(v, {0, 1, 4})});
  cases.push_back({"dgx1_v100{1,2,5,6}", onGpus(v, {1, 2, 5, 6})});
  cases.push_back(
      {"cpu_host x4", topo::placeRanks(fixture("cpu_host.json"), 4, 0, DeviceKind::kHost)});
  return cases;
}

// Every parent chain reaches the root without a cycle.
void expectSpanning(const Tree& t, int n, const std::string& what) {
  ASSERT_EQ(static_cast<int>(t.parent.size()), n) << what;
  ASSERT_EQ(t.parent[static_cast<size_t>(t.root)], -1) << what;
  for (int v = 0; v < n; ++v) {
    int u = v, steps = 0;
    while (u != t.root && steps <= n) {
      u = t.parent[static_cast<size_t>(u)];
      ASSERT_GE(u, 0) << what << ": rank " << v << " has no parent chain to the root";
      ++steps;
    }
    EXPECT_LE(steps, n) << what << ": cycle through rank " << v;
  }
}

void expectWithinCapacity(const PlanGraph& g, const std::vector<double>& load,
                          const std::string& what) {
  for (size_t l = 0; l < load.size(); ++l)
    EXPECT_LE(load[l], g.links()[l].cap * (1 + 1e-9))
        << what << ": link " << g.vertexName(g.links()[l].from) << "->"
        << g.vertexName(g.links()[l].to);
}

void expectHamiltonian(const Ring& r, int n, const std::string& what) {
  std::set<int> seen(r.order.begin(), r.order.end());
  EXPECT_EQ(static_cast<int>(r.order.size()), n) << what;
  EXPECT_EQ(static_cast<int>(seen.size()), n) << what;
  EXPECT_GT(r.rate, 0) << what;
}

TEST(PlannerFixtures, TreesRingsAndBounds) {
  std::printf("\n%-22s %5s %8s %8s %6s %8s %8s %8s %6s %8s %8s %8s %-10s %8s %-10s\n", "fixture",
              "ranks", "bcast", "bcastUB", "trees", "hetero", "allred", "arUB", "trees", "arHet",
              "rings", "ringsGB", "class", "ncclGB", "ncclClass");
  for (const Case& c : allCases()) {
    SCOPED_TRACE(c.name);
    PlanGraph g = PlanGraph::fromTopology(c.topo);
    const int n = g.nranks();
    TreePlan bt = packTrees(g, 0, {});
    ASSERT_FALSE(bt.trees.empty());
    for (const Tree& t : bt.trees) expectSpanning(t, n, c.name + " rooted");
    expectWithinCapacity(g, linkLoad(g, bt.trees, false), c.name + " broadcast trees");
    std::vector<Tree> reduce(bt.trees);  // reduce: the same trees upward
    for (Tree& t : reduce) t.down = t.up;
    expectWithinCapacity(g, linkLoad(g, reduce, false), c.name + " reduce trees");
    EXPECT_NEAR(bt.bound, broadcastBound(g, 0), 1e-9);
    EXPECT_GE(bt.rate, 0.95 * bt.bound) << c.name << ": " << bt.rate << " of " << bt.bound;
    EXPECT_LE(bt.rate, bt.bound * (1 + 1e-6));
    EXPECT_LE(static_cast<int>(bt.trees.size()), PackOptions{}.maxTrees);

    TreePlan ht = packHetero(g, 0, false, {});
    for (const Tree& t : ht.trees) expectSpanning(t, n, c.name + " hetero");
    expectWithinCapacity(g, linkLoad(g, ht.trees, false), c.name + " hetero trees");
    EXPECT_LE(ht.rate, bt.bound * (1 + 1e-6));

    TreePlan at = packAllReduceTrees(g, {});
    ASSERT_FALSE(at.trees.empty());
    for (const Tree& t : at.trees) expectSpanning(t, n, c.name + " all-reduce");
    expectWithinCapacity(g, linkLoad(g, at.trees, true), c.name + " all-reduce trees");
    EXPECT_NEAR(at.bound, allReduceBound(g), 1e-6 * at.bound);  // both stop at a 1e-7 gap
    EXPECT_LE(at.rate, at.bound * (1 + 1e-6));
    TreePlan ah = packHetero(g, 0, true, {});
    expectWithinCapacity(g, linkLoad(g, ah.trees, true), c.name + " hetero all-reduce trees");
    EXPECT_LE(ah.rate, at.bound * (1 + 1e-6));

    RingPlan rings = searchRings(g);
    for (const Ring& r : rings.rings) expectHamiltonian(r, n, c.name + " rings");
    expectWithinCapacity(g, linkLoad(g, rings.rings), c.name + " rings");
    RingPlan nccl = ncclLikeRings(g);
    for (const Ring& r : nccl.rings) expectHamiltonian(r, n, c.name + " nccl rings");
    expectWithinCapacity(g, linkLoad(g, nccl.rings), c.name + " nccl rings");
    EXPECT_LE(nccl.rate, rings.rate * 1.03 + 1e-9)
        << "the ring search should not lose to the greedy one";
    std::printf(
        "%-22s %5d %8.2f %8.2f %6zu %8.2f %8.2f %8.2f %6zu %8.2f %8.2f %8zu %-10s %8.2f %-10s\n",
        c.name.c_str(), n, bt.rate, bt.bound, bt.trees.size(), ht.rate, at.rate, at.bound,
        at.trees.size(), ah.rate, rings.rate, rings.rings.size(), rings.linkClass.c_str(),
        nccl.rate, nccl.linkClass.c_str());
  }
  std::printf(
      "(GB/s. bcast: broadcast trees from rank 0; allred: all-reduce trees (each edge both ways);\n"
      " rings: per-link rate of the ring set; UB: max-flow bounds)\n");
}

TEST(PlannerFixtures, NcclLikeRingsPickOneClass) {
  Graph v = fixture("dgx1_v100.json");
  PlanGraph all = PlanGraph::fromTopology(topo::placeRanks(v, 8, 0, DeviceKind::kCuda));
  RingPlan r = ncclLikeRings(all);
  EXPECT_EQ(r.linkClass, "nvlink");
  for (const Ring& ring : r.rings)
    for (const std::vector<int>& hop : ring.routes)
      for (int li : hop) {
        if (all.links()[static_cast<size_t>(li)].topoLink >= 0) {
          EXPECT_EQ(all.links()[static_cast<size_t>(li)].kind, LinkKind::kNvLink);
        }
      }
  for (std::vector<int> gpus : {std::vector<int>{0, 1, 5}, std::vector<int>{0, 1, 4}}) {
    PlanGraph g = PlanGraph::fromTopology(onGpus(v, gpus));
    EXPECT_EQ(ncclLikeRings(g).linkClass, "pcie") << "no NVLink ring among these GPUs";
  }
  PlanGraph frag = PlanGraph::fromTopology(onGpus(v, {0, 3, 4, 7}));
  RingPlan nr = ncclLikeRings(frag), sr = searchRings(frag);
  TreePlan bt = packTrees(frag, 0), at = packAllReduceTrees(frag);
  EXPECT_EQ(nr.linkClass, "nvlink");
  EXPECT_NEAR(nr.rate, 50, 1e-6);  // 0->3->7->4 both ways, 3-7 is one NVLink (25 GB/s)
  const double ringAr = sr.rate * 4 / (2.0 * 3);
  std::printf(
      "\nDGX-1V GPUs {0,3,4,7}: NCCL-like rings %.2f GB/s (%s), searched rings %.2f GB/s (%s),\n"
      "  broadcast trees %.2f GB/s (bound %.2f) = %.2fx the searched rings;\n"
      "  all-reduce: trees %.2f GB/s vs searched rings %.2f GB/s algbw (ring rate * n / 2(n-1)) = "
      "%.2fx\n",
      nr.rate, nr.linkClass.c_str(), sr.rate, sr.linkClass.c_str(), bt.rate, bt.bound,
      bt.rate / sr.rate, at.rate, ringAr, at.rate / ringAr);
  EXPECT_GT(bt.rate, 1.4 * nr.rate);
}

}  // namespace
}  // namespace grove::plan

// The plan store (algorithms/planner/plan_store.h): plans taken from it are
// bit for bit the plans planning makes, on the fixtures; the fingerprint
// tells graphs, knobs and judges apart; text that is not a plan of the graph
// is refused and planned again; a directory others may write to is not used.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "algorithms/planner/plan_store.h"
#include "algorithms/planner/topo_plans.h"
#include "unit/topo_fixtures.h"

namespace grove::plan {
namespace {

using fixtures::fixture;
using fixtures::onGpus;

PlanGraph graphOf(const std::string& name, const std::vector<int>& gpus) {
  return PlanGraph::fromTopology(onGpus(fixture(name), gpus));
}

void expectSameRings(const RingPlan& a, const RingPlan& b) {
  EXPECT_EQ(a.rate, b.rate);
  EXPECT_EQ(a.linkClass, b.linkClass);
  ASSERT_EQ(a.rings.size(), b.rings.size());
  for (size_t i = 0; i < a.rings.size(); ++i) {
    EXPECT_EQ(a.rings[i].order, b.rings[i].order);
    EXPECT_EQ(a.rings[i].rate, b.rings[i].rate);  // exact: shares split alike on every rank
    EXPECT_EQ(a.rings[i].routes, b.rings[i].routes);
  }
}

void expectSameTrees(const TreePlan& a, const TreePlan& b) {
  EXPECT_EQ(a.rate, b.rate);
  EXPECT_EQ(a.packedRate, b.packedRate);
  EXPECT_EQ(a.bound, b.bound);
  EXPECT_EQ(a.optimum, b.optimum);
  ASSERT_EQ(a.trees.size(), b.trees.size());
  for (size_t i = 0; i < a.trees.size(); ++i) {
    const Tree& x = a.trees[i];
    const Tree& y = b.trees[i];
    EXPECT_EQ(x.root, y.root);
    EXPECT_EQ(x.rate, y.rate);
    EXPECT_EQ(x.channels, y.channels);
    EXPECT_EQ(x.parent, y.parent);
    EXPECT_EQ(x.upParent, y.upParent);
    EXPECT_EQ(x.down, y.down);
    EXPECT_EQ(x.up, y.up);
  }
}

struct StoreCase {
  const char* file;
  std::vector<int> gpus;
};

TEST(PlanStore, PlansFromTheStoreAreThePlansPlanningMakes) {
  for (const StoreCase& c :
       {StoreCase{"dgx1_v100.json", {0, 1, 2, 3, 4, 5, 6, 7}},
        StoreCase{"dgx1_p100.json", {0, 1, 4, 5}}, StoreCase{"dgx_h100.json", {0, 1, 2, 3}},
        StoreCase{"pcie_8gpu_2socket.json", {0, 1, 2, 3, 4, 5, 6, 7}}}) {
    SCOPED_TRACE(c.file);
    PlanStore store;
    TopoPlans fresh(graphOf(c.file, c.gpus));
    fresh.useStore(&store);
    const RingPlan rings = fresh.rings();
    const RingPlan nccl = fresh.ncclRings();
    const TreePlan ar = fresh.allReduceTrees();
    const TreePlan rooted = fresh.rootedTrees(1);
    const HierPlan hier = fresh.hierarchical();
    EXPECT_EQ(store.saves(), 5u);
    EXPECT_EQ(store.hits(), 0u);

    TopoPlans again(graphOf(c.file, c.gpus));
    again.useStore(&store);
    expectSameRings(rings, again.rings());
    expectSameRings(nccl, again.ncclRings());
    expectSameTrees(ar, again.allReduceTrees());
    expectSameTrees(rooted, again.rootedTrees(1));
    EXPECT_EQ(hier.machines, again.hierarchical().machines);
    EXPECT_EQ(hier.leaders, again.hierarchical().leaders);
    EXPECT_EQ(hier.rate, again.hierarchical().rate);
    EXPECT_EQ(store.hits(), 5u);
    EXPECT_EQ(store.saves(), 5u);  // nothing was planned again
  }
}

TEST(PlanStore, TheFingerprintTellsGraphsKnobsAndJudgesApart) {
  const PlanGraph a = graphOf("dgx1_v100.json", {0, 1, 2, 3});
  const PlanGraph same = graphOf("dgx1_v100.json", {0, 1, 2, 3});
  const PlanGraph other = graphOf("dgx1_v100.json", {0, 1, 2, 4});
  const PlanGraph order = graphOf("dgx1_v100.json", {1, 0, 2, 3});
  const PackOptions knobs;
  const std::string f = planFingerprint(a, knobs, "");
  EXPECT_EQ(f.size(), 32u);
  EXPECT_EQ(f, planFingerprint(same, knobs, ""));
  EXPECT_NE(f, planFingerprint(other, knobs, ""));
  EXPECT_NE(f, planFingerprint(order, knobs, ""));  // the ranks' placement counts
  EXPECT_NE(f, planFingerprint(a, knobs, "judge:33554432"));
  PackOptions fewer = knobs;
  fewer.maxTrees = 8;
  EXPECT_NE(f, planFingerprint(a, fewer, ""));
  PackOptions oneVertex = knobs;
  oneVertex.fanTrees = 0;
  EXPECT_NE(f, planFingerprint(a, oneVertex, ""));
}

TEST(PlanStore, TextThatIsNotAPlanOfTheGraphIsRefused) {
  const PlanGraph g = graphOf("dgx1_v100.json", {0, 1, 2, 3});
  TopoPlans plans{PlanGraph(g)};
  const std::string rings = encodeRings(plans.rings());
  const std::string trees = encodeTrees(plans.allReduceTrees());
  const std::string hier = encodeHier(plans.hierarchical());
  RingPlan r;
  TreePlan t;
  HierPlan h;
  std::string why;
  ASSERT_TRUE(decodeRings(rings, g, &r, &why)) << why;
  ASSERT_TRUE(decodeTrees(trees, g, &t, &why)) << why;
  ASSERT_TRUE(decodeHier(hier, g, &h, &why)) << why;

  auto replaced = [](std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
  // A ring of 4 ranks whose order is "4 a b c d": make it visit a rank twice.
  const size_t ring = rings.find(" ring ");
  ASSERT_NE(ring, std::string::npos);
  std::string twice = rings;
  {
    const size_t count = twice.find(" 4 ", ring + 6);
    ASSERT_NE(count, std::string::npos);
    const size_t first = count + 3;
    const size_t second = twice.find(' ', first) + 1;
    const std::string a = twice.substr(first, twice.find(' ', first) - first);
    const size_t secondEnd = twice.find(' ', second);
    twice.replace(second, secondEnd - second, a);
  }
  EXPECT_FALSE(decodeRings(twice, g, &r, &why));
  EXPECT_NE(why.find("twice"), std::string::npos) << why;
  EXPECT_FALSE(decodeRings(rings + " 7", g, &r, &why));
  EXPECT_FALSE(decodeRings(rings.substr(0, rings.size() / 2), g, &r, &why));
  // Another format version.
  EXPECT_FALSE(decodeRings(replaced(rings, "grove-rings ", "grove-rings 9"), g, &r, &why));
  EXPECT_FALSE(decodeRings("", g, &r, &why));
  EXPECT_FALSE(decodeRings(trees, g, &r, &why));  // a tree plan is not a ring plan
  // A rate that is not a finite non-negative number.
  EXPECT_FALSE(decodeTrees(replaced(trees, "rate ", "rate -"), g, &t, &why));
  EXPECT_FALSE(decodeTrees(replaced(trees, "rate ", "rate inf "), g, &t, &why));
  // A graph of another size: the ranks and routes do not fit.
  const PlanGraph bigger = graphOf("dgx1_v100.json", {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_FALSE(decodeRings(rings, bigger, &r, &why));
  EXPECT_FALSE(decodeTrees(trees, bigger, &t, &why));
  EXPECT_FALSE(decodeHier(hier, bigger, &h, &why));
}

TEST(PlanStore, AnUnusablePlanIsDroppedAndPlannedAgain) {
  const PlanGraph g = graphOf("dgx1_v100.json", {0, 1, 2, 3});
  PlanStore store;
  TopoPlans first{PlanGraph(g)};
  first.useStore(&store);
  const RingPlan rings = first.rings();
  // Spoil the stored plan: same name, garbage inside.
  const std::string name = planFingerprint(g, PackOptions{}, "") + "-rings";
  ASSERT_TRUE(store.load(name).has_value());
  store.drop(name);
  store.save(name, "grove-rings 2 rate 0x1p+0 class - rings 1 ring 0x1p+0 4 0 0 1 2 0\n");
  TopoPlans second{PlanGraph(g)};
  second.useStore(&store);
  expectSameRings(rings, second.rings());  // planned again, not taken
  std::optional<std::string> now = store.load(name);
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(*now, encodeRings(rings));  // the good plan replaced the bad one
}

TEST(PlanStore, AJudgeWithoutANameKeepsThePlansOutOfTheStore) {
  PlanStore store;
  TopoPlans plans(graphOf("dgx1_v100.json", {0, 1, 2, 3}));
  plans.setTreeJudge([](const std::vector<Tree>& trees, bool, int) {
    return 1.0 / static_cast<double>(trees.size());
  });
  plans.useStore(&store);
  plans.allReduceTrees();
  EXPECT_EQ(store.saves(), 0u);
}

/// A fresh temporary folder, removed with what is in it at the end.
struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/grove-plan-store-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    path = d ? d : "/nonexistent";
  }
  ~TempDir() {
    if (path != "/nonexistent") std::system(("rm -rf '" + path + "'").c_str());
  }
  std::string path;
};

int filesIn(const std::string& dir) {
  const std::string cmd = "ls -A '" + dir + "' 2>/dev/null | wc -l";
  FILE* p = ::popen(cmd.c_str(), "r");
  int n = -1;
  if (p) {
    if (std::fscanf(p, "%d", &n) != 1) n = -1;
    ::pclose(p);
  }
  return n;
}

TEST(PlanStore, ADirectoryKeepsPlansForTheNextProcess) {
  TempDir tmp;
  const std::string dir = tmp.path + "/plans";  // made by the store, mode 0700
  const PlanGraph g = graphOf("dgx1_p100.json", {0, 1, 4, 5});
  RingPlan rings;
  {
    PlanStore one;
    TopoPlans plans{PlanGraph(g)};
    plans.useStore(&one, dir);
    rings = plans.rings();
  }
  EXPECT_EQ(filesIn(dir), 1);
  PlanStore two;  // as in another process: nothing in memory
  TopoPlans plans{PlanGraph(g)};
  plans.useStore(&two, dir);
  expectSameRings(rings, plans.rings());
  EXPECT_EQ(two.hits(), 1u);
  EXPECT_EQ(two.saves(), 0u);
}

TEST(PlanStore, ADirectoryOthersMayWriteToIsNotUsed) {
  TempDir tmp;
  const std::string dir = tmp.path + "/open";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  PlanStore store;
  TopoPlans plans(graphOf("dgx1_p100.json", {0, 1, 4, 5}));
  plans.useStore(&store, dir);
  plans.rings();
  EXPECT_EQ(filesIn(dir), 0);  // kept in memory only
  EXPECT_EQ(store.saves(), 1u);
}

}  // namespace
}  // namespace grove::plan

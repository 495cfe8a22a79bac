// Tree sets by call size: the judges of larger calls choose sets of their
// own, the plan keeps them through the plan cache's text, and the builder
// runs the set of the call's size (or of PlanParams::planBytes).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "algorithms/builders/builders.h"
#include "algorithms/planner/plan_store.h"
#include "algorithms/planner/topo_plans.h"
#include "algorithms/select/selector.h"
#include "unit/topo_fixtures.h"

namespace grove::plan {
namespace {

PlanGraph dgx1(const std::vector<int>& gpus) {
  return PlanGraph::fromTopology(fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), gpus));
}

/// Judges that prefer fewer trees (bucket-sized calls) and more trees
/// (calls from `from` up).
void preferFewThenMany(TopoPlans& plans, uint64_t from) {
  plans.setTreeJudge(
      [](const std::vector<Tree>& trees, bool, int) { return static_cast<double>(trees.size()); },
      "test-few", {SizeJudge{from, [](const std::vector<Tree>& trees, bool, int) {
                               return 1.0 / static_cast<double>(trees.size());
                             }}});
}

/// Distinct channels rank `rank`'s all-reduce program uses.
size_t channelsOf(TopoPlans& plans, uint64_t bytes, int rank, uint64_t planBytes = 0) {
  PlanParams p;
  p.planBytes = planBytes;
  const Program prog = build(
      Algo::kTree, CollArgs{Coll::kAllReduce, bytes / 4, groveFloat32, groveSum, 0, rank, 8, false},
      p, &plans);
  std::set<int> used;
  for (const Phase& ph : prog.phases)
    for (const Lane& l : ph.lanes)
      for (const Step& s : l.steps) used.insert(s.channel);
  return used.size();
}

TEST(TreeSizes, LargerCallsGetTheSetTheirJudgeChose) {
  TopoPlans plans(dgx1({0, 1, 2, 3, 4, 5, 6, 7}));
  const uint64_t from = 48ull << 20;
  preferFewThenMany(plans, from);
  const TreePlan& tp = plans.allReduceTrees();
  ASSERT_EQ(tp.larger.size(), 1u);
  EXPECT_EQ(tp.larger[0].fromBytes, from);
  EXPECT_LT(tp.trees.size(), tp.larger[0].trees.size()) << "each judge's preference";
  double rate = 0;
  for (const Tree& t : tp.larger[0].trees) rate += t.rate;
  EXPECT_DOUBLE_EQ(tp.larger[0].rate, rate);
  EXPECT_EQ(&tp.treesFor(from - 1), &tp.trees);
  EXPECT_EQ(&tp.treesFor(from), &tp.larger[0].trees);
  EXPECT_EQ(&tp.treesFor(1ull << 40), &tp.larger[0].trees);
  // The builder follows the call's size, or planBytes where it is set.
  const size_t small = channelsOf(plans, 32ull << 20, 0);
  const size_t large = channelsOf(plans, 64ull << 20, 0);
  EXPECT_NE(small, large);
  EXPECT_EQ(channelsOf(plans, 32ull << 20, 0, 64ull << 20), large);
}

TEST(TreeSizes, TheSetsBySizeSurviveThePlanCache) {
  const PlanGraph g = dgx1({0, 1, 2, 3, 4, 5, 6, 7});
  TopoPlans plans{PlanGraph(g)};
  preferFewThenMany(plans, 48ull << 20);
  const TreePlan& tp = plans.allReduceTrees();
  ASSERT_FALSE(tp.larger.empty());
  TreePlan back;
  std::string why;
  ASSERT_TRUE(decodeTrees(encodeTrees(tp), g, &back, &why)) << why;
  ASSERT_EQ(back.larger.size(), tp.larger.size());
  EXPECT_EQ(back.larger[0].fromBytes, tp.larger[0].fromBytes);
  EXPECT_EQ(back.larger[0].rate, tp.larger[0].rate);
  ASSERT_EQ(back.larger[0].trees.size(), tp.larger[0].trees.size());
  for (size_t i = 0; i < tp.larger[0].trees.size(); ++i) {
    EXPECT_EQ(back.larger[0].trees[i].parent, tp.larger[0].trees[i].parent);
    EXPECT_EQ(back.larger[0].trees[i].rate, tp.larger[0].trees[i].rate);
    EXPECT_EQ(back.larger[0].trees[i].channels, tp.larger[0].trees[i].channels);
  }
  // A set from 0 bytes (no larger than the first) is refused.
  std::string text = encodeTrees(tp);
  const size_t at = text.find(" from ");
  ASSERT_NE(at, std::string::npos);
  const size_t number = at + 6;
  text.replace(number, text.find(' ', number) - number, "0");
  EXPECT_FALSE(decodeTrees(text, g, &back, &why));
}

TEST(TreeSizes, WithoutLargerJudgesOneSetServesEverySize) {
  TopoPlans plans(dgx1({0, 3, 4, 7}));
  const TreePlan& tp = plans.allReduceTrees();
  EXPECT_TRUE(tp.larger.empty());
  EXPECT_EQ(&tp.treesFor(1ull << 40), &tp.trees);
}

}  // namespace
}  // namespace grove::plan

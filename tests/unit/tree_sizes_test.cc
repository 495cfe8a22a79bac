// Tree sets by call size: the judges of larger calls choose sets of their
// own, the plan keeps them through the plan cache's text, and the builder
// runs the set of the call's size (or of PlanParams::planBytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "algorithms/builders/builders.h"
#include "algorithms/planner/plan_store.h"
#include "algorithms/planner/planner_internal.h"
#include "algorithms/planner/topo_plans.h"
#include "algorithms/select/selector.h"
#include "base/error.h"
#include "unit/topo_fixtures.h"

namespace grove::plan {
namespace {

/// What a judge was asked. Judges run on several threads at once
/// (judgeSets), so the record is kept under a lock.
template <typename T>
class Asked {
 public:
  void add(T v) {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(std::move(v));
  }
  std::vector<T> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.clear();
  }

 private:
  std::mutex mu_;
  std::vector<T> seen_;
};

PlanGraph dgx1(const std::vector<int>& gpus) {
  return PlanGraph::fromTopology(fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), gpus));
}

/// Judges that prefer fewer trees (bucket-sized calls: every set ties, and
/// fewer trees win a tie, so every set is near the fastest and the larger
/// judge weighs the first four listed, the packing's own reduction first)
/// and more trees (calls from `from` up).
void preferFewThenMany(TopoPlans& plans, uint64_t from) {
  plans.setTreeJudge([](const std::vector<Tree>&, bool, int) { return 1.0; }, "test-few",
                     {SizeJudge{from, [](const std::vector<Tree>& trees, bool, int) {
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

/// `n` (empty) trees: the test judges look at the count only.
std::vector<Tree> treesOf(size_t n) { return std::vector<Tree>(n); }

TEST(TreeSizes, TheLargerJudgeWeighsOnlySetsNearTheWinner) {
  // The first judge prefers fewer trees; 3 trees against 8 is more than
  // the margin, 3 against 3 a tie. The larger judge prefers more trees, but
  // is asked only about the sets near the first judge's winner.
  const std::vector<Tree> a = treesOf(3), b = treesOf(3), c = treesOf(8);
  auto asked = std::make_shared<Asked<size_t>>();
  PackOptions o;
  o.judge = [](const std::vector<Tree>& trees, bool, int) {
    return static_cast<double>(trees.size());
  };
  o.largerJudges = {SizeJudge{48ull << 20, [asked](const std::vector<Tree>& trees, bool, int) {
                                asked->add(trees.size());
                                return trees.size() == 3 ? 1.0 : 0.5;
                              }}};
  // b ties a and wins the tie; only a and b are judged again.
  detail::Verdict v = detail::judgeSets(o, {{&a, true}, {&b, true}, {&c, true}}, true, 0);
  EXPECT_EQ(v.chosen, 1u);
  EXPECT_EQ(v.seconds, 3.0);
  ASSERT_EQ(v.larger.size(), 1u);
  EXPECT_EQ(v.larger[0], 1u);
  EXPECT_EQ(asked->seen(), (std::vector<size_t>{3, 3}));
  // A set that wins no tie stays behind an equal one listed before it.
  v = detail::judgeSets(o, {{&a, true}, {&b, false}}, true, 0);
  EXPECT_EQ(v.chosen, 0u);
  // The winner alone near: it serves the larger calls, unsimulated; a
  // known time is not simulated again either.
  asked->clear();
  o.judge = [](const std::vector<Tree>& trees, bool, int) {
    EXPECT_NE(trees.size(), 3u) << "its time was given";
    return static_cast<double>(trees.size());
  };
  v = detail::judgeSets(o, {{&c, true}, {&a, false, 2.0}}, true, 0);
  EXPECT_EQ(v.chosen, 1u);
  EXPECT_EQ(v.seconds, 2.0);
  ASSERT_EQ(v.larger.size(), 1u);
  EXPECT_EQ(v.larger[0], 1u);
  EXPECT_TRUE(asked->seen().empty());
  // No set the judge can build: nothing chosen.
  o.judge = [](const std::vector<Tree>&, bool, int) -> double {
    throwInvalidArgument("cannot build");
  };
  v = detail::judgeSets(o, {{&a, true}, {&c, true}}, true, 0);
  EXPECT_EQ(v.chosen, 2u);
  EXPECT_TRUE(v.larger.empty());
}

TEST(TreeSizes, TheLargerJudgeWeighsAtMostTheFourFastest) {
  // Six sets all near the winner at the first size: the larger judge
  // weighs the four fastest there, and the verdict hands on all six.
  std::vector<std::vector<Tree>> sets;
  for (size_t n : {2, 3, 4, 5, 6, 7}) sets.push_back(treesOf(n));
  auto asked = std::make_shared<Asked<size_t>>();
  PackOptions o;
  o.judge = [](const std::vector<Tree>& trees, bool, int) {
    return 1.0 + 1e-3 * static_cast<double>(8 - trees.size());
  };
  o.largerJudges = {SizeJudge{48ull << 20, [asked](const std::vector<Tree>& trees, bool, int) {
                                asked->add(trees.size());
                                return 1.0 / static_cast<double>(trees.size());
                              }}};
  std::vector<detail::JudgedSet> judged;
  for (const std::vector<Tree>& t : sets) judged.push_back({&t, true});
  const detail::Verdict v = detail::judgeSets(o, judged, true, 0);
  EXPECT_EQ(v.chosen, 5u);
  EXPECT_EQ(v.near, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(v.first.size(), 6u);
  EXPECT_DOUBLE_EQ(v.first[0], 1.006);
  std::vector<size_t> seen = asked->seen();
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<size_t>{4, 5, 6, 7}));
  ASSERT_EQ(v.larger.size(), 1u);
  EXPECT_EQ(v.larger[0], 5u);
  const std::vector<JudgedTrees> handed = detail::contendersOf(v, judged);
  ASSERT_EQ(handed.size(), 6u);
  EXPECT_EQ(handed[2].trees.size(), 4u);
  EXPECT_DOUBLE_EQ(handed[2].seconds, 1.004);
}

TEST(TreeSizes, TheJointPackingAndTheSplitMeetInOneLargerPool) {
  // The first judge puts the split's sets ahead by 1 % (every set near);
  // the larger judge prefers more trees. It is asked once, about the four
  // fastest of both packings' sets (the split's and the joint packing's),
  // and its choice serves the larger calls.
  const PlanGraph g = dgx1({0, 1, 2, 3, 4, 5, 6, 7});
  const TreePlan split = packHetero(g, 0, true, {});
  ASSERT_FALSE(split.trees.empty());
  std::set<std::vector<int>> shapes;
  for (const Tree& t : split.trees) shapes.insert(t.parent);
  auto fromSplit = [shapes](const std::vector<Tree>& trees) {
    for (const Tree& t : trees)
      if (shapes.count(t.parent) == 0) return false;
    return true;
  };
  auto asked = std::make_shared<Asked<std::pair<size_t, bool>>>();
  TopoPlans plans{PlanGraph(g)};
  plans.setTreeJudge(
      [fromSplit](const std::vector<Tree>& trees, bool, int) {
        return fromSplit(trees) ? 1.0 : 1.01;
      },
      "test-pool",
      {SizeJudge{48ull << 20, [asked, fromSplit](const std::vector<Tree>& trees, bool, int) {
                   asked->add({trees.size(), fromSplit(trees)});
                   return 1.0 / static_cast<double>(trees.size());
                 }}});
  const TreePlan& tp = plans.allReduceTrees();
  EXPECT_TRUE(fromSplit(tp.trees)) << "the first judge's choice";
  const std::vector<std::pair<size_t, bool>> seen = asked->seen();
  ASSERT_LE(seen.size(), 4u);
  size_t most = 0, split_ = 0;
  for (const auto& [n, isSplit] : seen) most = std::max(most, n), split_ += isSplit ? 1 : 0;
  EXPECT_GE(split_, 1u);
  EXPECT_LT(split_, seen.size()) << "the joint packing's sets were weighed too";
  ASSERT_EQ(tp.larger.size(), 1u);
  EXPECT_EQ(tp.larger[0].trees.size(), most);
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

namespace grove::plan {
namespace {

TEST(TreeSizes, AQuickJudgesNearTiesGoToTheExactJudge) {
  // The quick judge finds 3 trees 0.5 % ahead of 2 (within kAmbiguous) and
  // 1 tree far behind; the exact one, asked only about the two near the
  // fastest, finds 2 trees faster, and its verdict stands.
  const std::vector<Tree> one = treesOf(1), two = treesOf(2), three = treesOf(3);
  auto exactAsked = std::make_shared<Asked<size_t>>();
  auto largerAsked = std::make_shared<Asked<size_t>>();
  PackOptions o;
  o.judge = [](const std::vector<Tree>& trees, bool, int) {
    return trees.size() == 3 ? 1.0 : trees.size() == 2 ? 1.005 : 1.5;
  };
  o.exactJudge = [exactAsked](const std::vector<Tree>& trees, bool, int) {
    exactAsked->add(trees.size());
    return trees.size() == 3 ? 1.02 : 1.01;
  };
  // The larger judge's near tie (3 trees ahead by 0.1 %) goes the other way.
  o.largerJudges = {SizeJudge{
      48ull << 20,
      [](const std::vector<Tree>& trees, bool, int) { return trees.size() == 3 ? 2.0 : 2.002; },
      [largerAsked](const std::vector<Tree>& trees, bool, int) {
        largerAsked->add(trees.size());
        return trees.size() == 3 ? 2.1 : 2.05;
      }}};
  detail::Verdict v = detail::judgeSets(o, {{&three, true}, {&two, true}, {&one, true}}, true, 0);
  EXPECT_EQ(v.chosen, 1u);
  EXPECT_EQ(v.seconds, 1.01);  // the exact time
  std::vector<size_t> asked = exactAsked->seen();
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked, (std::vector<size_t>{2, 3}));
  ASSERT_EQ(v.larger.size(), 1u);
  EXPECT_EQ(v.larger[0], 1u);
  asked = largerAsked->seen();
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked, (std::vector<size_t>{2, 3}));
  // Apart by more than kAmbiguous, the quick judge's verdict stands and
  // the exact one is not asked.
  exactAsked->clear();
  o.judge = [](const std::vector<Tree>& trees, bool, int) {
    return trees.size() == 3 ? 1.0 : 1.0 + 2 * kAmbiguous;
  };
  o.largerJudges.clear();
  v = detail::judgeSets(o, {{&three, true}, {&two, true}}, true, 0);
  EXPECT_EQ(v.chosen, 0u);
  EXPECT_EQ(v.seconds, 1.0);
  EXPECT_TRUE(exactAsked->seen().empty());
}

}  // namespace
}  // namespace grove::plan

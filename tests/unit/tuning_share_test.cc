// The tuning bundle (algorithms/cost/tuning_share.h): the plans and tables
// one rank's tuning found, taken by a rank that did not tune, and bundles
// that must not be taken.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/cost/cost_model.h"
#include "algorithms/cost/tuning_share.h"
#include "algorithms/planner/plan_store.h"
#include "unit/link_presets.h"
#include "unit/topo_fixtures.h"

namespace grove::plan {
namespace {

constexpr uint64_t kJudgeBytes = 32 << 20;

topo::CommTopology fourGpus() {
  return fixtures::onGpus(fixtures::fixture("dgx1_v100.json"), {0, 1, 4, 5});
}

Selector selector() { return Selector(4, presets::deviceRingTraits(), SelectorConfig{}); }

/// A communicator's plans as tuneForFabric makes them: judged, stored.
struct Tuned {
  explicit Tuned(const topo::CommTopology& t, PlanStore* store)
      : plans(PlanGraph::fromTopology(t)), sel(selector()) {
    installTreeJudges(plans, sel, sim, kJudgeBytes);
    plans.useStore(store);
  }
  SimParams sim;
  TopoPlans plans;
  Selector sel;
};

void expectSameTables(const Selector& a, const Selector& b) {
  for (int c = 0; c < kNumColls; ++c) {
    const std::vector<SizeRule>& x = a.sizeTable(static_cast<Coll>(c));
    const std::vector<SizeRule>& y = b.sizeTable(static_cast<Coll>(c));
    ASSERT_EQ(x.size(), y.size()) << collName(static_cast<Coll>(c));
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(x[i].maxBytes, y[i].maxBytes);
      EXPECT_EQ(x[i].algo, y[i].algo);
    }
  }
}

class TuningShare : public ::testing::Test {
 protected:
  void SetUp() override {
    const topo::CommTopology t = fourGpus();
    leader_ = std::make_unique<Tuned>(t, &leaderStore_);
    leader_->plans.planAllReduce();
    tuneSelector(leader_->sel, leader_->plans, 4, leader_->sim);
    leader_->plans.rootedTrees(2);  // a plan made after the tuning goes too
    bundle_ = encodeTuning(leader_->plans, leader_->sel);
  }
  PlanStore leaderStore_;
  std::unique_ptr<Tuned> leader_;
  std::string bundle_;
};

TEST_F(TuningShare, ARankThatDidNotTuneTakesThePlansAndTables) {
  PlanStore store;  // another process's: nothing in it
  Tuned follower(fourGpus(), &store);
  std::string why;
  ASSERT_TRUE(applyTuning(bundle_, follower.plans, follower.sel, &why)) << why;
  const std::vector<TopoPlans::NamedPlan> made = leader_->plans.exportPlans();
  EXPECT_EQ(follower.plans.exportPlans(), made);
  std::vector<std::string> items;
  for (const auto& p : made) items.push_back(p.first);
  for (const char* item : {"rings", "nccl-rings", "trees-allreduce", "hier", "trees-root0",
                           "trees-root2", "forest-allgather", "forest-reducescatter"})
    EXPECT_NE(std::find(items.begin(), items.end(), item), items.end()) << item;
  expectSameTables(follower.sel, leader_->sel);
  EXPECT_FALSE(follower.sel.sizeTable(Coll::kAllReduce).empty());
  // Taken, not made: the plans answer from memory at once, and the same
  // fingerprint filed them in this rank's store for its next communicator.
  EXPECT_EQ(store.saves(), made.size());
  Tuned next(fourGpus(), &store);
  next.plans.rootedTrees(2);
  EXPECT_EQ(store.hits(), 1u);
  const auto root2 = std::find_if(made.begin(), made.end(),
                                  [](const auto& p) { return p.first == "trees-root2"; });
  ASSERT_NE(root2, made.end());
  EXPECT_EQ(next.plans.exportPlans().front(), *root2) << "trees-root2 as the leader made it";
}

TEST_F(TuningShare, PlansOfAnotherFingerprintServeButAreNotStored) {
  PlanStore store;
  Tuned follower(fourGpus(), &store);
  installTreeJudges(follower.plans, follower.sel, follower.sim, kJudgeBytes * 2);
  std::string why;
  ASSERT_TRUE(applyTuning(bundle_, follower.plans, follower.sel, &why)) << why;
  EXPECT_EQ(follower.plans.exportPlans(), leader_->plans.exportPlans());
  EXPECT_EQ(store.saves(), 0u);
}

TEST_F(TuningShare, ABundleThatDoesNotFitChangesNoTable) {
  auto refused = [&](const std::string& bundle, const std::string& reason) {
    PlanStore store;
    Tuned follower(fourGpus(), &store);
    std::string why;
    EXPECT_FALSE(applyTuning(bundle, follower.plans, follower.sel, &why)) << reason;
    EXPECT_NE(why.find(reason), std::string::npos) << why;
    for (int c = 0; c < kNumColls; ++c)
      EXPECT_TRUE(follower.sel.sizeTable(static_cast<Coll>(c)).empty()) << why;
  };
  refused("", "not a tuning bundle");
  refused("grove-tuning 2" + bundle_.substr(bundle_.find(' ', 13)), "another version");
  refused(bundle_.substr(0, bundle_.size() / 2), "cut short");
  refused(bundle_ + "allreduce 1 max ring\n", "goes on after");
  const size_t tables = bundle_.find("tables ");
  ASSERT_NE(tables, std::string::npos);
  refused(bundle_.substr(0, tables) + "tables 1\nallreduce 1 max wood\n", "names no algorithm");
  // A table the selector refuses: rows out of order.
  refused(bundle_.substr(0, tables) + "tables 1\nallreduce 2 max ring 1024 tree\n",
          "size table of allreduce");
  // A rooted plan under another root's name, and a root written oddly.
  const std::vector<TopoPlans::NamedPlan> made = leader_->plans.exportPlans();
  const auto root2 = std::find_if(made.begin(), made.end(),
                                  [](const auto& p) { return p.first == "trees-root2"; });
  ASSERT_NE(root2, made.end());
  auto onePlan = [&](const std::string& item) {
    return "grove-tuning 1 - 1\n" + item + " " + std::to_string(root2->second.size()) + " " +
           root2->second + "\ntables 0\n";
  };
  refused(onePlan("trees-root1"), "not rooted at rank 1");
  refused(onePlan("trees-root02"), "no plan is called");
  {
    PlanStore store;
    Tuned follower(fourGpus(), &store);
    std::string why;
    EXPECT_TRUE(applyTuning(onePlan("trees-root2"), follower.plans, follower.sel, &why)) << why;
  }
  // A plan of another graph: the ring names a rank this one lacks.
  std::string ring = "grove-tuning 1 - 1\nrings ";
  const std::string text = "grove-rings 4 rate 0x1p+0 rings 1 order 5 0 1 2 3 4 rate 0x1p+0";
  refused(ring + std::to_string(text.size()) + " " + text + "\ntables 0\n", "rings");
}

}  // namespace
}  // namespace grove::plan

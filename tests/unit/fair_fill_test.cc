// Progressive filling on its own: max-min fair rates worked out by hand,
// caps, groups of transfers over one path, and bad paths.
#include <gtest/gtest.h>

#include <limits>
#include <utility>
#include <vector>

#include "algorithms/cost/fair_fill.h"
#include "base/error.h"

namespace grove::plan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(FairFill, MaxMinFairWithACapAndTwoBottlenecks) {
  // Link 0 carries 10, link 1 carries 4. Paths: {0}, {0,1}, {1}, {} (none).
  FairFill fill({10, 4}, {{0}, {0, 1}, {1}, {}});
  // Two uncapped transfers on {0} (one group), one capped at 1 on {0}, one
  // on {0,1}, one on {1}, one stopped (cap 0), one crossing no link.
  const std::vector<int> path = {0, 0, 0, 1, 2, 0, 3};
  const std::vector<double> cap = {kInf, kInf, 1, kInf, kInf, 0, kInf};
  std::vector<double> rate(path.size(), -1);
  fill.rates(path, std::vector<int>(path.size(), 1), cap, rate);
  // The cap freezes first (1); link 1 fills next at 2 each ({0,1} and {1});
  // what is left of link 0 (10 - 1 - 2 = 7) goes to the two on {0}: 3.5.
  EXPECT_DOUBLE_EQ(rate[0], 3.5);
  EXPECT_DOUBLE_EQ(rate[1], 3.5);
  EXPECT_DOUBLE_EQ(rate[2], 1);
  EXPECT_DOUBLE_EQ(rate[3], 2);
  EXPECT_DOUBLE_EQ(rate[4], 2);
  EXPECT_EQ(rate[5], 0);
  EXPECT_EQ(rate[6], kInf);
}

TEST(FairFill, EveryLinkFullOrEveryTransferCappedAndCallsIndependent) {
  FairFill fill({12, 6, 9}, {{0, 1}, {1, 2}, {0}, {2}});
  auto rates = [&](const std::vector<int>& path, const std::vector<double>& cap,
                   std::vector<int> count = {}) {
    if (count.empty()) count.assign(path.size(), 1);
    std::vector<double> rate(path.size());
    fill.rates(path, count, cap, rate);
    return rate;
  };
  // Three on {0,1}, one on {1,2}: link 1 (6) splits four ways (1.5 each);
  // {0} takes what link 0 has left (12 - 4.5), {2} what link 2 has (9 - 1.5).
  const std::vector<double> r = rates({0, 0, 0, 1, 2, 3}, {kInf, kInf, kInf, kInf, kInf, kInf});
  for (int k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(r[k], 1.5);
  EXPECT_DOUBLE_EQ(r[4], 7.5);
  EXPECT_DOUBLE_EQ(r[5], 7.5);
  // The same transfers again give the same rates (no state carries over),
  // and a cap above the fair share changes nothing.
  EXPECT_EQ(rates({0, 0, 0, 1, 2, 3}, {kInf, kInf, kInf, 5, kInf, kInf}), r);
  // One transfer standing for three fills as the three did.
  EXPECT_EQ(rates({0, 1, 2, 3}, {kInf, kInf, kInf, kInf}, {3, 1, 1, 1}),
            (std::vector<double>{r[0], r[3], r[4], r[5]}));
  // Capped transfers leave their share to the others.
  const std::vector<double> c = rates({0, 1}, {0.5, kInf});
  EXPECT_DOUBLE_EQ(c[0], 0.5);
  EXPECT_DOUBLE_EQ(c[1], 5.5);
}

TEST(FairFill, AFollowerGoesNoFasterThanItsLeaderAndLeavesTheRest) {
  // Link 0 carries 2, link 1 carries 10, link 2 carries 1.
  FairFill fill({2, 10, 1}, {{0}, {1}, {2}});
  // 0: a leader over link 0; 1: its follower over link 1, beside 2 (free)
  // and 3 (a follower of 1: a chain); 4: a follower of 0 whose own link is
  // slower; 5: a follower of 6, which does not flow.
  const std::vector<int> path = {0, 1, 1, 1, 2, 1, 1};
  const std::vector<double> cap = {kInf, kInf, kInf, kInf, kInf, kInf, 0};
  const std::vector<std::pair<int, int>> follow = {{1, 0}, {3, 1}, {4, 0}, {5, 6}};
  std::vector<double> rate(path.size(), -1);
  fill.rates(path, std::vector<int>(path.size(), 1), cap, follow, rate);
  EXPECT_DOUBLE_EQ(rate[0], 2);
  EXPECT_DOUBLE_EQ(rate[1], 2);
  EXPECT_DOUBLE_EQ(rate[3], 2);
  EXPECT_DOUBLE_EQ(rate[4], 1);  // its own link holds it below its leader
  EXPECT_EQ(rate[5], 0);
  EXPECT_EQ(rate[6], 0);
  EXPECT_DOUBLE_EQ(rate[2], 6);  // link 1 less what the followers take
  // Without the pairs the four on link 1 share it equally.
  fill.rates(path, std::vector<int>(path.size(), 1), cap, rate);
  EXPECT_DOUBLE_EQ(rate[2], 2.5);
  // Followers of one leader over one path fill as one group of that many.
  const std::vector<int> path2 = {0, 1, 1, 1};
  const std::vector<std::pair<int, int>> follow2 = {{1, 0}, {2, 0}};
  std::vector<double> rate2(path2.size());
  const std::vector<int> count2 = {1, 1, 1, 1};
  const std::vector<double> cap2 = {kInf, kInf, kInf, kInf};
  fill.rates(path2, count2, cap2, follow2, rate2);
  EXPECT_EQ(rate2, (std::vector<double>{2, 2, 2, 6}));
}

TEST(FairFill, APathNamingNoLinkIsRejected) {
  EXPECT_THROW(FairFill({1, 2}, {{0}, {2}}), Error);
  EXPECT_THROW(FairFill({1}, {{-1}}), Error);
}

}  // namespace
}  // namespace grove::plan

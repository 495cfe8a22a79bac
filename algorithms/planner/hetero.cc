// Heterogeneous split: trees over the fast link class and trees over the
// rest, run at the same time.
//
// How it works: the links are split in two classes, NVLink (NVSwitch links
// are NVLink too) and everything else (PCIe, SMP, network); ranks' virtual
// ports belong to both. Trees are packed on the fast class first (packing
// over a capacity vector where the other class has capacity 0), then on the
// rest with what the fast trees left of the ports (a port shared by several
// ranks on one node is the only link both classes can load). Both sets are
// returned in one plan, each tree carrying data in proportion to its rate (its
// fair share, or the LP's weight when the judge finds that faster), so both
// classes finish together. When a class cannot span the ranks (no NVLink
// between some of them), there is no split: the other class alone is a packing
// the joint one covers, and the plan has no trees (TopoPlans then keeps the
// joint packing). The plan's bound is a bound of the whole graph (broadcast:
// Edmonds'; all-reduce: the flow bounds, since no column generation runs here,
// and `optimum` stays 0); TopoPlans keeps the better of the split and the joint
// packing and gives the split the joint packing's proven bound.
#include <algorithm>
#include <chrono>

#include "algorithms/planner/planner_internal.h"
#include "base/error.h"

namespace grove::plan {

TreePlan packHetero(const PlanGraph& g, int root, bool allReduce, const PackOptions& options) {
  detail::checkPackOptions(options);
  if (!allReduce && (root < 0 || root >= g.nranks()))
    throwInvalidArgument("packHetero: root " + std::to_string(root) + " out of range [0, " +
                         std::to_string(g.nranks()) + ")");
  const auto start = std::chrono::steady_clock::now();
  const std::vector<double> cap = g.capacities();
  const std::vector<std::vector<double>> classes = detail::classCapacities(g, cap);
  PackOptions half = options;
  half.judge = nullptr;     // each class alone is no call to judge
  half.fairShares = false;  // the classes meet at the ports: shared below, together
  half.maxTrees = std::max(1, options.maxTrees - options.maxTrees / 2);
  auto bound = [&](const std::vector<double>& c) {
    return allReduce ? detail::shardAllReduceBound(g, c) : detail::broadcastBoundCapped(g, root, c);
  };
  // The plan's bound: the whole graph's (all-reduce: the flow bounds).
  auto wholeBound = [&] { return allReduce ? detail::flowAllReduceBound(g, cap) : bound(cap); };
  // A class that cannot span the ranks alone (or is missing) leaves no
  // split: the other class alone is a packing the joint one covers (its LP
  // has every such tree), so there is nothing to pack here.
  // (A bound below 1 KB/s is the max flow's rounding of none.)
  auto none = [&] {
    TreePlan p;
    p.bound = wholeBound();
    p.planMs = detail::msSince(start);
    return p;
  };
  if (classes.empty()) return none();
  const std::vector<double>& fast = classes[0];
  std::vector<double> rest = classes[1];
  const double fastBound = bound(fast);
  if (!(fastBound > 1e-6) || !(bound(rest) > 1e-6)) return none();
  TreePlan plan = detail::packCapped(g, root, allReduce, half, fast, fastBound);
  detail::leaveToRest(g, linkLoad(g, plan.trees, allReduce), rest);
  half.maxTrees = std::max(1, options.maxTrees / 2);
  TreePlan slow = detail::packCapped(g, root, allReduce, half, rest, bound(rest));
  for (Tree& t : slow.trees) plan.trees.push_back(std::move(t));
  // The packing LP over both classes' trees at once (at least the two
  // packings' sum: the fast trees may take what the slow ones leave).
  std::vector<detail::Candidate> cands;
  std::vector<int> all;
  for (const Tree& t : plan.trees) {
    const std::map<int, int> use = detail::useOf(t, allReduce);
    all.push_back(static_cast<int>(cands.size()));
    cands.push_back(detail::Candidate{{use.begin(), use.end()}, 0});
  }
  plan.packedRate = detail::solveSubset(cands, all, cap);
  for (size_t i = 0; i < plan.trees.size(); ++i) plan.trees[i].rate = cands[i].weight;
  if (g.nranks() > kMaxJudgeRanks)
    half.judge = nullptr, half.fairShares = options.fairShares;
  else
    half = options;
  detail::chooseShares(half, cap, allReduce, root, plan);
  plan.rate = 0;
  for (const Tree& t : plan.trees) plan.rate += t.rate;
  plan.rounds += slow.rounds;
  plan.mwuTrees += slow.mwuTrees;
  if (g.nranks() > 1 && plan.trees.empty())
    throwInvalidUsage("packHetero: the ranks are not connected");
  plan.bound = wholeBound();
  plan.optimum = 0;
  plan.pricingRounds = 0;
  plan.planMs = detail::msSince(start);
  return plan;
}

}  // namespace grove::plan

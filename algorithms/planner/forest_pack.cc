// Forests for all-gather and reduce-scatter (ForestColl): every rank's
// block travels down broadcast trees rooted at that rank (all-gather), or is
// reduced up in-trees into it (reduce-scatter), the trees of every root
// sharing the links at once.
//
// How it works. In an all-gather rank r's block must reach every other
// rank. When the trees rooted at r carry x GB/s of it together, and every
// root's trees do, the call moves its n blocks in block/x seconds: an algbw
// of n * x. The best x solves the concurrent packing LP
//
//   max x  subject to  x <= sum of w_t over the trees t rooted at r  (every rank r)
//                      sum_t use_t(l) w_t <= cap(l)                  (every bounded link l)
//                      w >= 0
//
// (use_t(l): how often tree t's routes cross link l). Where routes may relay
// freely its optimum is the cut bound allGatherBound() (ForestColl's
// theorem); GPUs that do not forward can keep it below.
//
// Column generation solves it. The columns start as one tree per root,
// cheapest under 1/capacity (the widest, shortest). The LP over the columns
// (packing_lp.cc's simplex, with the objective x) has dual prices y(l) on
// the links and pi(r) on the roots, and a tree rooted at r improves the LP
// exactly when its links cost less than pi(r) under y. The cheapest tree of
// each root under y is the minimum arborescence over the cheapest routes
// (Chu-Liu/Edmonds, tree packing's oracle), so a pricing round asks every
// root for its cheapest tree and adds those that improve. Any prices also
// bound the optimum: every packing at rate x pays at least x * (the cheapest
// tree of r) for each root r out of sum_l cap(l) y(l), so x <= sum_l cap(l)
// y(l) / sum_r cheapest(r). The rounds stop when the LP meets that bound, when
// no root has a tree that improves, or after a few rounds (more ranks, fewer).
// Reduce-scatter is the mirror image: an in-tree's edges run child ->
// parent, so its routes are `up` and the oracle is the minimum in-tree.
//
// The LP's vertex holds few trees per root. The reduction drops, of the few
// lightest trees of roots that have more than one, the one whose loss costs
// least, always while more than maxTrees remain (at least one per rank) and
// further while the rate stays >= keep * the optimum. Last, the trees get
// channels and fair shares (fair_share.cc) with the slowest root's rate as
// the goal; the builder splits each root's block over its trees by those.
//
// The split. On a switch every route between two GPUs costs the same, and
// the LP's vertex holds stars (a root feeding fifteen children, which the
// builders serve four per step: 0.74-0.83 of their rate when simulated).
// Where the NVLinks meet at a switch and a judge is set
// (PackOptions::forestJudge), the forest is also packed class by class: over
// the NVLinks alone, seeded with chains rooted at every rank
// (chainCandidates), then over the other links and what the first left of
// the ports, each reduced to at most half the channels. The judge keeps
// the faster of the two (the joint forest on a tie). Not on an NVLink mesh
// (DGX-1): there the split's chains win at the judge's 32 MiB and lose at
// 256 MiB, where the joint forest's rate shows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "algorithms/planner/concurrent.h"
#include "algorithms/planner/planner_internal.h"
#include "base/error.h"

namespace grove::plan::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// The reduction stops where the LP keeps less than this of its optimum.
constexpr double kForestFloor = 0.8;
/// solveForest: x's cap in widest links (see there).
constexpr double kXCapWidths = 2e7;

/// 0, 1, ..., k - 1.
std::vector<int> indices(size_t k) {
  std::vector<int> all(k);
  for (size_t i = 0; i < k; ++i) all[i] = static_cast<int>(i);
  return all;
}

/// A column of the forest LP.
struct ForestCol {
  Tree tree;
  std::map<int, int> use;
  double weight = 0;
};

bool cheapestOf(const PlanGraph& g, const RouteTable& table, int root, bool gather,
                const std::vector<double>& cap, Tree& tree) {
  return gather ? cheapestTree(g, table, root, false, 0, cap, tree)
                : cheapestInTree(g, table, root, cap, tree);
}

/// The LP over the columns `which`: returns x (the rate every root
/// reaches); `weights` (in the order of `which`), `linkPrice` (by link) and
/// `rootPrice` (by rank) receive its solution and duals when given.
double forestLp(const std::vector<ForestCol>& cols, const std::vector<int>& which, int n,
                const std::vector<double>& cap, std::vector<double>* weights,
                std::vector<double>* linkPrice = nullptr,
                std::vector<double>* rootPrice = nullptr) {
  // Rows: one per root (x - its trees' weights <= 0), one capping x (a
  // forest over unbounded ports alone), then one per bounded link used.
  std::map<int, int> row;
  for (int k : which)
    for (auto [link, times] : cols[static_cast<size_t>(k)].use)
      if (cap[static_cast<size_t>(link)] < PlanGraph::kUnbounded / 2) row.emplace(link, 0);
  int rows = n + 1;
  for (auto& [link, idx] : row) idx = rows++;
  const size_t nc = which.size() + 1;  // column 0 is x
  std::vector<double> a(static_cast<size_t>(rows) * nc, 0.0), b(static_cast<size_t>(rows), 0.0);
  for (int r = 0; r <= n; ++r) a[static_cast<size_t>(r) * nc] = 1;
  // x's cap, a right-hand side the simplex scales its tolerance by (1e-10
  // of the largest): kXCapWidths widest links keep that at 0.2 % of the
  // widest link whatever the links' scale. The unbounded port's 1e9 GB/s
  // set it above links of a few MB/s (the emulated fabrics) and starved
  // some roots of every tree.
  double widest = 0;
  for (auto& [link, idx] : row) {
    b[static_cast<size_t>(idx)] = cap[static_cast<size_t>(link)];
    widest = std::max(widest, cap[static_cast<size_t>(link)]);
  }
  b[static_cast<size_t>(n)] = row.empty() ? PlanGraph::kUnbounded : kXCapWidths * widest;
  for (size_t j = 0; j < which.size(); ++j) {
    const ForestCol& c = cols[static_cast<size_t>(which[j])];
    a[static_cast<size_t>(c.tree.root) * nc + j + 1] = -1;
    for (auto [link, times] : c.use) {
      auto it = row.find(link);
      if (it != row.end()) a[static_cast<size_t>(it->second) * nc + j + 1] += times;
    }
  }
  std::vector<double> gain(nc, 0.0), duals;
  gain[0] = 1;
  const std::vector<double> x = solvePackingLp(rows, static_cast<int>(nc), a, b,
                                               linkPrice || rootPrice ? &duals : nullptr, &gain);
  if (weights) weights->assign(x.begin() + 1, x.end());
  if (rootPrice) rootPrice->assign(duals.begin(), duals.begin() + n);
  if (linkPrice) {
    linkPrice->assign(cap.size(), 0.0);
    for (auto& [link, idx] : row)
      (*linkPrice)[static_cast<size_t>(link)] = duals[static_cast<size_t>(idx)];
  }
  return x[0];
}

/// forestLp, writing the columns' weights.
double solveForest(std::vector<ForestCol>& cols, const std::vector<int>& which, int n,
                   const std::vector<double>& cap, std::vector<double>* linkPrice = nullptr,
                   std::vector<double>* rootPrice = nullptr) {
  std::vector<double> w;
  const double x = forestLp(cols, which, n, cap, &w, linkPrice, rootPrice);
  for (size_t j = 0; j < which.size(); ++j) cols[static_cast<size_t>(which[j])].weight = w[j];
  return x;
}

/// Column generation from one cheapest tree per root; returns the columns
/// and sets *upper to the best bound its prices proved (0: none).
std::vector<ForestCol> priceForest(const PlanGraph& g, bool gather, const std::vector<double>& cap,
                                   bool chains, int maxRounds, int* roundsOut, double* upper) {
  const int n = g.nranks();
  std::vector<ForestCol> cols;
  std::set<std::string> keys;
  auto addTree = [&](Tree t) {
    if (!keys.insert(keyOf(t)).second) return false;
    ForestCol c;
    c.use = useOf(t, gather, !gather);
    c.tree = std::move(t);
    cols.push_back(std::move(c));
    return true;
  };
  {
    const RouteTable table =
        cheapestRoutes(g, searchPrices(std::vector<double>(cap.size()), cap), cap);
    for (int r = 0; r < n; ++r) {
      Tree t;
      if (!cheapestOf(g, table, r, gather, cap, t)) return {};
      addTree(std::move(t));
    }
    if (chains)
      for (Tree& c : chainsFromEveryRank(g, cap)) addTree(std::move(c));
  }
  *upper = 0;
  int round = 0;
  for (; round < maxRounds; ++round) {
    const std::vector<int> all = indices(cols.size());
    std::vector<double> y, pi;
    const double x = solveForest(cols, all, n, cap, &y, &pi);
    const RouteTable table = cheapestRoutes(g, searchPrices(y, cap), cap);
    double budget = 0, cheapest = 0;
    for (size_t l = 0; l < cap.size(); ++l)
      if (cap[l] < PlanGraph::kUnbounded / 2) budget += cap[l] * y[l];
    bool added = false;
    for (int r = 0; r < n; ++r) {
      Tree t;
      if (!cheapestOf(g, table, r, gather, cap, t)) return {};
      const double price = priceOf(useOf(t, gather, !gather), y);
      cheapest += price;
      if (price < pi[static_cast<size_t>(r)] * (1 - 1e-9) && addTree(std::move(t))) added = true;
    }
    if (cheapest > 0) {
      const double bound = budget / cheapest;
      if (*upper == 0 || bound < *upper) *upper = bound;
    }
    if (!added || (*upper > 0 && x >= *upper * (1 - 1e-7))) {
      ++round;
      break;
    }
  }
  *roundsOut = round;
  return cols;
}

/// The forest of the columns `set` (weights solved) as trees with channels
/// and fair shares: returns the call's algbw, n x the slowest root's rate.
double fairForest(const std::vector<ForestCol>& cols, const std::vector<int>& set, int n,
                  const std::vector<double>& cap, bool fairShares, std::vector<Tree>* trees) {
  std::vector<std::map<int, int>> uses;
  std::vector<int> roots;
  std::vector<double> perRoot(static_cast<size_t>(n), 0.0);
  trees->clear();
  for (int k : set) {
    const ForestCol& c = cols[static_cast<size_t>(k)];
    trees->push_back(c.tree);
    trees->back().rate = c.weight;
    perRoot[static_cast<size_t>(c.tree.root)] += c.weight;
    uses.push_back(c.use);
    roots.push_back(c.tree.root);
  }
  if (fairShares) return n * shareFairly(*trees, uses, roots, cap, kMaxForestChannels);
  double slowest = kInf;
  for (double r : perRoot) slowest = std::min(slowest, r);
  return n * slowest;
}

/// The reduction: drops trees (never a root's last; of the few lightest,
/// the one whose loss costs the LP least) down to one per root or until the
/// LP keeps less than `floor` of its optimum, and returns the set of at
/// most maxKeep trees whose forest runs fastest (fairForest; a smaller set
/// on a tie within 0.5 %), its weights solved.
std::vector<int> reduceForest(std::vector<ForestCol>& cols, int n, const std::vector<double>& cap,
                              int maxKeep, double floor, bool fairShares) {
  std::vector<int> kept = indices(cols.size());
  const double best = solveForest(cols, kept, n, cap);
  auto positive = [&](const std::vector<int>& set) {
    std::vector<int> out;
    for (int k : set)
      if (cols[static_cast<size_t>(k)].weight > 1e-9 * std::max(1.0, best)) out.push_back(k);
    return out;
  };
  kept = positive(kept);
  std::vector<int> chosen;
  double chosenRate = 0;
  std::vector<Tree> scratch;
  // `lpRate`: the kept set's LP optimum x. Its fair shares are a packing of
  // the set too, so they run no faster than n * x: a set whose LP is below
  // what the tie rule needs cannot be chosen, and its fair shares (a
  // water-fill per channel count tried) are not worked out.
  auto consider = [&](double lpRate) {
    if (static_cast<int>(kept.size()) > maxKeep) return;
    if (!chosen.empty() && n * lpRate < chosenRate * 0.995 * (1 - 1e-12)) return;
    const double rate = fairForest(cols, kept, n, cap, fairShares, &scratch);
    if (chosen.empty() || rate >= chosenRate * 1.005)
      chosen = kept, chosenRate = rate;
    else if (rate >= chosenRate * 0.995)
      chosen = kept;  // as fast, fewer trees
  };
  consider(best);
  constexpr size_t kTry = 6;
  while (static_cast<int>(kept.size()) > n) {
    std::vector<int> perRoot(static_cast<size_t>(n), 0);
    for (int k : kept) ++perRoot[static_cast<size_t>(cols[static_cast<size_t>(k)].tree.root)];
    std::vector<int> droppable;
    for (int k : kept)
      if (perRoot[static_cast<size_t>(cols[static_cast<size_t>(k)].tree.root)] > 1)
        droppable.push_back(k);
    std::sort(droppable.begin(), droppable.end(), [&](int a, int b) {
      return cols[static_cast<size_t>(a)].weight < cols[static_cast<size_t>(b)].weight;
    });
    // The trials' LPs are independent: they run at once.
    std::vector<std::vector<int>> trials(std::min(kTry, droppable.size()));
    for (size_t i = 0; i < trials.size(); ++i)
      for (int k : kept)
        if (k != droppable[i]) trials[i].push_back(k);
    std::vector<double> rates(trials.size());
    std::vector<std::vector<double>> weights(trials.size());
    forEachConcurrently(trials.size(), planThreads(), [&](size_t i) {
      rates[i] = forestLp(cols, trials[i], n, cap, &weights[i]);
    });
    size_t bestTrial = trials.size();
    double bestRate = -1;
    for (size_t i = 0; i < trials.size(); ++i)
      if (rates[i] > bestRate * (1 + 1e-12)) bestRate = rates[i], bestTrial = i;
    if (bestTrial == trials.size() || (!chosen.empty() && bestRate < floor * best)) break;
    for (size_t j = 0; j < trials[bestTrial].size(); ++j)  // its weights, as solveForest writes
      cols[static_cast<size_t>(trials[bestTrial][j])].weight = weights[bestTrial][j];
    kept = positive(trials[bestTrial]);
    consider(bestRate);
  }
  solveForest(cols, chosen, n, cap);
  return chosen;
}

/// The judge's seconds for a forest; infinity when it cannot be built.
double forestSeconds(const ForestJudge& judge, const std::vector<Tree>& trees, bool gather) {
  try {
    return judge(trees, gather);
  } catch (const std::exception&) {
    return kInf;
  }
}

/// A forest over one capacity vector: its columns, the kept ones (weights
/// solved) and the bound its prices proved.
struct Packed {
  std::vector<ForestCol> cols;
  std::vector<int> kept;
  double upper = 0;
  int rounds = 0;
};

Packed packOver(const PlanGraph& g, bool gather, const std::vector<double>& cap, bool chains,
                int maxKeep, bool fairShares) {
  const int n = g.nranks();
  Packed p;
  p.cols = priceForest(g, gather, cap, chains, n <= 16 ? 200 : 12, &p.rounds, &p.upper);
  if (!p.cols.empty()) p.kept = reduceForest(p.cols, n, cap, maxKeep, kForestFloor, fairShares);
  return p;
}

/// Whether the NVLinks meet at a switch: a vertex that relays (no GPU:
/// those are vertices whether or not a rank runs there, and do not relay)
/// with NVLinks to three or more others.
bool nvlinkSwitched(const PlanGraph& g) {
  std::map<int, std::set<int>> nvPeers;
  for (const PlanLink& l : g.links())
    if (l.topoLink >= 0 && l.kind == topo::LinkKind::kNvLink) nvPeers[l.from].insert(l.to);
  for (const auto& [v, peers] : nvPeers)
    if (peers.size() >= 3 && g.mayRelay(v)) return true;
  return false;
}

/// The split: a forest over the NVLinks alone (seeded with chains, which on
/// a switch or a ring cost what stars cost and run far better), then one
/// over the other links and what the first left of the ports, the two
/// joined. Empty when the graph has one class of links or a class cannot
/// span the ranks.
std::vector<ForestCol> splitForest(const PlanGraph& g, bool gather, const std::vector<double>& cap,
                                   bool fairShares) {
  const std::vector<std::vector<double>> classes = classCapacities(g, cap);
  if (classes.empty()) return {};
  Packed fast = packOver(g, gather, classes[0], true, kMaxForestChannels / 2, fairShares);
  if (fast.kept.empty()) return {};
  std::vector<double> fastLoad(cap.size(), 0.0), rest = classes[1];
  for (int k : fast.kept) {
    const ForestCol& c = fast.cols[static_cast<size_t>(k)];
    for (auto [link, times] : c.use) fastLoad[static_cast<size_t>(link)] += times * c.weight;
  }
  leaveToRest(g, fastLoad, rest);
  Packed slow = packOver(g, gather, rest, false, kMaxForestChannels / 2, fairShares);
  if (slow.kept.empty()) return {};
  std::vector<ForestCol> both;
  for (int k : fast.kept) both.push_back(std::move(fast.cols[static_cast<size_t>(k)]));
  for (int k : slow.kept) both.push_back(std::move(slow.cols[static_cast<size_t>(k)]));
  return both;
}

}  // namespace

TreePlan packForest(const PlanGraph& g, bool gather, const PackOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  checkPackOptions(o);
  const std::vector<double> cap = g.capacities();
  const int n = g.nranks();
  TreePlan plan;
  plan.bound = shardCutBound(g, cap, gather).rate;
  if (n < 2 || n > kMaxForestRanks) return plan;
  // With a judge and NVLinks that meet at a switch, the split too (on a
  // switch every route costs the same, and the joint LP's vertex holds
  // stars, which run far below their rate; DGX-1's NVLink mesh gains
  // nothing); the two packings are independent and run at once.
  const bool judged = o.forestJudge && n <= kMaxJudgeRanks && nvlinkSwitched(g);
  Packed joint;
  std::vector<ForestCol> split;
  forEachConcurrently(judged ? 2 : 1, planThreads(), [&](size_t i) {
    if (i == 0)
      joint = packOver(g, gather, cap, false, kMaxForestChannels, o.fairShares);
    else
      try {  // the split is a choice: a failure leaves the joint forest
        split = splitForest(g, gather, cap, o.fairShares);
      } catch (const std::exception&) {
        split.clear();
      }
  });
  if (joint.cols.empty()) return plan;
  plan.pricingRounds = joint.rounds;
  plan.mwuTrees = static_cast<int>(joint.cols.size());
  plan.optimum = n * joint.upper;
  std::vector<ForestCol> cols;
  for (int k : joint.kept) cols.push_back(std::move(joint.cols[static_cast<size_t>(k)]));
  // Root by root, heaviest first: every rank reads the same order.
  auto rootOrder = [](std::vector<Tree>& trees) {
    std::stable_sort(trees.begin(), trees.end(), [](const Tree& a, const Tree& b) {
      return a.root != b.root ? a.root < b.root : a.rate > b.rate;
    });
  };
  std::vector<Tree> scratchTrees;
  plan.rate = fairForest(cols, indices(cols.size()), n, cap, o.fairShares, &plan.trees);
  rootOrder(plan.trees);
  // The split wins when the judge finds it faster (the joint forest wins a
  // tie, and any forest the judge cannot build loses). The trees' fair
  // rates do not tell: stars and chains of one rate run far apart.
  if (!split.empty()) {
    std::vector<Tree> trees;
    const double rate = fairForest(split, indices(split.size()), n, cap, o.fairShares, &trees);
    rootOrder(trees);
    double seconds[2];
    forEachConcurrently(2, planThreads(), [&](size_t i) {
      seconds[i] = forestSeconds(o.forestJudge, i == 0 ? plan.trees : trees, gather);
    });
    if (seconds[1] < seconds[0] * (1 - 1e-9)) {
      plan.rate = rate;
      plan.trees = std::move(trees);
      plan.split = true;
      cols = std::move(split);
    }
  }
  plan.packedRate = fairForest(cols, indices(cols.size()), n, cap, false, &scratchTrees);
  plan.planMs = msSince(start);
  return plan;
}

}  // namespace grove::plan::detail

namespace grove::plan {

TreePlan packAllGatherTrees(const PlanGraph& g, const PackOptions& options) {
  return detail::packForest(g, true, options);
}

TreePlan packReduceScatterTrees(const PlanGraph& g, const PackOptions& options) {
  return detail::packForest(g, false, options);
}

}  // namespace grove::plan

// The tree packing LP solved exactly, by column generation.
//
// How it works: the LP is
//   max sum_t x_t  subject to  sum_t use_t(l) x_t <= cap(l) for every link l,
//   x >= 0,
// over every spanning tree t of the ranks (rooted at the root for broadcast
// and reduce; any tree, each edge loaded both ways, for all-reduce), where a
// tree edge is a route between two ranks under the plan graph's relay rules.
// There are exponentially many trees, so the LP is solved over a few of them
// (the master) and grown:
//   1. solve the master (packing_lp.cc) and read its dual: a price y(l) >= 0
//      per link, with sum_l cap(l) y(l) equal to the master's rate;
//   2. price every column: the cheapest under y is exactly the packers'
//      oracle (cheapestColumn: cheapest routes, then the minimum arborescence,
//      or for all-reduce the cheapest tree used both ways or tree pair),
//      because a column's price is the sum of its edges' route prices;
//   3. every column costs at least kappa, so y / kappa is dual feasible and
//      the full LP is at most sum cap * y / kappa (weak duality, whatever
//      prices the master gave): that is the certified upper bound. When
//      kappa >= 1 the master is optimal. The column joins the master and we
//      go on.
// The loop stops when the master's rate is within `gap` of the best upper
// bound. Unbounded virtual ports have no row; a tiny price proportional to
// 1/cap breaks ties among free routes (it is left out of kappa).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "algorithms/planner/planner_internal.h"

namespace grove::plan::detail {

double priceOf(const std::map<int, int>& use, const std::vector<double>& y) {
  double sum = 0;
  for (auto [link, times] : use) sum += times * y[static_cast<size_t>(link)];
  return sum;
}

std::vector<double> searchPrices(const std::vector<double>& y, const std::vector<double>& cap) {
  std::vector<double> search(cap.size());
  for (size_t l = 0; l < cap.size(); ++l)
    search[l] =
        cap[l] > 0 ? y[l] + 1e-12 / std::min(cap[l], 1e6) : std::numeric_limits<double>::infinity();
  return search;
}

double cheapestColumn(const PlanGraph& g, const RouteTable& table, int root, bool allReduce,
                      int round, const std::vector<double>& cap, const std::vector<double>& y,
                      Tree& tree) {
  if (!cheapestTree(g, table, root, allReduce, round, cap, tree)) return -1;
  const double price = priceOf(useOf(tree, allReduce), y);
  if (!allReduce || g.nranks() > kMaxPairRanks) return price;
  // All-reduce: the single tree used both ways, unless it gains nothing
  // (price >= 1) and a pair would; the bound needs the cheaper of the two.
  Tree pair;
  if (!cheapestPair(g, table, pair)) return price;
  const double pairPrice = priceOf(useOf(pair, true), y);
  if (price >= 1 - 1e-9 && pairPrice < price * (1 - 1e-9)) tree = std::move(pair);
  return std::min(price, pairPrice);
}

int treeOptimumRounds(const PlanGraph& g) { return g.nranks() > kMaxPairRanks ? 8 : 400; }

TreeOptimum optimalTrees(const PlanGraph& g, int root, bool allReduce,
                         const std::vector<double>& cap, const std::vector<Tree>& seeds, double gap,
                         int maxIterations) {
  TreeOptimum out;
  if (g.nranks() < 2) return out;
  const size_t m = g.links().size();
  std::vector<Tree> trees;
  std::vector<Candidate> cands;
  std::set<std::string> keys;
  auto add = [&](Tree t) {
    if (!keys.insert(keyOf(t)).second) return false;
    std::map<int, int> use = useOf(t, allReduce);
    cands.push_back(Candidate{{use.begin(), use.end()}, 0});
    trees.push_back(std::move(t));
    return true;
  };
  for (const Tree& t : seeds) add(t);
  std::vector<double> y(m, 0.0);
  if (cands.empty()) {  // start from the tree of capacity-proportional prices
    for (size_t l = 0; l < m; ++l) y[l] = cap[l] > 0 ? 1.0 / cap[l] : 0;
  }
  double upper = std::numeric_limits<double>::infinity(), value = 0;
  std::vector<double> bestY;
  std::vector<int> all;  // the master's columns, as solved last
  auto solveMaster = [&] {
    all.resize(cands.size());
    for (size_t k = 0; k < all.size(); ++k) all[k] = static_cast<int>(k);
    value = solveSubset(cands, all, cap, &y);
  };
  for (int it = 0; it < maxIterations; ++it) {
    if (!cands.empty()) solveMaster();
    Tree t;
    // Weak duality with whatever prices the master gave: every column costs
    // at least kappa, so y / kappa is dual feasible and bounds the LP by
    // sum cap * y / kappa (equal to value / kappa when the master is optimal).
    const double kappa = cheapestColumn(g, cheapestRoutes(g, searchPrices(y, cap), cap), root,
                                        allReduce, it, cap, y, t);
    if (kappa < 0) return out;
    out.iterations = it + 1;
    double dual = 0;
    for (size_t l = 0; l < m; ++l)
      if (cap[l] < PlanGraph::kUnbounded / 2) dual += cap[l] * y[l];
    if (!cands.empty() && kappa > 0 && dual / kappa < upper) {
      upper = dual / kappa;
      bestY = y;
      for (double& p : bestY) p /= kappa;
    }
    if (!cands.empty() && value >= upper * (1 - gap)) break;
    if (!add(std::move(t))) break;  // nothing new to add; the bound stands as found
  }
  if (all.size() != cands.size()) solveMaster();  // a column came in after the last solve
  if (upper < value) upper = value;               // rounding: the packing itself is feasible
  if (!(upper < std::numeric_limits<double>::infinity()))
    upper = 0;  // not proved in the rounds given
  out.value = value;
  out.upper = upper;
  out.price = bestY;
  for (size_t k = 0; k < cands.size(); ++k)
    if (cands[k].weight > 1e-12 * std::max(1.0, value)) {
      Tree tree = trees[k];
      tree.rate = cands[k].weight;
      out.trees.push_back(std::move(tree));
    }
  return out;
}

}  // namespace grove::plan::detail

namespace grove::plan {

PartitionBound allReducePartition(const PlanGraph& g) {
  PartitionBound out;
  const int n = g.nranks();
  if (n < 2) return out;
  const std::vector<double> cap = g.capacities();
  const detail::TreeOptimum opt =
      detail::optimalTrees(g, 0, true, cap, {}, 1e-7, detail::treeOptimumRounds(g));
  if (opt.price.empty()) return out;  // not spanned, or nothing proved
  // Union-find over vertices joined by a link the dual leaves unpriced.
  std::vector<int> up(static_cast<size_t>(g.numVertices()));
  for (size_t v = 0; v < up.size(); ++v) up[v] = static_cast<int>(v);
  auto find = [&](int v) {
    while (up[static_cast<size_t>(v)] != v)
      v = up[static_cast<size_t>(v)] = up[static_cast<size_t>(up[static_cast<size_t>(v)])];
    return v;
  };
  for (size_t l = 0; l < g.links().size(); ++l)
    if (cap[l] > 0 && !(opt.price[l] > 1e-9 / std::min(cap[l], 1e6)))
      up[static_cast<size_t>(find(g.links()[l].from))] = find(g.links()[l].to);
  std::map<int, int> partOf;  // root vertex -> part
  for (int r = 0; r < n; ++r) {
    auto [it, added] = partOf.emplace(find(g.rankVertex(r)), static_cast<int>(out.parts.size()));
    if (added) out.parts.emplace_back();
    out.parts[static_cast<size_t>(it->second)].push_back(r);
  }
  for (size_t l = 0; l < g.links().size(); ++l)
    if (cap[l] > 0 && find(g.links()[l].from) != find(g.links()[l].to)) out.crossing += cap[l];
  const size_t parts = out.parts.size();
  out.rate = parts > 1 ? out.crossing / (2.0 * static_cast<double>(parts - 1)) : 0;
  return out;
}

}  // namespace grove::plan

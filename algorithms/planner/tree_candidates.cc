// Structured tree candidates for the packing LP: chains, and fan trees.
//
// How it works: multiplicative weights converge slowly on machines whose
// best trees are long chains -- on an NVSwitch box a star and a chain cost
// the same at equal prices, and only after many rounds do the prices steer
// the oracle from stars to chains. A chain (a Hamiltonian path) loads every
// rank's out-link once, so on switched and ring-like fabrics it alone reaches
// the bound. So before the LP picks weights, a few chains are added to the
// MWU trees as candidates:
//   - greedy widest chains: start at the root (rooted trees) or at each of a
//     few ranks (all-reduce paths), then repeatedly go to the unvisited rank
//     reached by the widest route from the chain's end (ties: fewer links,
//     then rank order);
//   - rank-order chains in both directions.
// Each is built over one capacity vector (the whole graph, or one link
// class), so class-restricted chains give the heterogeneous split its
// candidates too. For all-reduce a path is rooted at its middle rank: both
// halves reduce toward the middle and the result is broadcast back. The LP
// (packing_lp.cc) then weights MWU trees and chains together; a chain that
// does not help gets weight 0 and is dropped.
//
// Fan trees: rank order from the root, rank i's parent the rank (i - 1) /
// fan places after the root (a complete fan-ary tree, each node serving
// `fan` children, which one step of the builders does), one rooted at every
// rank for all-reduce. They seed a second column generation (tree_pack.cc):
// the LP has many optimal vertices, and which trees the reductions of one
// keep decides how fast they run; the fan-seeded vertex holds fewer deep
// chains and fewer stars than the MWU-seeded one.
#include <algorithm>
#include <limits>

#include "algorithms/planner/planner_internal.h"

namespace grove::plan::detail {

namespace {

// The widest route between every ordered pair of ranks over `cap`.
struct WidestTable {
  int n = 0;
  std::vector<std::vector<int>> routes;
  std::vector<double> width;
  const std::vector<int>& route(int a, int b) const {
    return routes[static_cast<size_t>(a) * n + b];
  }
  double at(int a, int b) const { return width[static_cast<size_t>(a) * n + b]; }
};

WidestTable widestTable(const PlanGraph& g, const std::vector<double>& cap) {
  WidestTable t;
  t.n = g.nranks();
  t.routes.resize(static_cast<size_t>(t.n) * t.n);
  t.width.assign(static_cast<size_t>(t.n) * t.n, 0.0);
  for (int a = 0; a < t.n; ++a) {
    std::vector<std::vector<int>> from = widestRoutesFrom(g, a, cap);
    for (int b = 0; b < t.n; ++b) {
      if (a == b) continue;
      std::vector<int> r = std::move(from[static_cast<size_t>(b)]);
      double w = std::numeric_limits<double>::infinity();
      for (int l : r) w = std::min(w, cap[static_cast<size_t>(l)]);
      t.width[static_cast<size_t>(a) * t.n + b] = r.empty() ? 0.0 : w;
      t.routes[static_cast<size_t>(a) * t.n + b] = std::move(r);
    }
  }
  return t;
}

// Greedy widest Hamiltonian path from `start`; empty when some rank is unreachable.
std::vector<int> greedyPath(const WidestTable& t, int start) {
  std::vector<int> order{start};
  std::vector<bool> used(static_cast<size_t>(t.n), false);
  used[static_cast<size_t>(start)] = true;
  while (static_cast<int>(order.size()) < t.n) {
    const int end = order.back();
    int best = -1;
    for (int k = 1; k < t.n; ++k) {
      const int v = (end + k) % t.n;
      if (used[static_cast<size_t>(v)] || t.at(end, v) <= 0) continue;
      if (best < 0 || t.at(end, v) > t.at(end, best) ||
          (t.at(end, v) == t.at(end, best) && t.route(end, v).size() < t.route(end, best).size()))
        best = v;
    }
    if (best < 0) return {};
    used[static_cast<size_t>(best)] = true;
    order.push_back(best);
  }
  return order;
}

// A tree of n ranks rooted at `root`, with no edges yet.
Tree rootedAt(int n, int root) {
  Tree tree;
  tree.root = root;
  tree.parent.assign(static_cast<size_t>(n), -1);
  tree.down.assign(static_cast<size_t>(n), {});
  tree.up.assign(static_cast<size_t>(n), {});
  return tree;
}

// Makes p the parent of v over the widest routes both ways; false when
// either way has none.
bool addEdge(const WidestTable& t, int p, int v, Tree& tree) {
  if (t.route(p, v).empty() || t.route(v, p).empty()) return false;
  tree.parent[static_cast<size_t>(v)] = p;
  tree.down[static_cast<size_t>(v)] = t.route(p, v);
  tree.up[static_cast<size_t>(v)] = t.route(v, p);
  return true;
}

// A tree from a path: rooted at order[rootPos], edges along the path.
bool treeFromPath(const WidestTable& t, const std::vector<int>& order, size_t rootPos, Tree& tree) {
  tree = rootedAt(t.n, order[rootPos]);
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == rootPos) continue;
    const int v = order[i], p = i < rootPos ? order[i + 1] : order[i - 1];
    if (!addEdge(t, p, v, tree)) return false;
  }
  return true;
}

// The chains of chainCandidates over one table of widest routes.
std::vector<Tree> chainsOf(const WidestTable& t, int root, bool allReduce) {
  const int n = t.n;
  std::vector<std::vector<int>> paths;
  if (allReduce) {
    for (int s : {0, n / 2, n - 1}) paths.push_back(greedyPath(t, s));
  } else {
    paths.push_back(greedyPath(t, root));
  }
  std::vector<int> fwd, back;
  const int start = allReduce ? 0 : root;
  for (int k = 0; k < n; ++k) {
    fwd.push_back((start + k) % n);
    back.push_back((start - k + n) % n);
  }
  paths.push_back(fwd);
  paths.push_back(back);
  std::vector<Tree> out;
  for (const auto& path : paths) {
    if (static_cast<int>(path.size()) != n) continue;
    Tree tree;
    if (treeFromPath(t, path, allReduce ? path.size() / 2 : 0, tree))
      out.push_back(std::move(tree));
  }
  return out;
}

}  // namespace

std::vector<Tree> chainCandidates(const PlanGraph& g, int root, bool allReduce,
                                  const std::vector<double>& cap) {
  if (g.nranks() < 2) return {};
  return chainsOf(widestTable(g, cap), root, allReduce);
}

std::vector<Tree> chainsFromEveryRank(const PlanGraph& g, const std::vector<double>& cap) {
  if (g.nranks() < 2) return {};
  const WidestTable t = widestTable(g, cap);
  std::vector<Tree> out;
  for (int r = 0; r < g.nranks(); ++r)
    for (Tree& tree : chainsOf(t, r, false)) out.push_back(std::move(tree));
  return out;
}

std::vector<Tree> fanCandidates(const PlanGraph& g, int root, bool allReduce,
                                const std::vector<double>& cap, int fan) {
  const int n = g.nranks();
  if (fan < 1 || n <= fan + 1) return {};  // a star: MWU finds those
  const WidestTable t = widestTable(g, cap);
  std::vector<Tree> out;
  for (int r = 0; r < n; ++r) {
    if (!allReduce && r != root) continue;
    Tree tree = rootedAt(n, r);
    bool reached = true;
    for (int i = 1; i < n && reached; ++i)
      reached = addEdge(t, (r + (i - 1) / fan) % n, (r + i) % n, tree);
    if (reached) out.push_back(std::move(tree));
  }
  return out;
}

}  // namespace grove::plan::detail

namespace grove::plan::detail {

std::vector<std::vector<double>> classCapacities(const PlanGraph& g,
                                                 const std::vector<double>& cap) {
  const size_t m = cap.size();
  std::vector<double> fast(m, 0), rest(m, 0);
  bool anyFast = false, anyRest = false;
  for (size_t l = 0; l < m; ++l) {
    const PlanLink& link = g.links()[l];
    const bool port = link.topoLink < 0;
    const bool isFast = link.kind == topo::LinkKind::kNvLink;
    if (port || isFast) fast[l] = cap[l];
    if (port || !isFast) rest[l] = cap[l];
    if (!port && cap[l] > 0) (isFast ? anyFast : anyRest) = true;
  }
  if (!anyFast || !anyRest) return {};
  return {fast, rest};
}

void leaveToRest(const PlanGraph& g, const std::vector<double>& fastLoad,
                 std::vector<double>& rest) {
  for (size_t l = 0; l < rest.size(); ++l)
    if (g.links()[l].topoLink < 0 && rest[l] > 0) rest[l] = std::max(0.0, rest[l] - fastLoad[l]);
}

}  // namespace grove::plan::detail

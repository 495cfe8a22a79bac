// Tree packing (Blink): broadcast / reduce trees rooted at one rank, and
// all-reduce trees, each carrying a share of the message at its rate.
//
// How it works: the packing LP (maximise the summed rate of spanning trees
// whose summed load on every link stays within its capacity) is solved
// approximately by multiplicative weights (Garg-Koenemann). Every link has a
// price, 1/capacity at first. Each round:
//   1. the cheapest route between every ordered pair of ranks under the
//      current prices is found (Dijkstra with the plan graph's relay rules);
//   2. the oracle builds the cheapest spanning tree over the ranks, an edge
//      u->v costing its route's price: for rooted trees the minimum
//      arborescence (Chu-Liu/Edmonds); for all-reduce trees, whose edges
//      carry data both ways, the minimum spanning tree of the symmetric
//      costs price(u->v) + price(v->u) (Prim), re-rooted at its centre;
//   3. the tree is added at its bottleneck rate f = min over links of
//      capacity / (times the tree crosses the link), and every link it
//      crosses has its price multiplied by exp(eps * f * times / capacity).
// The accumulated rates, scaled down by the worst overload, are a feasible
// packing; the rounds stop when that scaled rate is within 0.1% of the
// bound, stops improving for a while, or after maxRounds. The distinct trees
// found (with chains and each link class's trees) seed column generation
// (tree_optimum.cc), which proves the LP optimum and adds the trees it
// needs. The packing LP (packing_lp.cc) then re-weights the candidates, and
// the lightest are dropped while more than maxTrees remain or while the rate
// stays >= keep * the optimum. When maxTrees trees fall short of that, the
// kept set's own dual prices one more tree, swapped in for the member that
// costs least, while the rate grows. A tree's routes are stored in the Tree
// (down: parent->child, up: child->parent) so loads can be recomputed
// exactly; for rooted trees `up` is the reverse of `down` where the reverse
// links exist.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "algorithms/planner/concurrent.h"
#include "algorithms/planner/planner_internal.h"
#include "base/error.h"

namespace grove::plan::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct TreeCand {
  Tree tree;
  double weight = 0;
  std::map<int, int> use;
};

/// A candidate of weight 0 for tree `t`.
TreeCand candidateOf(Tree t, bool allReduce) {
  TreeCand c;
  c.use = useOf(t, allReduce);
  c.tree = std::move(t);
  return c;
}

// Re-roots an undirected tree (given as parents) at its centre (smallest
// eccentricity in hops; ties to the lowest rank after `offset`, rotating roots).
std::vector<int> reroot(const std::vector<int>& parent, int offset, int* rootOut) {
  const int n = static_cast<int>(parent.size());
  std::vector<std::vector<int>> adj(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v)
    if (parent[static_cast<size_t>(v)] >= 0) {
      adj[static_cast<size_t>(v)].push_back(parent[static_cast<size_t>(v)]);
      adj[static_cast<size_t>(parent[static_cast<size_t>(v)])].push_back(v);
    }
  auto bfs = [&](int s, std::vector<int>& par) {
    std::vector<int> dist(static_cast<size_t>(n), -1), queue{s};
    par.assign(static_cast<size_t>(n), -1);
    dist[static_cast<size_t>(s)] = 0;
    int ecc = 0;
    for (size_t i = 0; i < queue.size(); ++i) {
      int u = queue[i];
      ecc = std::max(ecc, dist[static_cast<size_t>(u)]);
      for (int w : adj[static_cast<size_t>(u)])
        if (dist[static_cast<size_t>(w)] < 0) {
          dist[static_cast<size_t>(w)] = dist[static_cast<size_t>(u)] + 1;
          par[static_cast<size_t>(w)] = u;
          queue.push_back(w);
        }
    }
    return ecc;
  };
  std::vector<int> par, best;
  int bestEcc = n + 1;
  for (int k = 0; k < n; ++k) {
    const int s = (k + offset) % n;
    const int ecc = bfs(s, par);
    if (ecc < bestEcc) {
      bestEcc = ecc;
      best = par;
      *rootOut = s;
    }
  }
  return best;
}

// The reverse of a route when every reverse link exists and is usable, else empty.
std::vector<int> reverseRoute(const PlanGraph& g, const std::vector<int>& route,
                              const std::vector<double>& cap) {
  std::vector<int> back;
  for (auto it = route.rbegin(); it != route.rend(); ++it) {
    int r = g.reverseLink(*it);
    if (r < 0 || !(cap[static_cast<size_t>(r)] > 0)) return {};
    back.push_back(r);
  }
  return back;
}

}  // namespace

void appendKey(std::string& key, int v, char sep) {
  char buf[16];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
  key.append(buf, r.ptr);
  key.push_back(sep);
}

std::string keyOf(const Tree& t) {
  std::string key;
  key.reserve(16 * t.parent.size());
  for (int p : t.upParent) appendKey(key, p, ',');
  key.push_back('#');
  for (size_t v = 0; v < t.parent.size(); ++v) {
    appendKey(key, t.parent[v], ':');
    if (!t.down.empty())
      for (int li : t.down[v]) appendKey(key, li, ',');
    key.push_back('|');
    if (!t.up.empty())
      for (int li : t.up[v]) appendKey(key, li, ',');
    key.push_back(';');
  }
  return key;
}

bool cheapestTree(const PlanGraph& g, const RouteTable& table, int root, bool allReduce, int round,
                  const std::vector<double>& cap, Tree& tree) {
  const int n = g.nranks();
  std::vector<double> w(static_cast<size_t>(n) * n, kInf);
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v)
      if (u != v)
        w[static_cast<size_t>(u) * n + v] =
            allReduce ? table.at(u, v) + table.at(v, u) : table.at(u, v);
  std::vector<int> parent = allReduce ? minSpanningTree(n, w) : minArborescence(n, root, w);
  if (parent.empty()) return false;
  if (allReduce) parent = reroot(parent, round, &root);
  tree.root = root;
  tree.parent = parent;
  tree.down.assign(static_cast<size_t>(n), {});
  tree.up.assign(static_cast<size_t>(n), {});
  for (int v = 0; v < n; ++v) {
    const int p = parent[static_cast<size_t>(v)];
    if (p < 0) continue;
    tree.down[static_cast<size_t>(v)] = table.route(p, v);
    tree.up[static_cast<size_t>(v)] =
        allReduce ? table.route(v, p) : reverseRoute(g, table.route(p, v), cap);
    if (tree.up[static_cast<size_t>(v)].empty())
      tree.up[static_cast<size_t>(v)] = table.route(v, p);
  }
  return true;
}

bool cheapestInTree(const PlanGraph& g, const RouteTable& table, int root,
                    const std::vector<double>& cap, Tree& tree) {
  // An in-tree is an arborescence of the reversed prices: child v -> parent
  // u costs the route v -> u.
  const int n = g.nranks();
  std::vector<double> w(static_cast<size_t>(n) * n, kInf);
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v)
      if (u != v) w[static_cast<size_t>(u) * n + v] = table.at(v, u);
  std::vector<int> parent = minArborescence(n, root, w);
  if (parent.empty()) return false;
  tree.root = root;
  tree.parent = std::move(parent);
  tree.upParent.clear();
  tree.down.assign(static_cast<size_t>(n), {});
  tree.up.assign(static_cast<size_t>(n), {});
  for (int v = 0; v < n; ++v) {
    const int p = tree.parent[static_cast<size_t>(v)];
    if (p < 0) continue;
    tree.up[static_cast<size_t>(v)] = table.route(v, p);
    tree.down[static_cast<size_t>(v)] = reverseRoute(g, table.route(v, p), cap);
    if (tree.down[static_cast<size_t>(v)].empty())
      tree.down[static_cast<size_t>(v)] = table.route(p, v);
  }
  return true;
}

std::map<int, int> useOf(const Tree& t, bool down, bool up) {
  std::map<int, int> use;
  for (size_t v = 0; v < t.parent.size(); ++v) {
    if (down && t.parent[v] >= 0)
      for (int li : t.down[v]) ++use[li];
    if (up && t.upParentOf(static_cast<int>(v)) >= 0)
      for (int li : t.up[v]) ++use[li];
  }
  return use;
}

std::map<int, int> useOf(const Tree& t, bool allReduce) { return useOf(t, true, allReduce); }

void chooseShares(const PackOptions& o, const std::vector<double>& cap, bool allReduce, int root,
                  TreePlan& plan) {
  std::vector<Tree> fair = plan.trees;
  shareFairly(fair, allReduce, cap);
  if (!o.judge) {
    if (o.fairShares) plan.trees = std::move(fair);
    return;
  }
  // The faster of the two by each judge (fair shares on a tie).
  const std::vector<JudgedSet> sets = {{&plan.trees, true}, {&fair, true}};
  const Verdict v = judgeSets(o, sets, allReduce, root);
  if (v.chosen == sets.size()) return;  // neither can be built: the LP's weights stand
  plan.judgedSeconds = v.seconds;
  plan.larger = largerSets(o, v, sets);
  if (o.largerJudges.empty()) plan.contenders = contendersOf(v, sets);
  if (v.chosen == 1) plan.trees = std::move(fair);
}

bool cheapestPair(const PlanGraph& g, const RouteTable& table, Tree& tree) {
  // For each root: the cheapest in-tree (an arborescence of the reversed
  // prices: child v -> parent u costs route v->u) and the cheapest out-tree;
  // the pair's price is their sum, and the cheapest root wins.
  const int n = g.nranks();
  std::vector<double> wOut(static_cast<size_t>(n) * n, kInf), wIn(static_cast<size_t>(n) * n, kInf);
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v)
      if (u != v) {
        wOut[static_cast<size_t>(u) * n + v] = table.at(u, v);
        wIn[static_cast<size_t>(u) * n + v] = table.at(v, u);
      }
  double best = kInf;
  for (int root = 0; root < n; ++root) {
    std::vector<int> out = minArborescence(n, root, wOut), in = minArborescence(n, root, wIn);
    if (out.empty() || in.empty()) return false;
    double cost = 0;
    for (int v = 0; v < n; ++v)
      if (v != root)
        cost += table.at(out[static_cast<size_t>(v)], v) + table.at(v, in[static_cast<size_t>(v)]);
    if (!(cost < best * (1 - 1e-12))) continue;
    best = cost;
    tree.root = root;
    tree.parent = std::move(out);
    tree.upParent = in == tree.parent ? std::vector<int>{} : std::move(in);
    tree.down.assign(static_cast<size_t>(n), {});
    tree.up.assign(static_cast<size_t>(n), {});
    for (int v = 0; v < n; ++v) {
      if (v == root) continue;
      tree.down[static_cast<size_t>(v)] = table.route(tree.parent[static_cast<size_t>(v)], v);
      tree.up[static_cast<size_t>(v)] = table.route(v, tree.upParentOf(v));
    }
  }
  return best < kInf;
}

namespace {

// MWU rounds; returns the distinct trees with their accumulated weights.
std::vector<TreeCand> mwuTrees(const PlanGraph& g, int root, bool allReduce, const PackOptions& o,
                               const std::vector<double>& cap, double bound, int* roundsOut) {
  const size_t m = g.links().size();
  std::vector<double> price(m), load(m, 0.0);
  for (size_t l = 0; l < m; ++l) price[l] = cap[l] > 0 ? 1.0 / cap[l] : kInf;
  std::map<std::string, TreeCand> found;
  double total = 0, bestScaled = 0;
  int sinceBetter = 0, round = 0;
  const int patience = 40 + 2 * g.nranks();
  // A round costs n Dijkstras and an O(n^3) oracle: large jobs get fewer
  // rounds (their chains and the LP carry most of the rate anyway).
  const int maxRounds = g.nranks() > 16 ? std::min(o.maxRounds, 4000 / g.nranks()) : o.maxRounds;
  for (; round < maxRounds; ++round) {
    RouteTable table = cheapestRoutes(g, price, cap);
    Tree t;
    if (!cheapestTree(g, table, root, allReduce, round, cap, t)) break;
    std::map<int, int> use = useOf(t, allReduce);
    double f = kInf;
    for (auto [l, times] : use) f = std::min(f, cap[static_cast<size_t>(l)] / times);
    for (auto [l, times] : use) {
      load[static_cast<size_t>(l)] += f * times;
      price[static_cast<size_t>(l)] *=
          std::exp(o.epsilon * f * times / cap[static_cast<size_t>(l)]);
    }
    total += f;
    TreeCand& c = found[keyOf(t)];
    if (c.tree.parent.empty()) {
      c.tree = std::move(t);
      c.use = std::move(use);
    }
    c.weight += f;
    double over = 0;
    for (size_t l = 0; l < m; ++l)
      if (load[l] > 0 && cap[l] < PlanGraph::kUnbounded / 2)
        over = std::max(over, load[l] / cap[l]);
    const double scaled = over > 0 ? total / over : total;
    if (scaled > bestScaled * (1 + 1e-3)) {
      sinceBetter = 0;
    } else if (++sinceBetter >= patience) {
      ++round;
      break;
    }
    bestScaled = std::max(bestScaled, scaled);
    if (bound > 0 && bestScaled >= bound * (1 - 1e-3)) {
      ++round;
      break;
    }
  }
  *roundsOut = round;
  std::vector<TreeCand> out;
  for (auto& [key, c] : found) out.push_back(std::move(c));
  return out;
}

// The reduction keeps at most maxKeep trees of the candidates; when that
// set falls short of `target`, its own LP dual prices a new tree (the
// oracle under the kept set's prices: the tree the kept set misses most),
// which comes in for the member whose removal then costs least, as long as
// the rate grows. New trees join `found` and `cands`.
std::vector<int> swapInPricedTrees(const PlanGraph& g, int root, bool allReduce,
                                   const std::vector<double>& cap, int maxKeep, double target,
                                   std::vector<TreeCand>& found, std::vector<Candidate>& cands,
                                   std::vector<int> kept) {
  std::vector<double> y;
  double rate = solveSubset(cands, kept, cap, &y);
  for (int round = 0, rounds = g.nranks() > kMaxPairRanks ? 4 : 60; round < rounds && rate < target;
       ++round) {
    TreeCand c;
    if (cheapestColumn(g, cheapestRoutes(g, searchPrices(y, cap), cap), root, allReduce, round, cap,
                       y, c.tree) < 0)
      break;
    c.use = useOf(c.tree, allReduce);
    if (priceOf(c.use, y) >= 1 - 1e-9) break;  // no tree improves the kept set's LP
    const int added = static_cast<int>(cands.size());
    cands.push_back(Candidate{{c.use.begin(), c.use.end()}, 0});
    found.push_back(std::move(c));
    std::vector<std::vector<int>> trials;
    for (size_t drop = 0; drop <= kept.size(); ++drop) {  // drop == size: drop none
      if (drop == kept.size() && static_cast<int>(kept.size()) >= maxKeep) break;
      std::vector<int>& trial = trials.emplace_back();
      for (size_t i = 0; i < kept.size(); ++i)
        if (i != drop) trial.push_back(kept[i]);
      trial.push_back(added);
    }
    const std::vector<double> rates = subsetRates(cands, trials, cap);
    std::vector<int> best;
    double bestRate = rate;
    for (size_t i = 0; i < trials.size(); ++i)
      if (rates[i] > bestRate * (1 + 1e-9)) bestRate = rates[i], best = trials[i];
    if (best.empty()) break;
    kept = best;
    rate = solveSubset(cands, kept, cap, &y);
  }
  return kept;
}

/// The smaller sets the judge weighs against the kept one: at most `most`
/// trees (and maxTrees) keeping `keep` of the optimum.
std::vector<ReduceGoal> smallerGoals(const PackOptions& o) {
  std::vector<ReduceGoal> goals = {{24, 0.97}, {24, 0.93}, {8, 0.9}, {4, 0.85}};
  for (ReduceGoal& g : goals) g.maxKeep = std::max(1, std::min(g.maxKeep, o.maxTrees));
  return goals;
}

// One vertex of the packing LP and what is kept of it: the LP over
// `found` and the trees column generation adds, reduced to the packing's
// own goal (`kept`) and, when the judge weighs them, to smaller ones.
struct Family {
  std::vector<TreeCand> found;
  std::vector<Candidate> cands;  ///< by found index; weights of the last LP solved
  std::vector<int> kept;
  std::vector<ReduceGoal> goals;          ///< the smaller reductions the judge weighs
  std::vector<std::vector<int>> smaller;  ///< the reductions to `goals` (empty: not made yet)
  TreeOptimum opt;
};

// The trees of a kept set (none without a share), with their channels and
// the rates those get when streams share links fairly (fair_share.cc),
// heaviest first: the order they are judged in is the order they run in
// (it places channels and shares), and fair rates often tie exactly.
std::vector<Tree> treesOf(Family& f, const std::vector<int>& set, bool fair, bool allReduce,
                          const std::vector<double>& cap) {
  const double rate = solveSubset(f.cands, set, cap);
  std::vector<Tree> trees;
  for (int k : set) {
    if (!(f.cands[static_cast<size_t>(k)].weight > 1e-9 * std::max(1.0, rate))) continue;
    trees.push_back(f.found[static_cast<size_t>(k)].tree);
    trees.back().rate = f.cands[static_cast<size_t>(k)].weight;
  }
  if (fair) shareFairly(trees, allReduce, cap);
  std::stable_sort(trees.begin(), trees.end(),
                   [](const Tree& a, const Tree& b) { return a.rate > b.rate; });
  return trees;
}

// Column generation from `found` (it proves the LP optimum, and its columns
// join the candidates), then the reduction to the packing's goal and to
// `smaller` on one walk (the priced trees that come in after make the
// smaller ones walk again, later).
Family packFamily(const PlanGraph& g, int root, bool allReduce, const PackOptions& o,
                  const std::vector<double>& cap, std::vector<TreeCand> found,
                  std::vector<ReduceGoal> smaller) {
  Family f;
  f.found = std::move(found);
  f.goals = std::move(smaller);
  std::vector<Tree> seeds;
  std::set<std::string> keys;
  for (const TreeCand& c : f.found)
    if (keys.insert(keyOf(c.tree)).second) seeds.push_back(c.tree);
  f.opt = optimalTrees(g, root, allReduce, cap, seeds, 1e-7, treeOptimumRounds(g));
  for (Tree& t : f.opt.trees)
    if (keys.insert(keyOf(t)).second) f.found.push_back(candidateOf(std::move(t), allReduce));
  for (const TreeCand& c : f.found)
    f.cands.push_back(Candidate{{c.use.begin(), c.use.end()}, c.weight});
  std::vector<ReduceGoal> goals = {{std::max(1, o.maxTrees), o.keep}};
  goals.insert(goals.end(), f.goals.begin(), f.goals.end());
  std::vector<std::vector<int>> sets = weightAndReduceEach(f.cands, cap, goals);
  const size_t before = f.cands.size();
  f.kept = swapInPricedTrees(g, root, allReduce, cap, std::max(1, o.maxTrees), o.keep * f.opt.value,
                             f.found, f.cands, sets[0]);
  sets.erase(sets.begin());
  if (f.cands.size() != before) sets.clear();
  f.smaller = std::move(sets);
  return f;
}

// The cost model's choice of the number of trees: each family's reduction
// that keeps 99% of the optimum and its smaller ones are judged (a smaller
// one only when it has fewer trees), each with its data split
// by the fair shares and by the LP's weights, and the fastest wins (ties to
// fewer trees, then to fair shares, then to the first family). A set the
// judge cannot build is left out. The judges of larger calls judge the
// candidates near the winner again and keep their own fastest in `larger`
// (judgeSets); without them the near ones are plan.contenders.
std::vector<Tree> judgeTreeCounts(const PackOptions& o, int root, bool allReduce,
                                  const std::vector<double>& cap,
                                  const std::vector<Family*>& families, TreePlan& plan) {
  std::vector<std::vector<Tree>> variants;  // in order of preference on a tie
  std::vector<bool> winsTies;
  size_t fewest = std::numeric_limits<size_t>::max();  // smallest set so far
  Family& first = *families[0];
  auto consider = [&](Family& f, const std::vector<int>& set) {
    std::vector<Tree> fair = treesOf(f, set, true, allReduce, cap);
    if (fair.empty() || fair.size() >= fewest) return;
    fewest = fair.size();
    variants.push_back(std::move(fair));
    variants.push_back(treesOf(f, set, false, allReduce, cap));
    winsTies.push_back(&f == &first);
    winsTies.push_back(false);
  };
  for (Family* f : families) {
    fewest = std::numeric_limits<size_t>::max();
    consider(*f, f->kept);
    if (f->smaller.empty() && !f->goals.empty())
      f->smaller = weightAndReduceEach(f->cands, cap, f->goals);
    for (const std::vector<int>& set : f->smaller) consider(*f, set);
  }
  plan.judged = static_cast<int>(variants.size());
  std::vector<JudgedSet> sets;
  for (size_t i = 0; i < variants.size(); ++i) sets.push_back({&variants[i], winsTies[i]});
  const Verdict v = judgeSets(o, sets, allReduce, root);
  if (v.chosen == sets.size()) return {};
  plan.judgedSeconds = v.seconds;
  plan.larger = largerSets(o, v, sets);
  if (o.largerJudges.empty()) plan.contenders = contendersOf(v, sets);
  const size_t chosen = v.chosen;
  return std::move(variants[chosen]);
}

}  // namespace

TreePlan packCapped(const PlanGraph& g, int root, bool allReduce, const PackOptions& o,
                    const std::vector<double>& cap, double bound) {
  const auto start = std::chrono::steady_clock::now();
  TreePlan plan;
  plan.bound = bound;
  if (g.nranks() < 2) return plan;
  // The MWU runs (over the whole graph, and over each link class alone)
  // are independent, and so are the two LP vertices below: each group runs
  // on the planning threads at once, its results taken in a fixed order.
  const std::vector<std::vector<double>> classCaps = classCapacities(g, cap);
  const bool classMwu = g.nranks() <= 16;
  std::vector<std::vector<TreeCand>> mwu(1 + (classMwu ? classCaps.size() : 0));
  std::vector<int> mwuRounds(mwu.size(), 0);
  size_t mwuFound = 0;  // trees the whole graph's run found
  forEachConcurrently(mwu.size(), planThreads(), [&](size_t i) {
    mwu[i] = i == 0 ? mwuTrees(g, root, allReduce, o, cap, bound, &mwuRounds[i])
                    : mwuTrees(g, root, allReduce, o, classCaps[i - 1], 0, &mwuRounds[i]);
    if (i == 0) mwuFound = mwu[i].size();
    std::sort(mwu[i].begin(), mwu[i].end(),
              [](const TreeCand& a, const TreeCand& b) { return a.weight > b.weight; });
    mwu[i].resize(std::min(mwu[i].size(), size_t{i == 0 ? 64u : 32u}));
  });
  plan.rounds = mwuRounds[0];
  std::vector<TreeCand> found = std::move(mwu[0]);
  plan.mwuTrees = static_cast<int>(mwuFound);
  // The LP over at most 64 MWU candidates (the heaviest), plus chains over the
  // whole graph and over each link class, plus (small jobs) MWU trees of each
  // class alone: the candidates the heterogeneous split would use.
  auto addTree = [&](Tree t) { found.push_back(candidateOf(std::move(t), allReduce)); };
  for (Tree& t : chainCandidates(g, root, allReduce, cap)) addTree(std::move(t));
  const size_t wholeGraphEnd = found.size();  // where the fan trees go (below)
  for (size_t c = 0; c < classCaps.size(); ++c) {
    for (Tree& t : chainCandidates(g, root, allReduce, classCaps[c])) addTree(std::move(t));
    if (!classMwu) continue;
    plan.rounds += mwuRounds[1 + c];
    for (TreeCand& t : mwu[1 + c]) found.push_back(std::move(t));
  }
  // The packing's own LP vertex; and where the judge weighs all-reduce
  // trees, a second one, its column generation seeded with fan trees too
  // (fanCandidates): the LP has many optimal vertices, and which trees a
  // reduction of one keeps decides how fast they run.
  const bool judging = o.judge && g.nranks() <= kMaxJudgeRanks;
  std::vector<TreeCand> fanned;
  std::vector<ReduceGoal> few;
  if (judging && allReduce && o.fanTrees > 0) {
    fanned.assign(found.begin(), found.begin() + wholeGraphEnd);
    for (Tree& t : fanCandidates(g, root, allReduce, cap, o.fanTrees))
      fanned.push_back(candidateOf(std::move(t), allReduce));
    fanned.insert(fanned.end(), found.begin() + wholeGraphEnd, found.end());
    // Of its smaller reductions, those of at most 8 trees: the larger
    // ones cost the most to simulate and did not win on the survey.
    for (const ReduceGoal& goal : smallerGoals(o))
      if (goal.maxKeep <= 8) few.push_back(goal);
    if (fanned.size() <= found.size()) fanned.clear();
  }
  Family base;
  std::vector<Family> more(fanned.empty() ? 0 : 1);
  forEachConcurrently(1 + more.size(), planThreads(), [&](size_t i) {
    if (i == 0)
      base = packFamily(g, root, allReduce, o, cap, found,
                        judging ? smallerGoals(o) : std::vector<ReduceGoal>{});
    else
      more[0] = packFamily(g, root, allReduce, o, cap, std::move(fanned), std::move(few));
  });
  plan.optimum = base.opt.upper;
  plan.pricingRounds = base.opt.iterations;
  {
    double packed = 0;
    for (int k : base.kept) packed += base.cands[static_cast<size_t>(k)].weight;
    plan.packedRate = packed;
  }
  if (judging) {
    std::vector<Family*> families = {&base};
    for (Family& f : more) families.push_back(&f);
    plan.trees = judgeTreeCounts(o, root, allReduce, cap, families, plan);
  }
  if (plan.trees.empty()) plan.trees = treesOf(base, base.kept, o.fairShares, allReduce, cap);
  for (const Tree& t : plan.trees) plan.rate += t.rate;
  plan.planMs = msSince(start);
  return plan;
}

void checkPackOptions(const PackOptions& o) {
  if (!(o.epsilon > 0 && o.epsilon < 1))
    throwInvalidArgument("tree packing: epsilon must be in (0, 1)");
  if (o.maxRounds < 1) throwInvalidArgument("tree packing: maxRounds must be >= 1");
  if (o.maxTrees < 1) throwInvalidArgument("tree packing: maxTrees must be >= 1");
  if (!(o.keep > 0 && o.keep <= 1)) throwInvalidArgument("tree packing: keep must be in (0, 1]");
  if (o.fanTrees < 0) throwInvalidArgument("tree packing: fanTrees must be >= 0");
}

}  // namespace grove::plan::detail

namespace grove::plan {

TreePlan packTrees(const PlanGraph& g, int root, const PackOptions& options) {
  detail::checkPackOptions(options);
  if (root < 0 || root >= g.nranks())
    throwInvalidArgument("packTrees: root " + std::to_string(root) + " out of range [0, " +
                         std::to_string(g.nranks()) + ")");
  const std::vector<double> cap = g.capacities();
  TreePlan plan =
      detail::packCapped(g, root, false, options, cap, detail::broadcastBoundCapped(g, root, cap));
  if (g.nranks() > 1 && plan.trees.empty())
    throwInvalidUsage("packTrees: some rank cannot be reached from rank " + std::to_string(root));
  return plan;
}

TreePlan packAllReduceTrees(const PlanGraph& g, const PackOptions& options) {
  detail::checkPackOptions(options);
  const std::vector<double> cap = g.capacities();
  const double shards = detail::shardAllReduceBound(g, cap);
  TreePlan plan = detail::packCapped(g, 0, true, options, cap, shards);
  plan.bound = std::max(detail::familyBound(g, cap, plan.optimum, shards), plan.rate);
  if (g.nranks() > 1 && plan.trees.empty())
    throwInvalidUsage("packAllReduceTrees: the ranks are not connected");
  return plan;
}

}  // namespace grove::plan

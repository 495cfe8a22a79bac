// Internals shared by the planners (plan_graph.cc, maxflow.cc,
// ring_search.cc, tree_pack.cc, hetero.cc, hierarchy.cc): routes under a
// per-link capacity vector (a link with capacity 0 is not usable, which is
// how a planner restricts itself to one link class or to residual
// capacities), multi-terminal max flow, the minimum arborescence / spanning
// tree oracles, and the small LP that weights a set of candidate rings or
// trees. Not part of the planners' contract (topo_plan.h).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "algorithms/planner/topo_plans.h"

namespace grove::plan::detail {

/// Cheapest routes between every ordered pair of ranks under link prices.
struct RouteTable {
  int n = 0;
  std::vector<double> cost;  ///< n*n: price of the route a->b (inf when none)
  double at(int a, int b) const { return cost[static_cast<size_t>(a) * n + b]; }
  /// The links of the route a->b (empty when none, or a == b).
  std::vector<int> route(int a, int b) const;

  // Where route() finds them: listed (`routes`, n*n), or else unwound from
  // the searches' arriving links (a packing reads a few of the n*n routes).
  std::vector<std::vector<int>> routes;
  const PlanGraph* graph = nullptr;
  std::vector<std::vector<int>> via;  ///< [2a + pass]: by vertex, the link it was reached by
};

/// Routes from every rank to every rank, cheapest under `price`, over links
/// whose `cap` is > 0, with the relay rules of PlanGraph.
RouteTable cheapestRoutes(const PlanGraph& g, const std::vector<double>& price,
                          const std::vector<double>& cap);
/// Widest route a->b over links with cap > 0 (bottleneck, then fewest links);
/// `toVertex` >= 0 ends the route at that vertex instead of rank b.
std::vector<int> widestRouteCapped(const PlanGraph& g, int a, int b, const std::vector<double>& cap,
                                   int toVertex = -1);
/// widestRouteCapped from rank a to every rank, by rank (empty: a itself, or
/// no route): one search per kind of destination, not one per rank.
std::vector<std::vector<int>> widestRoutesFrom(const PlanGraph& g, int a,
                                               const std::vector<double>& cap);

/// Max flow from the ranks `sources` to the ranks `sinks` over links with
/// cap > 0, with the relay rules of routes; `ranksForward` lets every other
/// rank receive and send on (as a tree node does).
double maxFlowSets(const PlanGraph& g, const std::vector<int>& sources,
                   const std::vector<int>& sinks, const std::vector<double>& cap,
                   bool ranksForward);
/// allGatherBound (gather) / reduceScatterBound over a capacity vector.
CutBound shardCutBound(const PlanGraph& g, const std::vector<double>& cap, bool gather);
/// broadcastBound over a capacity vector.
double broadcastBoundCapped(const PlanGraph& g, int root, const std::vector<double>& cap);
/// Reduce-scatter then all-gather at their optima: 1 / (1/RS + 1/AG).
double shardAllReduceBound(const PlanGraph& g, const std::vector<double>& cap);
/// Pricing rounds column generation gets at plan time: enough to converge up
/// to 16 ranks; beyond, a few (each round is n shortest-path searches and an
/// LP), so the bound is the dual bound reached by then.
int treeOptimumRounds(const PlanGraph& g);
/// Per-rank, summed and per-machine flow bounds: true of every all-reduce,
/// not tight (maxflow.cc).
double flowAllReduceBound(const PlanGraph& g, const std::vector<double>& cap);
/// The all-reduce bound given the tree LP's proved upper bound (0: none) and
/// shardAllReduceBound: min(flow bounds, max(trees, shards)).
double familyBound(const PlanGraph& g, const std::vector<double>& cap, double treesUpper,
                   double shards);
/// allReduceBound over a capacity vector.
double allReduceBoundCapped(const PlanGraph& g, const std::vector<double>& cap);

/// Minimum-weight spanning arborescence rooted at `root` over n vertices
/// (Chu-Liu/Edmonds); w[u*n+v] is the weight of u->v (inf: no edge).
/// Returns parent by vertex (-1 for the root), or empty when some vertex is
/// unreachable.
std::vector<int> minArborescence(int n, int root, const std::vector<double>& w);
/// Minimum spanning tree (Prim) of a symmetric weight matrix, as parents
/// rooted at vertex 0; empty when disconnected.
std::vector<int> minSpanningTree(int n, const std::vector<double>& w);

/// max sum(x) subject to sum_j a[i][j] x_j <= b[i], x >= 0 (b >= 0), by the
/// simplex method. `a` is row-major rows x cols. Returns x; `duals`, when
/// given, receives an optimal dual solution (one price >= 0 per row, with
/// sum_i b[i] * duals[i] equal to the objective). `gain`, when given,
/// replaces the objective: max sum_j gain[j] x_j (any signs; the origin
/// stays feasible because b >= 0).
std::vector<double> solvePackingLp(int rows, int cols, const std::vector<double>& a,
                                   const std::vector<double>& b,
                                   std::vector<double>* duals = nullptr,
                                   const std::vector<double>* gain = nullptr);

/// The same graph (same vertices and link indices) with only `ranks`, renumbered
/// 0.. in that order, as ranks; the other ranks' vertices become dead ends.
PlanGraph subsetOfRanks(const PlanGraph& g, const std::vector<int>& ranks);

/// Per-link use counts of a set of routes (a link crossed twice counts 2).
void addUse(const std::vector<std::vector<int>>& routes, double rate, std::vector<double>& load);

/// Milliseconds since `start`.
double msSince(std::chrono::steady_clock::time_point start);

/// A candidate for the packing LP: how often it crosses each link it uses.
struct Candidate {
  std::vector<std::pair<int, int>> use;  ///< (link, times crossed)
  double weight = 0;                     ///< weight found by MWU / LP
};

/// Optimal weights of the candidates `which` (the packing LP over the links
/// they load, unbounded ports left out); writes their `weight`, returns the
/// summed rate. `linkPrice`, when given, receives the LP's dual price of
/// every link (0 for links outside the LP).
double solveSubset(std::vector<Candidate>& cands, const std::vector<int>& which,
                   const std::vector<double>& cap, std::vector<double>* linkPrice = nullptr);

/// The rate (summed optimal weights) of each trial set of candidates, as
/// solveSubset finds it but writing no weight (`weights`, when given,
/// receives each trial's, in the order of its set); large batches are
/// solved on several threads at once (concurrent.h).
std::vector<double> subsetRates(const std::vector<Candidate>& cands,
                                const std::vector<std::vector<int>>& trials,
                                const std::vector<double>& cap,
                                std::vector<std::vector<double>>* weights = nullptr);
/// The LP entries (links crossed, summed over a batch's trials and their
/// candidates) from which subsetRates uses several threads.
constexpr size_t kConcurrentEntries = 16384;

/// Optimal weights of `cands` (LP over the links they load, capacities
/// `cap`); then drops the lightest candidates and re-solves while more than
/// `maxKeep` remain or while the rate stays >= keep * the full optimum.
/// Returns the indices kept; their `weight` holds the final rates.
std::vector<int> weightAndReduce(std::vector<Candidate>& cands, const std::vector<double>& cap,
                                 int maxKeep, double keep);
/// A reduction's goal (weightAndReduce's maxKeep and keep).
struct ReduceGoal {
  int maxKeep;
  double keep;
};
/// weightAndReduce for several goals at once, in their order: the
/// reductions walk one path of drops and one of additions, which every
/// goal only cuts at its own point (the same sets as one call per goal,
/// for the LPs of one).
std::vector<std::vector<int>> weightAndReduceEach(std::vector<Candidate>& cands,
                                                  const std::vector<double>& cap,
                                                  const std::vector<ReduceGoal>& goals);

/// The oracle of tree packing: the cheapest tree under a route table's
/// prices -- the minimum arborescence rooted at `root`, or for all-reduce the
/// minimum spanning tree of the symmetric costs re-rooted at its centre
/// (ties rotate with `round`). Exact: a tree's price is the sum of its
/// edges' route prices. False when the ranks cannot be spanned.
bool cheapestTree(const PlanGraph& g, const RouteTable& table, int root, bool allReduce, int round,
                  const std::vector<double>& cap, Tree& tree);
/// The cheapest in-tree into `root` (every edge child -> parent, priced by
/// the route child -> parent: the reduce tree of reduce-scatter's forests),
/// with `up` those routes and `down` their reverse (or the cheapest route
/// back where a reverse link is missing). False when some rank cannot reach
/// the root.
bool cheapestInTree(const PlanGraph& g, const RouteTable& table, int root,
                    const std::vector<double>& cap, Tree& tree);
/// The oracle of tree-pair packing (all-reduce): for the cheapest root, the
/// minimum in-tree (reduce) and the minimum out-tree (broadcast) under the
/// route table's prices, chosen independently. Exact: a pair's price is the
/// sum of its two trees' prices, and a tree used both ways is one pair. The
/// Tree has `upParent` set when the two differ.
bool cheapestPair(const PlanGraph& g, const RouteTable& table, Tree& tree);
/// A column's price under link prices y (links without a row cost 0).
double priceOf(const std::map<int, int>& use, const std::vector<double>& y);
/// Search prices for the oracle: y plus a tiny price proportional to
/// 1/capacity, so free links still prefer short, wide routes; unusable
/// links (cap 0) cost infinity.
std::vector<double> searchPrices(const std::vector<double>& y, const std::vector<double>& cap);
/// Tree pairs are priced, and column generation runs to the optimum, up to
/// this many ranks; beyond, a pricing round (n roots x 2 arborescences of
/// O(n^3)) costs too much, so the columns are trees used both ways and the
/// bound covers those and reduce-scatter + all-gather.
constexpr int kMaxPairRanks = 16;
/// The exact oracle of column generation under link prices y (the route
/// table is cheapest under them): the cheapest arborescence at `root`, or
/// for all-reduce the cheapest tree used both ways -- replaced by the
/// cheapest pair only when the tree costs >= 1 and the pair less, so plans
/// hold pairs only where pairs gain. Returns the cheapest price over every
/// column (the pair's when cheaper), -1 when the ranks cannot be spanned.
double cheapestColumn(const PlanGraph& g, const RouteTable& table, int root, bool allReduce,
                      int round, const std::vector<double>& cap, const std::vector<double>& y,
                      Tree& tree);
/// The judge's time for a set of trees, or infinity when it cannot build them.
double judgeSeconds(const TreeJudge& judge, const std::vector<Tree>& trees, bool allReduce,
                    int root);
/// `judge`, remembering its verdict for each set of trees (shapes, routes,
/// rates and channels) it was asked about; null stays null.
TreeJudge rememberingJudge(TreeJudge judge);
/// A tree set the judges weigh against others (tree_judging.cc).
struct JudgedSet {
  const std::vector<Tree>* trees = nullptr;
  bool winsTies = true;     ///< against the sets listed before it (else only strictly faster wins)
  double knownSeconds = 0;  ///< > 0: its time by the first judge, already known
};
/// The judges' verdict on a list of sets.
struct Verdict {
  size_t chosen = 0;   ///< fastest by o.judge; the list's size when none can be built
  double seconds = 0;  ///< its time by o.judge
  /// By o.largerJudges: the fastest of the sets within a margin of `chosen`
  /// (chosen itself, unsimulated, when alone there); the list's size when
  /// none can be built. Empty when nothing was chosen.
  std::vector<size_t> larger;
  /// The sets within the larger judges' margin of `chosen` by o.judge
  /// (chosen among them, in list order): those a larger judge weighs.
  std::vector<size_t> near;
  std::vector<double> first;  ///< every set's time by o.judge (infinity: cannot be built)
};
/// The sets a verdict chose for o.largerJudges' calls, each with its band.
std::vector<SizedTrees> largerSets(const PackOptions& o, const Verdict& v,
                                   const std::vector<JudgedSet>& sets);
/// The near sets of a verdict on `sets` with their times (what a caller
/// that judges larger calls itself weighs): TreePlan::contenders.
std::vector<JudgedTrees> contendersOf(const Verdict& v, const std::vector<JudgedSet>& sets);
/// Simulates `sets` with o.judge and with o.largerJudges (those near the
/// fastest only), several at once. No judge: nothing chosen.
Verdict judgeSets(const PackOptions& o, const std::vector<JudgedSet>& sets, bool allReduce,
                  int root);
/// How often a tree crosses each link (both routes of an edge for all-reduce).
std::map<int, int> useOf(const Tree& t, bool allReduce);
/// How often a tree's `down` routes, its `up` routes, or both, cross each
/// link (a forest's trees: down for all-gather, up for reduce-scatter).
std::map<int, int> useOf(const Tree& t, bool down, bool up);
/// A key that tells distinct trees (shape and routes) apart.
std::string keyOf(const Tree& t);
/// Appends v in decimal, then `sep` (the keys' text, without a stream).
void appendKey(std::string& key, int v, char sep);

/// Each tree's rate when its channels[t] streams share every bounded link
/// they cross equally with the other streams there (max-min fair, by
/// water-filling); uses[t] = useOf(tree t). fair_share.cc.
std::vector<double> fairRates(const std::vector<std::map<int, int>>& uses,
                              const std::vector<int>& channels, const std::vector<double>& cap);
/// Gives the trees channels (kMaxTreeChannels in all at most, each next one
/// where it raises the summed fair rate most) and their fair rates as
/// `rate`, so that the data split by rate finishes on every tree together;
/// returns the summed rate. More trees than channels: left as they are.
double shareFairly(std::vector<Tree>& trees, bool allReduce, const std::vector<double>& cap);
/// The same for trees in groups (a forest: groups[t] = the group, from 0, of
/// tree t, whose links are uses[t]): the next channel goes where it raises
/// the slowest group's summed fair rate most, `most` channels in all at
/// most; returns that rate.
double shareFairly(std::vector<Tree>& trees, const std::vector<std::map<int, int>>& uses,
                   const std::vector<int>& groups, const std::vector<double>& cap, int most);

/// The shares plan.trees (LP weights as rates) run by: the fair shares, or
/// the LP's weights when the judge finds those faster (no judge:
/// o.fairShares decides); each judge of larger calls adds its choice of
/// the two to plan.larger, and without larger judges the near ones are
/// plan.contenders.
void chooseShares(const PackOptions& o, const std::vector<double>& cap, bool allReduce, int root,
                  TreePlan& plan);

/// What column generation proved about a tree packing LP.
struct TreeOptimum {
  std::vector<Tree> trees;  ///< the columns with positive weight, `rate` = weight
  double value = 0;         ///< rate of that packing (feasible)
  double upper = 0;  ///< certified upper bound: no packing of such trees beats it (0: none proved)
  std::vector<double> price;  ///< the dual's link prices, scaled so the cheapest tree costs 1
  int iterations = 0;         ///< pricing rounds run
};
/// The tree packing LP solved exactly by column generation, starting from
/// `seeds` (may be empty): stops when value >= upper * (1 - gap) or after
/// maxIterations pricing rounds. Empty (value 0) when the ranks cannot be spanned.
TreeOptimum optimalTrees(const PlanGraph& g, int root, bool allReduce,
                         const std::vector<double>& cap, const std::vector<Tree>& seeds,
                         double gap = 1e-7, int maxIterations = 400);

/// Tree packing over a capacity vector (cap 0: link unusable): rooted at
/// `root`, or all-reduce trees; `bound` stops MWU early when reached.
/// Returns an empty plan when the ranks cannot be spanned.
TreePlan packCapped(const PlanGraph& g, int root, bool allReduce, const PackOptions& o,
                    const std::vector<double>& cap, double bound);
/// All-gather (gather) or reduce-scatter forest: trees rooted at every rank
/// by column generation on the concurrent packing LP, reduced and fairly
/// shared (forest_pack.cc). Empty trees beyond kMaxForestRanks ranks or
/// when some rank cannot be reached.
TreePlan packForest(const PlanGraph& g, bool gather, const PackOptions& o);
/// Chain candidates for the packing LP (tree_candidates.cc): Hamiltonian
/// paths over links with cap > 0, rooted at `root` (all-reduce: at the
/// path's middle), with their routes filled in.
std::vector<Tree> chainCandidates(const PlanGraph& g, int root, bool allReduce,
                                  const std::vector<double>& cap);
/// The rooted chains of chainCandidates for every rank as root (forests),
/// over one table of widest routes.
std::vector<Tree> chainsFromEveryRank(const PlanGraph& g, const std::vector<double>& cap);
/// Fan trees over links with cap > 0 (tree_candidates.cc): complete
/// `fan`-ary trees in rank order, rooted at every rank (all-reduce) or at
/// `root`, with their routes; none where a fan tree would be a star.
std::vector<Tree> fanCandidates(const PlanGraph& g, int root, bool allReduce,
                                const std::vector<double>& cap, int fan);
/// The capacity vector split by link class: {NVLink, the rest} (virtual
/// ports in both); empty when the graph has only one class.
std::vector<std::vector<double>> classCapacities(const PlanGraph& g,
                                                 const std::vector<double>& cap);
/// The rest class's virtual ports (the links both classes share) less what
/// the fast class's packing loads on them (`fastLoad`, by link).
void leaveToRest(const PlanGraph& g, const std::vector<double>& fastLoad,
                 std::vector<double>& rest);
/// Throws grove::Error on nonsensical packing knobs.
void checkPackOptions(const PackOptions& o);

/// Ring packing over a capacity vector: MWU with a Hamiltonian-cycle oracle,
/// then the packing LP; at most maxRings rings. Empty when no ring exists.
RingPlan packRings(const PlanGraph& g, const std::vector<double>& cap, int maxRings, int rounds);
/// Greedy NCCL-style rings over a capacity vector: repeatedly the widest
/// Hamiltonian cycle on the residual capacities, at its bottleneck rate.
RingPlan greedyRings(const PlanGraph& g, const std::vector<double>& cap, int maxRings);

}  // namespace grove::plan::detail

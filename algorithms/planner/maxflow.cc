// Max flow over the plan graph and the bounds built on it.
//
// How it works: maxFlowSets() builds a flow network from the plan graph: a
// super source feeding the source ranks, the sink ranks draining into a
// super sink, and every usable link (capacity > 0): network links only when
// the terminals span machines. Each vertex is split into an entry and an
// exit joined where it may relay (PCIe switches, CPUs, NVSwitches, NIC sides,
// networks; never a GPU), and a rank's port leaves its node's entry and
// enters its node's exit, so traffic crosses a GPU only through a rank on
// it. With `ranksForward` ranks relay too (entry -> exit): that is a
// broadcast / reduce tree, where a rank receives and sends on; without it
// the flow is exactly what single routes (topo::pathBetween's rules) carry.
// Dinic's algorithm (BFS levels, blocking flows by DFS with per-vertex edge
// cursors) computes the value. maxFlow() is the route flow.
//
// Bounds (ranks forward, as they do in trees):
// - broadcastBound(root) = min over ranks v of the flow root -> v: every
//   byte of the message must reach v, so no packing of broadcast trees beats
//   the smallest cut around any v (Edmonds: for arborescences on a plain
//   graph it is also achievable).
// - allGatherBound / reduceScatterBound (ForestColl, arXiv 2402.06787):
//   every shard of the ranks outside a cut S must enter S, so the all-gather
//   rate is at most n * B_in(S) / |ranks outside S| for every S holding
//   some but not all ranks, and per-rank broadcast trees with unequal
//   shares reach the smallest such ratio. It is found without enumerating
//   cuts: rate x per shard is feasible iff, with a super source feeding
//   every rank x, each rank v can draw n * x; a violated cut gives a
//   smaller ratio, which replaces x until no cut is violated (Dinkelbach, a
//   few rounds of n max flows). The last cut is the certificate.
//   Reduce-scatter is the same on the reversed network.
// - flowAllReduceBound, true of every all-reduce, is the smallest of
//   (a) per rank, its out-flow to all other ranks and its in-flow from them;
//   (b) the ranks' summed out-flow (and in-flow) over 2(n-1): a sum over n
//       ranks needs 2(n-1) one-way transfers per element;
//   (c) per machine holding some but not all ranks, the flow out and in.
// - allReduceBound: the all-reduce tree LP's optimum (tree_optimum.cc,
//   proved by its dual), or 1 / (1/RS + 1/AG) when reduce-scatter then
//   all-gather does better. Simple cut arguments are not enough there: a
//   2-against-2 cut through PCIe uplinks, or a ring's partition into three
//   parts, caps the trees well below the per-rank flows. Beyond 16 ranks,
//   where column generation gets only a few rounds, its dual bound is
//   capped by flowAllReduceBound.
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <set>

#include "algorithms/planner/planner_internal.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"

namespace grove::plan {

namespace {

constexpr double kEps = 1e-12;

class Dinic {
 public:
  explicit Dinic(int n, bool reverse = false)
      : adj_(static_cast<size_t>(n)),
        level_(static_cast<size_t>(n)),
        it_(static_cast<size_t>(n)),
        reverse_(reverse) {}

  /// Adds u -> v (v -> u when the network was made reversed).
  void addEdge(int u, int v, double c) {
    if (reverse_) std::swap(u, v);
    addArc(u, v, c);
  }
  /// Adds u -> v whatever the direction of the network (terminal edges).
  void addArc(int u, int v, double c) {
    adj_[static_cast<size_t>(u)].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({v, c});
    adj_[static_cast<size_t>(v)].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({u, 0});
  }

  double run(int s, int t) {
    double flow = 0;
    while (bfs(s, t)) {
      std::fill(it_.begin(), it_.end(), 0);
      while (double f = dfs(s, t, std::numeric_limits<double>::infinity())) flow += f;
    }
    return flow;
  }

  /// Remembers the network as it stands (edges and their capacities), so
  /// that restore() can take it back after arcs are added and a run.
  void keep() {
    keptEdges_ = edges_;
    keptDegree_.clear();
    for (const std::vector<int>& a : adj_) keptDegree_.push_back(a.size());
  }
  /// The network as keep() found it: the same edges in the same order, each
  /// with its capacity, so a run on it finds what a fresh network would.
  void restore() {
    edges_ = keptEdges_;
    for (size_t u = 0; u < adj_.size(); ++u) adj_[u].resize(keptDegree_[u]);
  }

  /// After run(s, t): whether vertex v is on the source side of a minimum cut.
  bool sourceSide(int v) const { return level_[static_cast<size_t>(v)] >= 0; }

 private:
  struct Edge {
    int to;
    double cap;
  };

  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> q;
    level_[static_cast<size_t>(s)] = 0;
    q.push(s);
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (int e : adj_[static_cast<size_t>(u)]) {
        const Edge& ed = edges_[static_cast<size_t>(e)];
        if (ed.cap > kEps && level_[static_cast<size_t>(ed.to)] < 0) {
          level_[static_cast<size_t>(ed.to)] = level_[static_cast<size_t>(u)] + 1;
          q.push(ed.to);
        }
      }
    }
    return level_[static_cast<size_t>(t)] >= 0;
  }

  double dfs(int u, int t, double pushed) {
    if (u == t) return pushed;
    auto& cursor = it_[static_cast<size_t>(u)];
    const auto& out = adj_[static_cast<size_t>(u)];
    for (; cursor < out.size(); ++cursor) {
      int e = out[cursor];
      Edge& ed = edges_[static_cast<size_t>(e)];
      if (ed.cap <= kEps ||
          level_[static_cast<size_t>(ed.to)] != level_[static_cast<size_t>(u)] + 1)
        continue;
      double f = dfs(ed.to, t, std::min(pushed, ed.cap));
      if (f > kEps) {
        ed.cap -= f;
        edges_[static_cast<size_t>(e ^ 1)].cap += f;
        return f;
      }
    }
    return 0;
  }

  std::vector<std::vector<int>> adj_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<size_t> it_;
  bool reverse_ = false;
  std::vector<Edge> keptEdges_;     ///< keep(): the edges
  std::vector<size_t> keptDegree_;  ///< keep(): by vertex, its arcs
};

void checkRank(const PlanGraph& g, int r, const char* what) {
  if (r < 0 || r >= g.nranks())
    throwInvalidArgument(std::string(what) + ": rank " + std::to_string(r) + " out of range [0, " +
                         std::to_string(g.nranks()) + ")");
}

}  // namespace

namespace detail {

namespace {

// Vertex v has an entry copy v and an exit copy nv + v; a link runs from the
// exit of its tail to the entry of its head, except a rank's port: node ->
// rank leaves the node's entry, rank -> node enters its exit, so a GPU
// forwards only through a rank on it. Entry -> exit where v may relay; a
// rank relays when `ranksForward` and it is not in `noForward`. Vertices
// 2nv and 2nv+1 are left for a super source and sink.
void addGraph(Dinic& flow, const PlanGraph& g, const std::vector<double>& cap, bool allowNet,
              bool ranksForward, const std::vector<char>& noForward) {
  const int nv = g.numVertices();
  const double big = 1e18;
  for (size_t li = 0; li < g.links().size(); ++li) {
    const PlanLink& l = g.links()[li];
    if (!(cap[li] > 0) || (l.kind == topo::LinkKind::kNet && !allowNet)) continue;
    if (g.rankOfVertex(l.to) >= 0) {
      flow.addEdge(l.from, l.to, cap[li]);  // node entry -> rank
    } else if (g.rankOfVertex(l.from) >= 0) {
      const int port = 2 * nv + 2 + g.rankOfVertex(l.from);
      flow.addEdge(nv + l.from, port, cap[li]);
      flow.addEdge(port, nv + l.to, big);
      flow.addEdge(port, l.to, big);
    } else {
      flow.addEdge(nv + l.from, l.to, cap[li]);
    }
  }
  for (int v = 0; v < nv; ++v) {
    const bool rank = g.rankOfVertex(v) >= 0;
    if (rank ? ranksForward && !noForward[static_cast<size_t>(v)] : g.mayRelay(v))
      flow.addEdge(v, nv + v, big);
  }
}

int flowVertices(const PlanGraph& g) { return 2 * g.numVertices() + 2 + g.nranks(); }

}  // namespace

double maxFlowSets(const PlanGraph& g, const std::vector<int>& sources,
                   const std::vector<int>& sinks, const std::vector<double>& cap,
                   bool ranksForward) {
  const int nv = g.numVertices();
  std::vector<char> isSource(static_cast<size_t>(nv), 0), isSink(static_cast<size_t>(nv), 0);
  std::set<int> machines;
  for (int r : sources) {
    isSource[static_cast<size_t>(g.rankVertex(r))] = 1;
    machines.insert(g.machineOf(r));
  }
  for (int r : sinks) {
    if (isSource[static_cast<size_t>(g.rankVertex(r))])
      throwInvalidArgument("maxFlow: rank " + std::to_string(r) + " is both a source and a sink");
    isSink[static_cast<size_t>(g.rankVertex(r))] = 1;
    machines.insert(g.machineOf(r));
  }
  Dinic flow(flowVertices(g));
  addGraph(flow, g, cap, machines.size() > 1, ranksForward, isSink);
  const int s = 2 * nv, t = 2 * nv + 1;
  for (int r : sources) flow.addEdge(s, nv + g.rankVertex(r), 1e18);
  for (int r : sinks) flow.addEdge(g.rankVertex(r), t, 1e18);
  return flow.run(s, t);
}

CutBound shardCutBound(const PlanGraph& g, const std::vector<double>& cap, bool gather) {
  // ForestColl: rate x per shard is feasible iff, with a super source
  // feeding every rank x, every rank v can draw n*x (one cut per v). The
  // smallest ratio over violated cuts replaces x until none is violated
  // (Dinkelbach); the last cut proves the value.
  const int n = g.nranks(), nv = g.numVertices();
  CutBound out;
  if (n < 2) return out;
  std::set<int> machines;
  for (int r = 0; r < n; ++r) machines.insert(g.machineOf(r));
  const std::vector<char> none(static_cast<size_t>(nv), 0);
  const int s = 2 * nv, t = 2 * nv + 1;
  // A rank's data leaves from its exit copy and arrives at its entry; the
  // reversed network (reduce-scatter) swaps both.
  auto sendAt = [&](int r) { return gather ? nv + g.rankVertex(r) : g.rankVertex(r); };
  auto recvAt = [&](int r) { return gather ? g.rankVertex(r) : nv + g.rankVertex(r); };
  double x = std::numeric_limits<double>::infinity();
  for (int v = 0; v < n; ++v) {  // the cuts around one rank: an upper bound to start from
    std::vector<int> others;
    for (int u = 0; u < n; ++u)
      if (u != v) others.push_back(u);
    const double f =
        gather ? maxFlowSets(g, others, {v}, cap, true) : maxFlowSets(g, {v}, others, cap, true);
    if (f / (n - 1) < x) {
      x = f / (n - 1);
      out.inside = {v};
      out.crossing = f;
    }
  }
  // One network for every round and rank: its links, then each max flow's
  // terminal arcs, taken off again after it.
  Dinic flow(flowVertices(g), !gather);
  addGraph(flow, g, cap, machines.size() > 1, true, none);
  flow.keep();
  for (int round = 0; round < 64 && x > 0; ++round) {
    double next = x;
    for (int v = 0; v < n; ++v) {
      flow.restore();
      // v's own shard is there already: it enters at v's receiving side,
      // not over v's port (which several ranks on one node share).
      for (int r = 0; r < n; ++r) flow.addArc(s, r == v ? recvAt(r) : sendAt(r), x);
      flow.addArc(recvAt(v), t, 1e18);
      const double c = flow.run(s, t);
      if (c >= n * x * (1 - 1e-12)) continue;
      std::vector<int> inside;
      for (int r = 0; r < n; ++r)
        if (r == v || !flow.sourceSide(sendAt(r))) inside.push_back(r);
      const int k = static_cast<int>(inside.size());
      const double crossing = c - x * k;
      if (k < n && crossing / (n - k) < next) {
        next = crossing / (n - k);
        out.inside = inside;
        out.crossing = crossing;
      }
    }
    if (next >= x * (1 - 1e-12)) break;
    x = next;
  }
  out.rate = n * x;
  return out;
}

double broadcastBoundCapped(const PlanGraph& g, int root, const std::vector<double>& cap) {
  double best = std::numeric_limits<double>::infinity();
  for (int v = 0; v < g.nranks(); ++v)
    if (v != root) best = std::min(best, maxFlowSets(g, {root}, {v}, cap, true));
  return g.nranks() < 2 ? 0 : best;
}

double shardAllReduceBound(const PlanGraph& g, const std::vector<double>& cap) {
  const double ag = shardCutBound(g, cap, true).rate, rs = shardCutBound(g, cap, false).rate;
  return ag > 0 && rs > 0 ? 1.0 / (1.0 / ag + 1.0 / rs) : 0.0;
}

double flowAllReduceBound(const PlanGraph& g, const std::vector<double>& cap) {
  const int n = g.nranks();
  if (n < 2) return 0;
  double best = std::numeric_limits<double>::infinity();
  double sumOut = 0, sumIn = 0;
  for (int v = 0; v < n; ++v) {  // (a), and the sums of (b)
    std::vector<int> others;
    for (int u = 0; u < n; ++u)
      if (u != v) others.push_back(u);
    double out = maxFlowSets(g, {v}, others, cap, true);
    double in = maxFlowSets(g, others, {v}, cap, true);
    sumOut += out;
    sumIn += in;
    best = std::min({best, out, in});
  }
  best = std::min({best, sumOut / (2.0 * (n - 1)), sumIn / (2.0 * (n - 1))});  // (b)
  std::vector<std::vector<int>> byMachine(static_cast<size_t>(std::max(1, g.numMachines())));
  for (int v = 0; v < n; ++v) byMachine[static_cast<size_t>(g.machineOf(v))].push_back(v);
  for (const std::vector<int>& inside : byMachine) {  // (c)
    if (inside.empty() || static_cast<int>(inside.size()) == n) continue;
    std::vector<int> outside;
    for (int v = 0; v < n; ++v)
      if (std::find(inside.begin(), inside.end(), v) == inside.end()) outside.push_back(v);
    best = std::min({best, maxFlowSets(g, inside, outside, cap, true),
                     maxFlowSets(g, outside, inside, cap, true)});
  }
  return best;
}

double allReduceBoundCapped(const PlanGraph& g, const std::vector<double>& cap) {
  if (g.nranks() < 2) return 0;
  return familyBound(g, cap, optimalTrees(g, 0, true, cap, {}, 1e-7, treeOptimumRounds(g)).upper,
                     shardAllReduceBound(g, cap));
}

double familyBound(const PlanGraph& g, const std::vector<double>& cap, double treesUpper,
                   double shards) {
  const double flows = flowAllReduceBound(g, cap);
  if (!(treesUpper > 0)) treesUpper = flows;  // column generation proved nothing in its rounds
  return std::min(flows, std::max(treesUpper, shards));
}

}  // namespace detail

double maxFlow(const PlanGraph& g, int fromRank, int toRank) {
  checkRank(g, fromRank, "maxFlow");
  checkRank(g, toRank, "maxFlow");
  if (fromRank == toRank) throwInvalidArgument("maxFlow: source and sink are the same rank");
  return detail::maxFlowSets(g, {fromRank}, {toRank}, g.capacities(), false);
}

double broadcastBound(const PlanGraph& g, int root) {
  checkRank(g, root, "broadcastBound");
  return detail::broadcastBoundCapped(g, root, g.capacities());
}

double allReduceBound(const PlanGraph& g) {
  return detail::allReduceBoundCapped(g, g.capacities());
}

CutBound allGatherBound(const PlanGraph& g) {
  return detail::shardCutBound(g, g.capacities(), true);
}

CutBound reduceScatterBound(const PlanGraph& g) {
  return detail::shardCutBound(g, g.capacities(), false);
}

}  // namespace grove::plan

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
// - allReduceBound (GB/s of message, no in-network reduction) is the
//   smallest of:
//   (a) per rank, its out-flow to all other ranks and its in-flow from them:
//       every element of its input must leave it (other ranks' results
//       depend on it) and every element of the result must reach it;
//   (b) the ranks' summed out-flow (and in-flow) divided by 2(n-1): a sum
//       over n ranks needs at least 2(n-1) one-way transfers per element
//       (one-way gossip needs 2n-2 calls), each leaving one rank and
//       entering one;
//   (c) per machine holding some but not all ranks, the flow out of and into
//       its ranks: every element crosses that cut at least once each way.
//   Every term is a max flow with the relay rules relaxed at most, so the
//   minimum is an honest upper bound; all-reduce trees (each edge carrying
//   the tree's rate both ways) meet (a) and (b) with equality at best.
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <set>

#include "algorithms/planner_internal.h"
#include "algorithms/topo_plan.h"
#include "base/error.h"

namespace grove::plan {

namespace {

constexpr double kEps = 1e-12;

class Dinic {
 public:
  explicit Dinic(int n) : adj_(static_cast<size_t>(n)), level_(static_cast<size_t>(n)), it_(static_cast<size_t>(n)) {}

  void addEdge(int u, int v, double c) {
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
      if (ed.cap <= kEps || level_[static_cast<size_t>(ed.to)] != level_[static_cast<size_t>(u)] + 1) continue;
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
};

void checkRank(const PlanGraph& g, int r, const char* what) {
  if (r < 0 || r >= g.nranks())
    throwInvalidArgument(std::string(what) + ": rank " + std::to_string(r) + " out of range [0, " +
                         std::to_string(g.nranks()) + ")");
}

}  // namespace

namespace detail {

double maxFlowSets(const PlanGraph& g, const std::vector<int>& sources, const std::vector<int>& sinks,
                   const std::vector<double>& cap, bool ranksForward) {
  // Vertex v has an entry copy v and an exit copy nv + v; a link runs from
  // the exit of its tail to the entry of its head, except a rank's port:
  // node -> rank leaves the node's entry, rank -> node enters its exit, so a
  // GPU forwards only through a rank on it. Entry -> exit where v may relay.
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
  const bool allowNet = machines.size() > 1;
  // Extra vertices: super source, super sink, then one per rank port (rank ->
  // node), which feeds the node's exit (out to links) and its entry (to
  // other ranks on the same node).
  Dinic flow(2 * nv + 2 + g.nranks());
  const int s = 2 * nv, t = 2 * nv + 1;
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
    if (rank ? ranksForward && !isSink[static_cast<size_t>(v)] : g.mayRelay(v)) flow.addEdge(v, nv + v, big);
  }
  for (int r : sources) flow.addEdge(s, nv + g.rankVertex(r), big);
  for (int r : sinks) flow.addEdge(g.rankVertex(r), t, big);
  return flow.run(s, t);
}

double broadcastBoundCapped(const PlanGraph& g, int root, const std::vector<double>& cap) {
  double best = std::numeric_limits<double>::infinity();
  for (int v = 0; v < g.nranks(); ++v)
    if (v != root) best = std::min(best, maxFlowSets(g, {root}, {v}, cap, true));
  return g.nranks() < 2 ? 0 : best;
}

double allReduceBoundCapped(const PlanGraph& g, const std::vector<double>& cap) {
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
    best = std::min({best, maxFlowSets(g, inside, outside, cap, true), maxFlowSets(g, outside, inside, cap, true)});
  }
  return best;
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

double allReduceBound(const PlanGraph& g) { return detail::allReduceBoundCapped(g, g.capacities()); }

}  // namespace grove::plan

// Per-peer socket addresses from link end addresses; see link_addresses.h.
#include "topology/link_addresses.h"

#include <limits>
#include <queue>
#include <tuple>

#include "base/error.h"

namespace grove::topo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// May the route relay through `u` (not its first node)? GPUs, machine nodes
// and nodes that hold a rank never relay.
bool relays(const Graph& g, NodeId u, const std::vector<bool>& rankNode) {
  const NodeKind k = g.node(u).kind;
  return k != NodeKind::kGpu && k != NodeKind::kMachine && !rankNode[static_cast<size_t>(u)];
}

// Widest route a -> b (bottleneck, then fewer hops) by the relay rules; link
// indices from a to b, empty when there is none.
std::vector<int> widestRoute(const Graph& g, NodeId a, NodeId b,
                             const std::vector<bool>& rankNode) {
  const bool allowNet = g.node(a).machine != g.node(b).machine;
  const size_t n = g.nodes().size();
  std::vector<double> bw(n, -1);
  std::vector<int> hops(n, 0), via(n, -1);
  std::vector<bool> done(n, false);
  std::priority_queue<std::tuple<double, int, NodeId>> queue;  // bottleneck, -hops, node
  bw[static_cast<size_t>(a)] = kInf;
  queue.emplace(kInf, 0, a);
  while (!queue.empty()) {
    const NodeId u = std::get<2>(queue.top());
    queue.pop();
    const size_t ui = static_cast<size_t>(u);
    if (done[ui]) continue;
    done[ui] = true;
    if (u == b) break;
    if (u != a && !relays(g, u, rankNode)) continue;
    // A NIC is crossed only between its PCIe side and its network side.
    const bool nicRelay = u != a && g.node(u).kind == NodeKind::kNic;
    const bool cameByNet =
        via[ui] >= 0 && g.links()[static_cast<size_t>(via[ui])].kind == LinkKind::kNet;
    for (int li : g.outLinks(u)) {
      const Link& l = g.links()[static_cast<size_t>(li)];
      const bool net = l.kind == LinkKind::kNet;
      if ((net && !allowNet) || (nicRelay && net == cameByNet)) continue;
      const double nb = std::min(bw[ui], l.bw);
      const int nh = hops[ui] + 1;
      const size_t t = static_cast<size_t>(l.to);
      if (done[t] || nb < bw[t] || (nb == bw[t] && nh >= hops[t])) continue;
      bw[t] = nb;
      hops[t] = nh;
      via[t] = li;
      queue.emplace(nb, -nh, l.to);
    }
  }
  std::vector<int> route;
  if (bw[static_cast<size_t>(b)] < 0) return route;
  for (NodeId v = b; v != a;) {
    const int li = via[static_cast<size_t>(v)];
    route.insert(route.begin(), li);
    v = g.links()[static_cast<size_t>(li)].from;
  }
  return route;
}

// The widest direct link a -> b, or -1.
int widestDirectLink(const Graph& g, NodeId a, NodeId b) {
  int best = -1;
  for (int li : g.outLinks(a)) {
    const Link& l = g.links()[static_cast<size_t>(li)];
    if (l.to == b && (best < 0 || l.bw > g.links()[static_cast<size_t>(best)].bw)) best = li;
  }
  return best;
}

// An address of node `b`: the end at `b` of its widest link that has one ("" if none).
std::string anyAddressOf(const Graph& g, NodeId b) {
  std::string addr;
  double bestBw = -1;
  for (const Link& l : g.links()) {
    const std::string& mine = l.to == b ? l.dstAddr : l.from == b ? l.srcAddr : addr;
    if ((l.to == b || l.from == b) && !mine.empty() && l.bw > bestBw) {
      addr = mine;
      bestBw = l.bw;
    }
  }
  return addr;
}

std::string routeText(const Graph& g, const std::vector<int>& route) {
  std::string s = g.node(g.links()[static_cast<size_t>(route[0])].from).name;
  for (int li : route) {
    const Link& l = g.links()[static_cast<size_t>(li)];
    s += std::string(" -") + kindName(l.kind) + "-> " + g.node(l.to).name;
  }
  return s;
}

PeerLinkAddress resolveOne(const Graph& g, NodeId a, NodeId b, const std::vector<bool>& rankNode) {
  PeerLinkAddress out;
  if (a == b) {
    out.path = "same node " + g.node(a).name;
    return out;
  }
  std::vector<int> route;
  const int direct = widestDirectLink(g, a, b);
  if (direct >= 0) {
    route = {direct};
    out.path = "direct " + routeText(g, route);
  } else {
    route = widestRoute(g, a, b, rankNode);
    if (!route.empty()) out.path = "route " + routeText(g, route);
  }
  if (!route.empty()) {
    out.local = g.links()[static_cast<size_t>(route.front())].srcAddr;
    out.remote = g.links()[static_cast<size_t>(route.back())].dstAddr;
  }
  if (out.remote.empty()) {
    out.local.clear();  // a bound source address without a matching destination may not route
    out.remote = anyAddressOf(g, b);
    if (route.empty()) out.path = "no route that avoids relaying through ranks or GPUs";
    if (!out.remote.empty()) out.path += "; to an address of " + g.node(b).name + " (forwarded)";
  }
  return out;
}

}  // namespace

std::vector<PeerLinkAddress> resolvePeerLinkAddresses(const CommTopology& t, int rank) {
  const int n = static_cast<int>(t.ranks.size());
  if (rank < 0 || rank >= n)
    throwInvalidArgument("link addresses: rank " + std::to_string(rank) + " is not in 0.." +
                         std::to_string(n - 1));
  std::vector<PeerLinkAddress> out(static_cast<size_t>(n));
  if (!t.graph.hasLinkAddresses()) return out;
  std::vector<bool> rankNode(t.graph.nodes().size(), false);
  for (const RankPlacement& p : t.ranks)
    if (p.node >= 0) rankNode[static_cast<size_t>(p.node)] = true;
  const NodeId a = t.ranks[static_cast<size_t>(rank)].node;
  for (int peer = 0; peer < n; ++peer) {
    const NodeId b = t.ranks[static_cast<size_t>(peer)].node;
    if (peer == rank || a < 0 || b < 0) continue;
    out[static_cast<size_t>(peer)] = resolveOne(t.graph, a, b, rankNode);
  }
  return out;
}

}  // namespace grove::topo

#include "topology/paths.h"

#include <algorithm>
#include <queue>
#include <sstream>
#include <tuple>

namespace grove::topo {

const char* pathTypeName(PathType t) {
  switch (t) {
    case PathType::kSelf: return "X";
    case PathType::kNvLink: return "NV";
    case PathType::kNvSwitch: return "NVS";
    case PathType::kPix: return "PIX";
    case PathType::kPxb: return "PXB";
    case PathType::kPhb: return "PHB";
    case PathType::kSys: return "SYS";
    case PathType::kNet: return "NET";
    case PathType::kNone: return "-";
  }
  return "?";
}

namespace {

struct Label {
  double bw = -1;  // bottleneck so far (-1: unreached)
  int hops = 0;
  double lat = 0;
  int via = -1;  // link index used to arrive
};

// True when label a is strictly better than b.
bool better(const Label& a, const Label& b) {
  if (a.bw != b.bw) return a.bw > b.bw;
  if (a.hops != b.hops) return a.hops < b.hops;
  return a.lat < b.lat;
}

// May a path that arrived at `u` over link `in` continue over link `out`?
bool mayRelay(const Graph& g, NodeId u, const Link& in, const Link& out) {
  switch (g.node(u).kind) {
    case NodeKind::kGpu: return false;
    case NodeKind::kMachine: return false;
    case NodeKind::kNic: return (in.kind == LinkKind::kNet) != (out.kind == LinkKind::kNet);
    default: return true;
  }
}

PathType typeOf(const Graph& g, const std::vector<int>& links, int* nvlinks) {
  bool allNv = !links.empty();
  bool net = false, smp = false, cpu = false;
  int pciSwitches = 0;
  for (size_t i = 0; i < links.size(); ++i) {
    const Link& l = g.links()[links[i]];
    allNv = allNv && l.kind == LinkKind::kNvLink;
    net = net || l.kind == LinkKind::kNet;
    smp = smp || l.kind == LinkKind::kSmp;
    if (i + 1 < links.size()) {  // intermediate node l.to
      NodeKind k = g.node(l.to).kind;
      cpu = cpu || k == NodeKind::kCpu;
      pciSwitches += k == NodeKind::kPciSwitch;
    }
  }
  if (!links.empty()) *nvlinks = allNv ? g.links()[links[0]].count : 0;
  if (net) return PathType::kNet;
  if (allNv) return links.size() == 1 ? PathType::kNvLink : PathType::kNvSwitch;
  if (smp) return PathType::kSys;
  if (cpu) return PathType::kPhb;
  return pciSwitches <= 1 ? PathType::kPix : PathType::kPxb;
}

}  // namespace

Path pathBetween(const Graph& g, NodeId a, NodeId b) {
  Path p;
  if (a == b) {
    p.type = PathType::kSelf;
    return p;
  }
  const bool sameMachine = g.node(a).machine == g.node(b).machine;
  std::vector<Label> best(g.nodes().size());
  std::vector<bool> done(g.nodes().size(), false);
  best[a].bw = 1e300;
  using Item = std::tuple<double, int, double, NodeId>;  // bw, -hops, -lat, node
  std::priority_queue<Item> queue;
  queue.emplace(best[a].bw, 0, 0.0, a);
  while (!queue.empty()) {
    NodeId u = std::get<3>(queue.top());
    queue.pop();
    if (done[u]) continue;
    done[u] = true;
    if (u == b) break;
    for (int li : g.outLinks(u)) {
      const Link& l = g.links()[li];
      if (l.kind == LinkKind::kNet && sameMachine) continue;
      if (u != a && !mayRelay(g, u, g.links()[best[u].via], l)) continue;
      Label cand{std::min(best[u].bw, l.bw), best[u].hops + 1, best[u].lat + l.latencyUs, li};
      if (done[l.to] || !better(cand, best[l.to])) continue;
      best[l.to] = cand;
      queue.emplace(cand.bw, -cand.hops, -cand.lat, l.to);
    }
  }
  if (best[b].bw < 0) return p;
  for (NodeId v = b; v != a; v = g.links()[best[v].via].from) p.links.push_back(best[v].via);
  std::reverse(p.links.begin(), p.links.end());
  p.bottleneck = best[b].bw;
  p.latencyUs = best[b].lat;
  p.type = typeOf(g, p.links, &p.nvlinks);
  return p;
}

double bottleneckBw(const Graph& g, NodeId a, NodeId b) { return pathBetween(g, a, b).bottleneck; }

PathType classify(const Graph& g, NodeId a, NodeId b) { return pathBetween(g, a, b).type; }

std::string describePath(const Graph& g, const Path& p) {
  if (p.type == PathType::kSelf) return "(self)";
  if (p.links.empty()) return "(no path)";
  std::ostringstream os;
  os << g.qualifiedName(g.links()[p.links[0]].from);
  for (int li : p.links) {
    const Link& l = g.links()[li];
    os << " -" << kindName(l.kind) << '(' << l.bw << ")-> " << g.qualifiedName(l.to);
  }
  return os.str();
}

namespace {
bool listed(const std::string& list, const std::string& name) {
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (item == name) return true;
  return false;
}
}  // namespace

bool canP2P(const Graph& g, NodeId a, NodeId b) {
  const Node& na = g.node(a);
  const Node& nb = g.node(b);
  if (na.kind != NodeKind::kGpu || nb.kind != NodeKind::kGpu) return false;
  if (a == b) return true;
  if (na.machine != nb.machine) return false;
  if (na.attr("p2p") == "0" || nb.attr("p2p") == "0") return false;
  if (na.attrs.count("p2p_peers")) return listed(na.attr("p2p_peers"), nb.name);
  PathType t = classify(g, a, b);
  return t != PathType::kNone && t <= PathType::kPhb;
}

NodeId closestNic(const Graph& g, NodeId node) {
  NodeId bestNic = -1;
  std::tuple<PathType, double, double> bestKey{PathType::kNone, 0, 0};
  for (NodeId nic : g.nodesOfKind(NodeKind::kNic, g.node(node).machine)) {
    Path p = pathBetween(g, node, nic);
    if (!p.exists()) continue;
    std::tuple<PathType, double, double> key{p.type, -p.bottleneck, p.latencyUs};
    if (bestNic < 0 || key < bestKey) {
      bestNic = nic;
      bestKey = key;
    }
  }
  return bestNic;
}

NodeId localCpu(const Graph& g, NodeId node) {
  if (g.node(node).kind == NodeKind::kCpu) return node;
  NodeId bestCpu = -1;
  std::tuple<PathType, size_t> bestKey{PathType::kNone, 0};
  for (NodeId cpu : g.nodesOfKind(NodeKind::kCpu, g.node(node).machine)) {
    Path p = pathBetween(g, node, cpu);
    if (!p.exists()) continue;
    std::tuple<PathType, size_t> key{p.type, p.links.size()};
    if (bestCpu < 0 || key < bestKey) {
      bestCpu = cpu;
      bestKey = key;
    }
  }
  return bestCpu;
}

}  // namespace grove::topo

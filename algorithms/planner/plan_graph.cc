// The planners' graph and its routes.
//
// How it works: fromTopology() copies every node of the machine graph but
// the machine nodes (which only group) into a vertex, except that a NIC
// becomes two vertices, "<nic>" (entered from PCIe, leaves to the network)
// and "<nic>:net" (entered from the network, leaves to PCIe): the rule "a
// NIC is crossed only between its PCIe and network sides" then holds by
// construction, and every remaining relay rule is a property of one vertex.
// Each rank gets a vertex joined to its GPU / CPU vertex by a pair of
// virtual links (its port); a port is unbounded when the rank is alone on
// its node, else it has the shared-port bandwidth. GPUs and rank vertices
// never relay; a route may still leave its source's node and enter its
// destination's node (the source rank's GPU sends; the destination's GPU
// receives). Network links are used only between ranks of different
// machines. Routes are Dijkstra searches with these rules: additive prices
// (cheapestRoute, and cheapestRoutes for every pair at once: one search per
// source, two when the ranks span machines, one without network links for
// the source's own machine) or bottleneck-then-hops (widestRoute).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

#include "algorithms/planner/planner_internal.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"

namespace grove::plan {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

struct PlanGraphBuilder {
  PlanGraph g;
  std::map<std::tuple<int, int, int>, int> byEnds;  // (from, to, kind) -> link

  int addVertex(const std::string& name, bool relay, int machine) {
    g.names_.push_back(name);
    g.out_.emplace_back();
    g.relay_.push_back(relay);
    g.vertexRank_.push_back(-1);
    g.vertexMachine_.push_back(machine);
    return static_cast<int>(g.names_.size()) - 1;
  }

  void addLink(const PlanLink& l) {
    int id = static_cast<int>(g.links_.size());
    g.links_.push_back(l);
    g.out_[static_cast<size_t>(l.from)].push_back(id);
    byEnds.emplace(std::make_tuple(l.from, l.to, static_cast<int>(l.kind)), id);
  }

  // The same vertices and links with only `ranks` (renumbered in that
  // order) as ranks: the other rank vertices become dead ends.
  static PlanGraph subset(const PlanGraph& src, const std::vector<int>& ranks) {
    PlanGraph g = src;
    g.nranks_ = static_cast<int>(ranks.size());
    g.rankVertex_.clear();
    g.rankNode_.clear();
    g.machineOf_.clear();
    for (int& r : g.vertexRank_) r = -1;
    for (size_t i = 0; i < ranks.size(); ++i) {
      const int r = ranks[i];
      g.rankVertex_.push_back(src.rankVertex(r));
      g.rankNode_.push_back(src.rankNode(r));
      g.machineOf_.push_back(src.machineOf(r));
      g.vertexRank_[static_cast<size_t>(src.rankVertex(r))] = static_cast<int>(i);
    }
    return g;
  }

  // Reverses: ports by their ends; machine links through the topology (a
  // NIC's two sides make plan-graph ends differ from the topology's).
  void linkReverses(const topo::Graph& tg) {
    std::map<int, int> planOfTopo;
    for (size_t i = 0; i < g.links_.size(); ++i)
      if (g.links_[i].topoLink >= 0) planOfTopo[g.links_[i].topoLink] = static_cast<int>(i);
    g.reverse_.assign(g.links_.size(), -1);
    for (size_t i = 0; i < g.links_.size(); ++i) {
      const PlanLink& l = g.links_[i];
      if (l.topoLink >= 0) {
        const topo::Link& t = tg.links()[static_cast<size_t>(l.topoLink)];
        auto it = planOfTopo.find(tg.findLink(t.to, t.from, t.kind));
        if (it != planOfTopo.end()) g.reverse_[i] = it->second;
        continue;
      }
      auto it = byEnds.find(std::make_tuple(l.to, l.from, static_cast<int>(l.kind)));
      if (it != byEnds.end()) g.reverse_[i] = it->second;
    }
  }
};

PlanGraph PlanGraph::fromTopology(const topo::CommTopology& topology,
                                  const PlanGraphOptions& options) {
  const topo::Graph& tg = topology.graph;
  PlanGraphBuilder b;
  PlanGraph& g = b.g;
  std::vector<topo::NodeId> machines = tg.machines();
  std::map<topo::NodeId, int> machineIndex;
  for (size_t i = 0; i < machines.size(); ++i) machineIndex[machines[i]] = static_cast<int>(i);
  g.numMachines_ = static_cast<int>(machines.size());
  // Vertices: [pcie side, net side] per topology node (the same vertex unless a NIC).
  std::vector<std::pair<int, int>> vertexOf(tg.nodes().size(), {-1, -1});
  for (size_t id = 0; id < tg.nodes().size(); ++id) {
    const topo::Node& n = tg.node(static_cast<topo::NodeId>(id));
    if (n.kind == topo::NodeKind::kMachine) continue;
    int machine = n.machine >= 0 ? machineIndex.at(n.machine) : -1;
    std::string name = tg.qualifiedName(static_cast<topo::NodeId>(id));
    int v = b.addVertex(name, n.kind != topo::NodeKind::kGpu, machine);
    int w = n.kind == topo::NodeKind::kNic ? b.addVertex(name + ":net", true, machine) : v;
    vertexOf[id] = {v, w};
  }
  for (size_t li = 0; li < tg.links().size(); ++li) {
    const topo::Link& l = tg.links()[li];
    const bool net = l.kind == topo::LinkKind::kNet;
    auto [fromPci, fromNet] = vertexOf.at(static_cast<size_t>(l.from));
    auto [toPci, toNet] = vertexOf.at(static_cast<size_t>(l.to));
    if (fromPci < 0 || toPci < 0) continue;
    // Out of a NIC: network links leave its PCIe side, PCIe links its network side.
    int from = net ? fromPci : fromNet;
    int to = net ? toNet : toPci;
    if (!(l.bw > 0)) continue;
    b.addLink(PlanLink{from, to, l.bw, l.latencyUs, l.kind, static_cast<int>(li)});
  }
  const int n = static_cast<int>(topology.ranks.size());
  g.nranks_ = n;
  std::map<topo::NodeId, int> ranksOnNode;
  for (const topo::RankPlacement& p : topology.ranks) ++ranksOnNode[p.node];
  for (int r = 0; r < n; ++r) {
    const topo::RankPlacement& p = topology.ranks[static_cast<size_t>(r)];
    if (p.node < 0 || static_cast<size_t>(p.node) >= tg.nodes().size())
      throwInvalidArgument("PlanGraph: rank " + std::to_string(r) + " is not placed on a node");
    const topo::Node& node = tg.node(p.node);
    if (node.kind != topo::NodeKind::kGpu && node.kind != topo::NodeKind::kCpu)
      throwInvalidArgument("PlanGraph: rank " + std::to_string(r) + " sits on " +
                           tg.qualifiedName(p.node) + ", which is neither a GPU nor a CPU");
    int nodeVertex = vertexOf[static_cast<size_t>(p.node)].first;
    int machine = machineIndex.at(node.machine);
    int v = b.addVertex("rank" + std::to_string(r), false, machine);
    g.vertexRank_[static_cast<size_t>(v)] = r;
    g.rankVertex_.push_back(v);
    g.rankNode_.push_back(nodeVertex);
    g.machineOf_.push_back(machine);
    double cap = kUnbounded;
    if (ranksOnNode[p.node] > 1) {
      cap = options.sharedPortBw;
      if (!(cap > 0)) cap = std::atof(node.attr("mem_bw", "0").c_str());
      if (!(cap > 0)) cap = 10;
    }
    b.addLink(PlanLink{v, nodeVertex, cap, 0, topo::LinkKind::kPcie, -1});
    b.addLink(PlanLink{nodeVertex, v, cap, 0, topo::LinkKind::kPcie, -1});
  }
  b.linkReverses(tg);
  return std::move(b.g);
}

std::vector<double> PlanGraph::capacities() const {
  std::vector<double> cap(links_.size());
  for (size_t i = 0; i < links_.size(); ++i) cap[i] = links_[i].cap;
  return cap;
}

namespace {

// Which links a route from rank `src` may leave vertex u by: none from
// another rank's vertex; from src's own vertex or node, any; elsewhere only
// where u relays, or into a rank (its last hop); a network link only when
// `allowNet`. What depends on u alone is worked out once per vertex.
class Exits {
 public:
  Exits(const PlanGraph& g, int src, int u, bool allowNet)
      : g_(g), allowNet_(allowNet), own_(u == g.rankVertex(src) || u == g.rankNode(src)) {
    closed_ = !own_ && g.rankOfVertex(u) >= 0;
    relays_ = own_ || (!closed_ && g.mayRelay(u));
  }
  bool closed() const { return closed_; }  ///< no link leaves u
  bool allows(const PlanLink& l) const {
    if (l.kind == topo::LinkKind::kNet && !allowNet_) return false;
    return relays_ || g_.rankOfVertex(l.to) >= 0;
  }

 private:
  const PlanGraph& g_;
  bool allowNet_, own_, closed_ = false, relays_ = false;
};

// Dijkstra on additive prices from rank src; fills dist and the arriving link by vertex.
void dijkstra(const PlanGraph& g, int src, const std::vector<double>& price,
              const std::vector<double>& cap, bool allowNet, std::vector<double>& dist,
              std::vector<int>& via) {
  const int nv = g.numVertices();
  dist.assign(static_cast<size_t>(nv), kInf);
  via.assign(static_cast<size_t>(nv), -1);
  using Item = std::pair<double, int>;
  std::vector<Item> heap;
  heap.reserve(static_cast<size_t>(nv));
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue(std::greater<>{},
                                                                     std::move(heap));
  int s = g.rankVertex(src);
  dist[static_cast<size_t>(s)] = 0;
  queue.emplace(0.0, s);
  while (!queue.empty()) {
    auto [d, u] = queue.top();
    queue.pop();
    if (d > dist[static_cast<size_t>(u)]) continue;
    const Exits exits(g, src, u, allowNet);
    if (exits.closed()) continue;
    for (int li : g.outLinks(u)) {
      const PlanLink& l = g.links()[static_cast<size_t>(li)];
      if (!(cap[static_cast<size_t>(li)] > 0) || !exits.allows(l)) continue;
      double nd = d + price[static_cast<size_t>(li)];
      if (nd < dist[static_cast<size_t>(l.to)]) {
        dist[static_cast<size_t>(l.to)] = nd;
        via[static_cast<size_t>(l.to)] = li;
        queue.emplace(nd, l.to);
      }
    }
  }
}

std::vector<int> unwind(const PlanGraph& g, const std::vector<int>& via, int from, int to) {
  std::vector<int> route;
  for (int v = to; v != from;) {
    int li = via[static_cast<size_t>(v)];
    if (li < 0) return {};
    route.push_back(li);
    v = g.links()[static_cast<size_t>(li)].from;
  }
  std::reverse(route.begin(), route.end());
  return route;
}

void checkRank(const PlanGraph& g, int r, const char* what) {
  if (r < 0 || r >= g.nranks())
    throwInvalidArgument(std::string(what) + ": rank " + std::to_string(r) + " out of range [0, " +
                         std::to_string(g.nranks()) + ")");
}

}  // namespace

std::vector<int> PlanGraph::cheapestRoute(int a, int b, const std::vector<double>& price) const {
  checkRank(*this, a, "cheapestRoute");
  checkRank(*this, b, "cheapestRoute");
  if (price.size() != links_.size())
    throwInvalidArgument("cheapestRoute: one price per link expected");
  if (a == b) return {};
  std::vector<double> dist;
  std::vector<int> via;
  dijkstra(*this, a, price, capacities(), machineOf(a) != machineOf(b), dist, via);
  return unwind(*this, via, rankVertex(a), rankVertex(b));
}

std::vector<int> PlanGraph::widestRoute(int a, int b) const {
  checkRank(*this, a, "widestRoute");
  checkRank(*this, b, "widestRoute");
  if (a == b) return {};
  return detail::widestRouteCapped(*this, a, b, capacities());
}

double PlanGraph::bottleneck(const std::vector<int>& route) const {
  if (route.empty()) return 0;
  double m = kInf;
  for (int li : route) m = std::min(m, links_.at(static_cast<size_t>(li)).cap);
  return m;
}

double PlanGraph::latencyUs(const std::vector<int>& route) const {
  double s = 0;
  for (int li : route) s += links_.at(static_cast<size_t>(li)).latencyUs;
  return s;
}

namespace detail {

std::vector<int> RouteTable::route(int a, int b) const {
  const size_t k = static_cast<size_t>(a) * n + b;
  if (!routes.empty()) return routes[k];
  if (a == b || !(cost[k] < kInf)) return {};
  const int pass = graph->machineOf(a) != graph->machineOf(b) ? 1 : 0;
  return unwind(*graph, via[2 * static_cast<size_t>(a) + pass], graph->rankVertex(a),
                graph->rankVertex(b));
}

namespace {

// Routes from rank a go in two passes, each one search: pass 0 reaches the
// ranks of a's own machine without network links, pass 1 (only where other
// machines exist) those of the other machines with them. `search(net, pass)`
// runs the pass's search; `found(b)` then takes each of its ranks.
template <class Search, class Found>
void bySearch(const PlanGraph& g, int a, Search search, Found found) {
  const int n = g.nranks();
  for (int pass = 0; pass < 2; ++pass) {
    const bool net = pass == 1;
    bool any = false;
    for (int b = 0; b < n; ++b) any = any || (g.machineOf(b) != g.machineOf(a)) == net;
    if (!any) continue;
    search(net, pass);
    for (int b = 0; b < n; ++b)
      if (b != a && (g.machineOf(b) != g.machineOf(a)) == net) found(b);
  }
}

}  // namespace

RouteTable cheapestRoutes(const PlanGraph& g, const std::vector<double>& price,
                          const std::vector<double>& cap) {
  RouteTable t;
  const int n = g.nranks();
  t.n = n;
  t.graph = &g;
  t.cost.assign(static_cast<size_t>(n) * n, kInf);
  t.via.resize(2 * static_cast<size_t>(n));
  std::vector<double> dist;
  for (int a = 0; a < n; ++a) {
    const auto search = [&](bool net, int pass) {
      dijkstra(g, a, price, cap, net, dist, t.via[2 * static_cast<size_t>(a) + pass]);
    };
    bySearch(g, a, search, [&](int b) {
      t.cost[static_cast<size_t>(a) * n + b] = dist[static_cast<size_t>(g.rankVertex(b))];
    });
    t.cost[static_cast<size_t>(a) * n + a] = 0;
  }
  return t;
}

namespace {

// Widest routes from rank a (bottleneck, then fewest links) over links with
// cap > 0: fills `bw` and the arriving link by vertex. Other ranks' vertices
// are reached but never left (Exits); with `target` >= 0 the search stops
// once that vertex is final, which leaves its label as a full search would.
void widestFrom(const PlanGraph& g, int a, const std::vector<double>& cap, bool allowNet,
                int target, std::vector<double>& bw, std::vector<int>& via) {
  const int nv = g.numVertices();
  bw.assign(static_cast<size_t>(nv), -1);
  via.assign(static_cast<size_t>(nv), -1);
  std::vector<int> hops(static_cast<size_t>(nv), 0);
  std::vector<bool> done(static_cast<size_t>(nv), false);
  using Item = std::tuple<double, int, int>;  // bottleneck, -hops, vertex
  std::priority_queue<Item> queue;
  const int s = g.rankVertex(a);
  bw[static_cast<size_t>(s)] = kInf;
  queue.emplace(kInf, 0, s);
  while (!queue.empty()) {
    int u = std::get<2>(queue.top());
    queue.pop();
    if (done[static_cast<size_t>(u)]) continue;
    done[static_cast<size_t>(u)] = true;
    if (u == target) break;
    const Exits exits(g, a, u, allowNet);
    if (exits.closed()) continue;
    for (int li : g.outLinks(u)) {
      const PlanLink& l = g.links()[static_cast<size_t>(li)];
      const double c = cap[static_cast<size_t>(li)];
      if (!(c > 0) || !exits.allows(l)) continue;
      if (target >= 0 && l.to != target && g.rankOfVertex(l.to) >= 0) continue;
      double nb = std::min(bw[static_cast<size_t>(u)], c);
      int nh = hops[static_cast<size_t>(u)] + 1;
      size_t t = static_cast<size_t>(l.to);
      if (done[t] || nb < bw[t] || (nb == bw[t] && nh >= hops[t])) continue;
      bw[t] = nb;
      hops[t] = nh;
      via[t] = li;
      queue.emplace(nb, -nh, l.to);
    }
  }
}

}  // namespace

std::vector<int> widestRouteCapped(const PlanGraph& g, int a, int b, const std::vector<double>& cap,
                                   int toVertex) {
  const int target = toVertex >= 0 ? toVertex : g.rankVertex(b);
  const bool allowNet = toVertex < 0 && g.machineOf(a) != g.machineOf(b);
  std::vector<double> bw;
  std::vector<int> via;
  widestFrom(g, a, cap, allowNet, target, bw, via);
  if (bw[static_cast<size_t>(target)] < 0) return {};
  return unwind(g, via, g.rankVertex(a), target);
}

std::vector<std::vector<int>> widestRoutesFrom(const PlanGraph& g, int a,
                                               const std::vector<double>& cap) {
  std::vector<std::vector<int>> routes(static_cast<size_t>(g.nranks()));
  std::vector<double> bw;
  std::vector<int> via;
  const auto search = [&](bool net, int) { widestFrom(g, a, cap, net, -1, bw, via); };
  bySearch(g, a, search, [&](int b) {
    const int v = g.rankVertex(b);
    if (bw[static_cast<size_t>(v)] >= 0)
      routes[static_cast<size_t>(b)] = unwind(g, via, g.rankVertex(a), v);
  });
  return routes;
}

PlanGraph subsetOfRanks(const PlanGraph& g, const std::vector<int>& ranks) {
  for (int r : ranks) checkRank(g, r, "subsetOfRanks");
  return PlanGraphBuilder::subset(g, ranks);
}

void addUse(const std::vector<std::vector<int>>& routes, double rate, std::vector<double>& load) {
  for (const std::vector<int>& r : routes)
    for (int li : r) load[static_cast<size_t>(li)] += rate;
}

double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace detail

namespace {
const std::vector<int>& routeOr(const std::vector<std::vector<int>>& routes, size_t i,
                                std::vector<int>& tmp, const PlanGraph& g, int a, int b) {
  if (i < routes.size() && !routes[i].empty()) return routes[i];
  tmp = g.widestRoute(a, b);
  return tmp;
}
}  // namespace

std::vector<double> linkLoad(const PlanGraph& g, const std::vector<Ring>& rings) {
  std::vector<double> load(g.links().size(), 0.0);
  std::vector<int> tmp;
  for (const Ring& ring : rings) {
    const size_t n = ring.order.size();
    if (n < 2) continue;
    for (size_t i = 0; i < n; ++i) {
      const std::vector<int>& r =
          routeOr(ring.routes, i, tmp, g, ring.order[i], ring.order[(i + 1) % n]);
      for (int li : r) load[static_cast<size_t>(li)] += ring.rate;
    }
  }
  return load;
}

namespace {

/// Load of trees at their rates over their down routes, their up routes,
/// or both.
std::vector<double> treeLoad(const PlanGraph& g, const std::vector<Tree>& trees, bool down,
                             bool up) {
  std::vector<double> load(g.links().size(), 0.0);
  std::vector<int> tmp;
  for (const Tree& t : trees) {
    for (size_t r = 0; r < t.parent.size(); ++r) {
      const int p = t.parent[r];
      const int rank = static_cast<int>(r);
      if (down && p >= 0)
        for (int li : routeOr(t.down, r, tmp, g, p, rank)) load[static_cast<size_t>(li)] += t.rate;
      const int q = t.upParentOf(rank);
      if (!up || q < 0) continue;
      for (int li : routeOr(t.up, r, tmp, g, rank, q)) load[static_cast<size_t>(li)] += t.rate;
    }
  }
  return load;
}

}  // namespace

std::vector<double> linkLoad(const PlanGraph& g, const std::vector<Tree>& trees,
                             bool bothDirections) {
  return treeLoad(g, trees, true, bothDirections);
}

std::vector<double> forestLoad(const PlanGraph& g, const std::vector<Tree>& trees, bool gather) {
  return treeLoad(g, trees, gather, !gather);
}

}  // namespace grove::plan

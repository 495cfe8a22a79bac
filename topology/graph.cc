#include "topology/graph.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <tuple>

#include "base/error.h"

namespace grove::topo {

std::string Node::attr(const std::string& key, const std::string& def) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? def : it->second;
}

namespace {
struct KindNames {
  NodeKind kind;
  const char* name;
};
constexpr KindNames kNodeKinds[] = {
    {NodeKind::kMachine, "machine"}, {NodeKind::kCpu, "cpu"},
    {NodeKind::kGpu, "gpu"},         {NodeKind::kPciSwitch, "pci_switch"},
    {NodeKind::kNic, "nic"},         {NodeKind::kNvSwitch, "nvswitch"},
    {NodeKind::kNet, "net"},
};
struct LinkNames {
  LinkKind kind;
  const char* name;
};
constexpr LinkNames kLinkKinds[] = {
    {LinkKind::kNvLink, "nvlink"},
    {LinkKind::kPcie, "pcie"},
    {LinkKind::kSmp, "smp"},
    {LinkKind::kNet, "net"},
};
}  // namespace

const char* kindName(NodeKind k) {
  for (const auto& e : kNodeKinds)
    if (e.kind == k) return e.name;
  return "?";
}

const char* kindName(LinkKind k) {
  for (const auto& e : kLinkKinds)
    if (e.kind == k) return e.name;
  return "?";
}

std::optional<NodeKind> parseNodeKind(const std::string& s) {
  for (const auto& e : kNodeKinds)
    if (s == e.name) return e.kind;
  if (s == "pci" || s == "pcie_switch" || s == "bridge") return NodeKind::kPciSwitch;
  if (s == "numa" || s == "socket") return NodeKind::kCpu;
  if (s == "host") return NodeKind::kMachine;
  return std::nullopt;
}

std::optional<LinkKind> parseLinkKind(const std::string& s) {
  for (const auto& e : kLinkKinds)
    if (s == e.name) return e.kind;
  if (s == "pci") return LinkKind::kPcie;
  if (s == "qpi" || s == "upi" || s == "xgmi" || s == "sys") return LinkKind::kSmp;
  if (s == "network") return LinkKind::kNet;
  return std::nullopt;
}

double nvlinkBwPerLink(int version) {
  // Per direction, per link: NVLink 1 = 20 GB/s, NVLink 2/3/4 = 25 GB/s.
  return version <= 1 ? 20.0 : 25.0;
}

double pcieBw(int gen, int width) {
  // Usable GB/s per lane after line encoding (8b/10b up to gen2, 128b/130b after).
  static const double kPerLane[] = {0.25, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  int g = std::clamp(gen, 1, 6);
  return kPerLane[g] * (width > 0 ? width : 16);
}

double defaultLatencyUs(LinkKind k) {
  switch (k) {
    case LinkKind::kNvLink: return 0.7;
    case LinkKind::kPcie: return 1.0;
    case LinkKind::kSmp: return 0.5;
    case LinkKind::kNet: return 5.0;
  }
  return 1.0;
}

NodeId Graph::addMachine(const std::string& hostName) {
  Node n;
  n.kind = NodeKind::kMachine;
  n.name = hostName;
  n.machine = static_cast<int>(nodes_.size());
  if (findMachine(hostName) >= 0)
    throwInvalidArgument("topology: two machines named '" + hostName + "'");
  nodes_.push_back(std::move(n));
  out_.emplace_back();
  return n.machine;
}

NodeId Graph::addNode(Node node) {
  if (node.kind == NodeKind::kMachine) return addMachine(node.name);
  if (node.kind == NodeKind::kNet) {
    node.machine = -1;
  } else if (node.machine < 0 || node.machine >= static_cast<int>(nodes_.size()) ||
             nodes_[node.machine].kind != NodeKind::kMachine) {
    throwInvalidArgument("topology: node '" + node.name + "' has no machine");
  }
  if (node.name.empty()) throwInvalidArgument("topology: a node has no name");
  if (find(node.machine, node.name) >= 0)
    throwInvalidArgument(
        "topology: two nodes named '" + node.name + "'" +
        (node.machine >= 0 ? " in machine '" + nodes_[node.machine].name + "'" : ""));
  nodes_.push_back(std::move(node));
  out_.emplace_back();
  return static_cast<NodeId>(nodes_.size() - 1);
}

int Graph::addLink(const Link& link) {
  int n = static_cast<int>(nodes_.size());
  if (link.from < 0 || link.from >= n || link.to < 0 || link.to >= n || link.from == link.to)
    throwInvalidArgument("topology: link between invalid nodes");
  if (!(link.bw > 0) || !std::isfinite(link.bw))
    throwInvalidArgument("topology: link " + qualifiedName(link.from) + " -> " +
                         qualifiedName(link.to) + " has no positive bandwidth");
  links_.push_back(link);
  out_[link.from].push_back(static_cast<int>(links_.size() - 1));
  return static_cast<int>(links_.size() - 1);
}

void Graph::addBidi(const Link& link) {
  addLink(link);
  Link back = link;
  std::swap(back.from, back.to);
  std::swap(back.srcAddr, back.dstAddr);
  addLink(back);
}

void Graph::removeNode(NodeId id) {
  if (id < 0 || id >= static_cast<NodeId>(nodes_.size())) return;
  std::vector<Link> kept;
  for (const Link& l : links_) {
    if (l.from == id || l.to == id) continue;
    Link c = l;
    if (c.from > id) --c.from;
    if (c.to > id) --c.to;
    kept.push_back(c);
  }
  links_ = std::move(kept);
  nodes_.erase(nodes_.begin() + id);
  for (Node& n : nodes_)
    if (n.machine > id) --n.machine;
  rebuildIndex();
}

void Graph::removeMachine(NodeId machine) {
  for (NodeId id = static_cast<NodeId>(nodes_.size()) - 1; id >= 0; --id)
    if (id != machine && nodes_[id].kind != NodeKind::kMachine && nodes_[id].machine == machine)
      removeNode(id);
  removeNode(machine);
}

int Graph::removeLinks(NodeId a, NodeId b, LinkKind kind) {
  size_t before = links_.size();
  std::erase_if(links_, [&](const Link& l) { return l.from == a && l.to == b && l.kind == kind; });
  rebuildIndex();
  return static_cast<int>(before - links_.size());
}

void Graph::rebuildIndex() {
  out_.assign(nodes_.size(), {});
  for (size_t i = 0; i < links_.size(); ++i) out_[links_[i].from].push_back(static_cast<int>(i));
}

int Graph::findLink(NodeId a, NodeId b, std::optional<LinkKind> kind) const {
  if (a < 0 || a >= static_cast<NodeId>(out_.size())) return -1;
  for (int li : out_[a])
    if (links_[li].to == b && (!kind || links_[li].kind == *kind)) return li;
  return -1;
}

NodeId Graph::find(int machine, const std::string& name) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.kind == NodeKind::kMachine) continue;
    if (n.machine == machine && n.name == name) return static_cast<NodeId>(i);
  }
  return -1;
}

NodeId Graph::findMachine(const std::string& host) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == NodeKind::kMachine && nodes_[i].name == host)
      return static_cast<NodeId>(i);
  return -1;
}

NodeId Graph::findQualified(const std::string& q) const {
  size_t slash = q.find('/');
  if (slash == std::string::npos) {
    NodeId net = find(-1, q);
    return net >= 0 ? net : findMachine(q);
  }
  NodeId m = findMachine(q.substr(0, slash));
  return m < 0 ? -1 : find(m, q.substr(slash + 1));
}

std::string Graph::qualifiedName(NodeId id) const {
  const Node& n = node(id);
  if (n.kind == NodeKind::kMachine || n.machine < 0) return n.name;
  return nodes_[n.machine].name + "/" + n.name;
}

std::vector<NodeId> Graph::nodesOfKind(NodeKind kind, int machine) const {
  std::vector<NodeId> ids;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == kind && (machine == -2 || nodes_[i].machine == machine))
      ids.push_back(static_cast<NodeId>(i));
  return ids;
}

NodeId Graph::appendMachine(const Graph& other, NodeId machine, const std::string& host) {
  NodeId m = addMachine(host);
  std::vector<NodeId> map(other.nodes_.size(), -1);
  map[machine] = m;
  for (size_t i = 0; i < other.nodes_.size(); ++i) {
    const Node& n = other.nodes_[i];
    if (n.kind == NodeKind::kMachine) continue;
    if (n.machine == machine) {
      Node c = n;
      c.machine = m;
      map[i] = addNode(std::move(c));
    }
  }
  for (const Link& l : other.links_) {
    bool fromIn = map[l.from] >= 0, toIn = map[l.to] >= 0;
    if (!fromIn && !toIn) continue;
    NodeId ends[2] = {l.from, l.to};
    bool ok = true;
    for (NodeId& e : ends) {
      if (map[e] >= 0) continue;
      const Node& far = other.nodes_[e];
      if (far.kind != NodeKind::kNet) {
        ok = false;
        break;
      }
      NodeId net = find(-1, far.name);
      if (net < 0) net = addNode(far);
      map[e] = net;
    }
    if (!ok) continue;
    Link c = l;
    c.from = map[l.from];
    c.to = map[l.to];
    addLink(c);
  }
  return m;
}

void Graph::append(const Graph& other) {
  for (NodeId m : other.machines()) appendMachine(other, m, other.node(m).name);
  for (NodeId n : other.nodesOfKind(NodeKind::kNet))
    if (find(-1, other.node(n).name) < 0) addNode(other.node(n));
}

namespace {
std::string describeNode(const Graph& g, const Node& n, NodeId id) {
  std::ostringstream os;
  os << kindName(n.kind) << ' ' << g.qualifiedName(id) << " index=" << n.index
     << " bus=" << n.busId;
  for (const auto& [k, v] : n.attrs) os << ' ' << k << '=' << v;
  return os.str();
}

std::string describeLink(const Graph& g, const Link& l) {
  std::ostringstream os;
  os << kindName(l.kind) << ' ' << g.qualifiedName(l.from) << "->" << g.qualifiedName(l.to)
     << " bw=" << l.bw << " lat=" << l.latencyUs << " count=" << l.count << " gen=" << l.pciGen
     << " width=" << l.pciWidth;
  if (!l.srcAddr.empty() || !l.dstAddr.empty()) os << " addr=" << l.srcAddr << "->" << l.dstAddr;
  return os.str();
}
}  // namespace

std::optional<std::string> canonicalIpAddress(const std::string& text) {
  unsigned char buf[sizeof(in6_addr)];
  char out[INET6_ADDRSTRLEN];
  for (int family : {AF_INET, AF_INET6})
    if (inet_pton(family, text.c_str(), buf) == 1 && inet_ntop(family, buf, out, sizeof(out)))
      return std::string(out);
  return std::nullopt;
}

bool Graph::hasLinkAddresses() const {
  for (const Link& l : links_)
    if (!l.srcAddr.empty() || !l.dstAddr.empty()) return true;
  return false;
}

bool Graph::sameAs(const Graph& other, std::string* why) const {
  auto nodeSet = [](const Graph& g) {
    std::multiset<std::string> s;
    for (size_t i = 0; i < g.nodes_.size(); ++i)
      s.insert(describeNode(g, g.nodes_[i], static_cast<NodeId>(i)));
    return s;
  };
  auto linkSet = [](const Graph& g) {
    std::multiset<std::string> s;
    for (const Link& l : g.links_) s.insert(describeLink(g, l));
    return s;
  };
  auto diff = [&](const std::multiset<std::string>& a, const std::multiset<std::string>& b) {
    for (const auto& x : a)
      if (!b.count(x)) {
        if (why) *why = "only in the first graph: " + x;
        return false;
      }
    for (const auto& x : b)
      if (!a.count(x)) {
        if (why) *why = "only in the second graph: " + x;
        return false;
      }
    return true;
  };
  return diff(nodeSet(*this), nodeSet(other)) && diff(linkSet(*this), linkSet(other));
}

}  // namespace grove::topo

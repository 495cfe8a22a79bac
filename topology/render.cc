#include "topology/render.h"

#include <cstdio>
#include <sstream>

#include "topology/paths.h"

namespace grove::topo {
namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

std::string cell(const Graph& g, NodeId a, NodeId b) {
  Path p = pathBetween(g, a, b);
  std::string s = pathTypeName(p.type);
  if (p.type == PathType::kNvLink || p.type == PathType::kNvSwitch) s += std::to_string(p.nvlinks);
  return s;
}

std::string nodeLine(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::ostringstream os;
  char head[64];
  std::snprintf(head, sizeof(head), "  %-10s %-10s", n.name.c_str(), kindName(n.kind));
  os << head;
  if (n.index >= 0) os << " index " << n.index;
  if (!n.busId.empty()) os << " bus " << n.busId;
  for (const auto& [k, v] : n.attrs)
    if (k != "cpus" && k != "affinity" && k != "p2p_peers") os << ' ' << k << '=' << v;
  return os.str();
}

// Pairs each link with its identical reverse; calls fn(link, bidirectional).
template <typename Fn>
void forEachLinkPair(const Graph& g, Fn&& fn) {
  const auto& all = g.links();
  std::vector<bool> used(all.size(), false);
  for (size_t i = 0; i < all.size(); ++i) {
    if (used[i]) continue;
    used[i] = true;
    const Link& l = all[i];
    bool bidi = false;
    for (int j : g.outLinks(l.to)) {
      const Link& r = all[j];
      if (!used[j] && r.to == l.from && r.kind == l.kind && r.bw == l.bw && r.count == l.count &&
          r.srcAddr == l.dstAddr && r.dstAddr == l.srcAddr) {
        used[j] = bidi = true;
        break;
      }
    }
    fn(l, bidi);
  }
}

}  // namespace

std::string linkLabel(const Link& l) {
  std::string s;
  switch (l.kind) {
    case LinkKind::kNvLink: s = "NVLink x" + std::to_string(l.count); break;
    case LinkKind::kPcie:
      s = "PCIe";
      if (l.pciGen) s += " " + std::to_string(l.pciGen);
      if (l.pciWidth) s += " x" + std::to_string(l.pciWidth);
      break;
    case LinkKind::kSmp: s = "SMP"; break;
    case LinkKind::kNet: s = "net " + fmt(l.bw * 8) + " Gb/s,"; break;
  }
  return s + " " + fmt(l.bw) + " GB/s";
}

std::string matrixText(const Graph& g, NodeId machine) {
  std::vector<NodeId> gpus = g.nodesOfKind(NodeKind::kGpu, machine);
  std::vector<NodeId> nics = g.nodesOfKind(NodeKind::kNic, machine);
  std::vector<NodeId> rows = gpus.empty() ? g.nodesOfKind(NodeKind::kCpu, machine) : gpus;
  std::vector<NodeId> cols = gpus;
  cols.insert(cols.end(), nics.begin(), nics.end());
  if (rows.empty() || cols.empty()) return "";
  std::ostringstream os;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%-8s", "");
  os << buf;
  for (NodeId c : cols) {
    std::snprintf(buf, sizeof(buf), "%-7s", g.node(c).name.c_str());
    os << buf;
  }
  os << (gpus.empty() ? "Closest NIC\n" : "CPU     Closest NIC\n");
  for (NodeId r : rows) {
    std::snprintf(buf, sizeof(buf), "%-8s", g.node(r).name.c_str());
    os << buf;
    for (NodeId c : cols) {
      std::snprintf(buf, sizeof(buf), "%-7s", cell(g, r, c).c_str());
      os << buf;
    }
    if (!gpus.empty()) {
      NodeId cpu = localCpu(g, r);
      std::snprintf(buf, sizeof(buf), "%-8s", cpu >= 0 ? g.node(cpu).name.c_str() : "-");
      os << buf;
    }
    NodeId nic = closestNic(g, r);
    os << (nic >= 0 ? g.node(nic).name : "-") << '\n';
  }
  os << "\nLegend: X = self, NV# = # bonded NVLinks, NVS# = through NVSwitch (# links),\n"
        "  PIX = at most one PCIe switch, PXB = several PCIe switches, PHB = through a CPU\n"
        "  host bridge, SYS = across the SMP interconnect between sockets.\n";
  return os.str();
}

std::string summaryText(const Graph& g) {
  std::ostringstream os;
  for (NodeId m : g.machines()) {
    os << "Machine " << g.node(m).name << ": " << g.nodesOfKind(NodeKind::kCpu, m).size()
       << " CPU node(s), " << g.nodesOfKind(NodeKind::kGpu, m).size() << " GPU(s), "
       << g.nodesOfKind(NodeKind::kNic, m).size() << " NIC(s), "
       << g.nodesOfKind(NodeKind::kPciSwitch, m).size() << " PCIe switch(es), "
       << g.nodesOfKind(NodeKind::kNvSwitch, m).size() << " NVSwitch(es)\n";
    os << "Nodes:\n";
    for (NodeId id = 0; id < static_cast<NodeId>(g.nodes().size()); ++id)
      if (g.node(id).machine == m && id != m) os << nodeLine(g, id) << '\n';
    os << "Links (GB/s per direction):\n";
    forEachLinkPair(g, [&](const Link& l, bool bidi) {
      int home = g.node(l.from).machine >= 0 ? g.node(l.from).machine : g.node(l.to).machine;
      if (home != m) return;
      char buf[160];
      std::snprintf(buf, sizeof(buf), "  %-10s %s %-10s %s, %s us", g.node(l.from).name.c_str(),
                    bidi ? "<->" : "-> ", g.node(l.to).name.c_str(), linkLabel(l).c_str(),
                    fmt(l.latencyUs).c_str());
      os << buf;
      if (!l.srcAddr.empty() || !l.dstAddr.empty())
        os << ", addr " << (l.srcAddr.empty() ? "-" : l.srcAddr) << (bidi ? " <-> " : " -> ")
           << (l.dstAddr.empty() ? "-" : l.dstAddr);
      os << '\n';
    });
    std::string matrix = matrixText(g, m);
    if (!matrix.empty()) os << "Paths:\n" << matrix;
    os << '\n';
  }
  for (NodeId net : g.nodesOfKind(NodeKind::kNet)) {
    int nics = 0;
    for (int li : g.outLinks(net)) nics += g.node(g.links()[li].to).kind == NodeKind::kNic;
    os << "Network " << g.node(net).name << ": " << nics << " NIC(s)\n";
  }
  return os.str();
}

namespace {

const char* dotShape(NodeKind k) {
  switch (k) {
    case NodeKind::kGpu: return "shape=box,style=filled,fillcolor=\"#b7e1a1\"";
    case NodeKind::kCpu: return "shape=box3d,style=filled,fillcolor=\"#a8c8f0\"";
    case NodeKind::kPciSwitch: return "shape=ellipse,style=filled,fillcolor=\"#eeeeee\"";
    case NodeKind::kNic: return "shape=hexagon,style=filled,fillcolor=\"#f6d186\"";
    case NodeKind::kNvSwitch: return "shape=octagon,style=filled,fillcolor=\"#7fc97f\"";
    case NodeKind::kNet: return "shape=doublecircle,style=filled,fillcolor=\"#fbb4ae\"";
    case NodeKind::kMachine: return "shape=plaintext";
  }
  return "";
}

const char* dotColor(LinkKind k) {
  switch (k) {
    case LinkKind::kNvLink: return "#2e8b57";
    case LinkKind::kPcie: return "#555555";
    case LinkKind::kSmp: return "#1f5fbf";
    case LinkKind::kNet: return "#d2691e";
  }
  return "black";
}

std::string dotId(NodeId id) { return "n" + std::to_string(id); }

std::string dotLabel(const Node& n) {
  std::string s = n.name;
  std::string model = n.attr("model");
  if (!model.empty()) s += "\\n" + model;
  if (n.kind == NodeKind::kNic && !n.attr("speed_gbps").empty())
    s += "\\n" + n.attr("speed_gbps") + " Gb/s";
  if (n.kind == NodeKind::kCpu && n.index >= 0) s += "\\nNUMA " + std::to_string(n.index);
  return s;
}

}  // namespace

std::string toDot(const Graph& g) {
  std::ostringstream os;
  os << "digraph grove_topology {\n  rankdir=TB;\n  node [fontname=\"Helvetica\",fontsize=10];\n"
        "  edge [fontname=\"Helvetica\",fontsize=8];\n";
  for (NodeId m : g.machines()) {
    os << "  subgraph cluster_" << m << " {\n    label=\"" << g.node(m).name
       << "\";\n    style=rounded;\n    color=\"#888888\";\n";
    for (NodeId id = 0; id < static_cast<NodeId>(g.nodes().size()); ++id)
      if (g.node(id).machine == m && id != m)
        os << "    " << dotId(id) << " [label=\"" << dotLabel(g.node(id)) << "\","
           << dotShape(g.node(id).kind) << "];\n";
    os << "  }\n";
  }
  for (NodeId net : g.nodesOfKind(NodeKind::kNet))
    os << "  " << dotId(net) << " [label=\"" << g.node(net).name << "\","
       << dotShape(NodeKind::kNet) << "];\n";
  forEachLinkPair(g, [&](const Link& l, bool bidi) {
    double width = l.bw >= 100 ? 3.5 : l.bw >= 40 ? 2.5 : l.bw >= 20 ? 1.8 : 1.0;
    os << "  " << dotId(l.from) << " -> " << dotId(l.to) << " [label=\"" << linkLabel(l)
       << "\",color=\"" << dotColor(l.kind) << "\",fontcolor=\"" << dotColor(l.kind)
       << "\",penwidth=" << width << (bidi ? ",dir=both" : "") << "];\n";
  });
  os << "}\n";
  return os.str();
}

}  // namespace grove::topo

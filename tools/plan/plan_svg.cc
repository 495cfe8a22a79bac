// grove-plan --svg: a standalone SVG of the topology and the planned trees.
//
// How it works: each machine is a box; its GPUs sit on a circle, every other
// node of the machine (CPUs, PCIe switches, NICs, NVSwitches) on a smaller
// circle inside it, networks in a row below the machines. Physical links are
// thin grey lines (one per node pair). Each tree's edges parent -> child are
// arrows between the ranks' nodes in the tree's colour, as wide as the
// tree's rate allows (the fastest tree 6 px), shifted sideways per tree so
// parallel edges of several trees stay visible.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "tools/plan/plan_report.h"

namespace grove::tools {

namespace {

constexpr double kBox = 420;  // machine box side
constexpr double kGap = 40;   // between boxes
constexpr double kMargin = 30;
constexpr double kNetRow = 80;  // height of the network row
constexpr const char* kColours[] = {"#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4",
                                    "#42d4f4", "#f032e6", "#9a6324", "#808000", "#000075"};

struct Pt {
  double x = 0, y = 0;
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

std::map<topo::NodeId, Pt> layout(const topo::Graph& g, double* width, double* height) {
  std::map<topo::NodeId, Pt> at;
  const std::vector<topo::NodeId> machines = g.machines();
  for (size_t m = 0; m < machines.size(); ++m) {
    const Pt c{kMargin + kBox / 2 + static_cast<double>(m) * (kBox + kGap), kMargin + kBox / 2};
    std::vector<topo::NodeId> gpus = g.nodesOfKind(topo::NodeKind::kGpu, machines[m]), others;
    for (topo::NodeId id = 0; id < static_cast<int>(g.nodes().size()); ++id) {
      const topo::Node& n = g.node(id);
      if (n.machine == machines[m] && n.kind != topo::NodeKind::kGpu &&
          n.kind != topo::NodeKind::kMachine)
        others.push_back(id);
    }
    auto ring = [&](const std::vector<topo::NodeId>& ids, double radius, double phase) {
      for (size_t i = 0; i < ids.size(); ++i) {
        const double a =
            phase + 2 * M_PI * static_cast<double>(i) / static_cast<double>(ids.size());
        at[ids[i]] = Pt{c.x + radius * std::cos(a), c.y + radius * std::sin(a)};
      }
    };
    ring(gpus, kBox * 0.40, -M_PI / 2);
    ring(others, others.size() > 1 ? kBox * 0.18 : 0, -M_PI / 2 + 0.3);
  }
  const std::vector<topo::NodeId> nets = g.nodesOfKind(topo::NodeKind::kNet);
  const double total = kMargin * 2 +
                       std::max<double>(1, static_cast<double>(machines.size())) * (kBox + kGap) -
                       kGap;
  for (size_t i = 0; i < nets.size(); ++i)
    at[nets[i]] = Pt{total * static_cast<double>(i + 1) / static_cast<double>(nets.size() + 1),
                     kMargin + kBox + kNetRow / 2};
  *width = total;
  *height = kMargin * 2 + kBox + (nets.empty() ? 0 : kNetRow);
  return at;
}

const char* fillOf(topo::NodeKind k) {
  switch (k) {
    case topo::NodeKind::kGpu: return "#cfe8cf";
    case topo::NodeKind::kCpu: return "#cfdcf5";
    case topo::NodeKind::kNic: return "#f5e3c4";
    case topo::NodeKind::kNvSwitch: return "#e8d0f0";
    case topo::NodeKind::kNet: return "#eeeeee";
    default: return "#ffffff";
  }
}

}  // namespace

std::string reportSvg(const PlanReport& r, const topo::CommTopology& topology) {
  const topo::Graph& g = topology.graph;
  double width = 0, height = 0;
  const std::map<topo::NodeId, Pt> at = layout(g, &width, &height);
  std::string out =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"" +
      num(width) + "\" height=\"" + num(height + 40) + "\" viewBox=\"0 0 " + num(width) + " " +
      num(height + 40) + "\" font-family=\"sans-serif\" font-size=\"11\">\n<defs>\n";
  for (size_t t = 0; t < std::size(kColours); ++t)
    out += std::string("  <marker id=\"arrow") + std::to_string(t) +
           "\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"4\" markerHeight=\"4\" "
           "orient=\"auto\">"
           "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"" +
           kColours[t] + "\"/></marker>\n";
  out += "</defs>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const std::vector<topo::NodeId> machines = g.machines();
  for (size_t m = 0; m < machines.size(); ++m)
    out += "<rect x=\"" + num(kMargin / 2 + static_cast<double>(m) * (kBox + kGap)) + "\" y=\"" +
           num(kMargin / 2) + "\" width=\"" + num(kBox + kMargin / 2) + "\" height=\"" +
           num(kBox + kMargin / 2) + "\" fill=\"none\" stroke=\"#999\" rx=\"8\"/>\n<text x=\"" +
           num(kMargin + static_cast<double>(m) * (kBox + kGap)) + "\" y=\"" + num(kMargin) +
           "\">" + escape(g.node(machines[m]).name) + "</text>\n";
  std::set<std::pair<int, int>> drawn;
  for (const topo::Link& l : g.links()) {
    if (!at.count(l.from) || !at.count(l.to)) continue;
    if (!drawn.insert({std::min(l.from, l.to), std::max(l.from, l.to)}).second) continue;
    const Pt a = at.at(l.from), b = at.at(l.to);
    out += "<line x1=\"" + num(a.x) + "\" y1=\"" + num(a.y) + "\" x2=\"" + num(b.x) + "\" y2=\"" +
           num(b.y) + "\" stroke=\"#c8c8c8\" stroke-width=\"1\"/>\n";
  }
  double maxRate = 0;
  for (const plan::Tree& t : r.trees.trees) maxRate = std::max(maxRate, t.rate);
  const int nt = static_cast<int>(r.trees.trees.size());
  for (int t = 0; t < nt; ++t) {
    const plan::Tree& tree = r.trees.trees[t];
    const size_t colour = static_cast<size_t>(t) % std::size(kColours);
    const double w = maxRate > 0 ? std::max(1.0, 6 * tree.rate / maxRate) : 2;
    const double shift = (t - (nt - 1) / 2.0) * 4;
    for (size_t v = 0; v < tree.parent.size(); ++v) {
      if (tree.parent[v] < 0) continue;
      Pt a = at.at(topology.ranks[tree.parent[v]].node), b = at.at(topology.ranks[v].node);
      const double dx = b.x - a.x, dy = b.y - a.y, len = std::max(1.0, std::hypot(dx, dy));
      const double ox = -dy / len * shift, oy = dx / len * shift, back = std::min(18.0, len / 3);
      out += "<line x1=\"" + num(a.x + ox) + "\" y1=\"" + num(a.y + oy) + "\" x2=\"" +
             num(b.x + ox - dx / len * back) + "\" y2=\"" + num(b.y + oy - dy / len * back) +
             "\" stroke=\"" + kColours[colour] + "\" stroke-width=\"" + num(w) +
             "\" stroke-opacity=\"0.8\" marker-end=\"url(#arrow" + std::to_string(colour) +
             ")\"/>\n";
    }
  }
  for (const auto& [id, p] : at) {
    const topo::Node& n = g.node(id);
    std::string label = n.name;
    for (size_t rk = 0; rk < topology.ranks.size(); ++rk)
      if (topology.ranks[rk].node == id) label += " r" + std::to_string(rk);
    out += "<circle cx=\"" + num(p.x) + "\" cy=\"" + num(p.y) + "\" r=\"14\" fill=\"" +
           fillOf(n.kind) + "\" stroke=\"#555\"/>\n<text x=\"" + num(p.x) + "\" y=\"" +
           num(p.y + 26) + "\" text-anchor=\"middle\">" + escape(label) + "</text>\n";
  }
  std::string legend = std::string(plan::collName(r.request.coll)) + " trees: ";
  for (int t = 0; t < nt; ++t) {
    legend += std::string(t ? ", " : "") + "#" + std::to_string(t) + " root " +
              std::to_string(r.trees.trees[t].root) + " " + rateText(r.trees.trees[t].rate) +
              " GB/s";
  }
  out += "<text x=\"" + num(kMargin) + "\" y=\"" + num(height + 20) + "\">" + escape(legend) +
         "</text>\n</svg>\n";
  return out;
}

}  // namespace grove::tools

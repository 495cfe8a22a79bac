// grove-plan's text and JSON renderings of a planning run.
#include <cstdio>
#include <string>
#include <tuple>

#include "tools/plan/plan_report.h"
#include "topology/json.h"

namespace grove::tools {

namespace json = topo::json;

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s;
}

std::string padLeft(std::string s, size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

std::string linkName(const plan::PlanGraph& g, int l) {
  const plan::PlanLink& k = g.links()[l];
  return g.vertexName(k.from) + " -> " + g.vertexName(k.to);
}

/// Links worth showing: physical ones, and rank ports that other ranks share.
bool shownLink(const plan::PlanGraph& g, int l) {
  const plan::PlanLink& k = g.links()[l];
  return k.topoLink >= 0 || k.cap < plan::PlanGraph::kUnbounded;
}

/// The algorithms the size table predicted somewhere.
std::vector<int> tunedAlgos(const PlanReport& r) {
  std::vector<int> out;
  for (int a = 0; a < plan::kNumAlgos; ++a)
    for (const plan::TuneRow& row : r.bySize)
      if (row.seconds[a] >= 0) {
        out.push_back(a);
        break;
      }
  return out;
}

/// The cost model's choice per size: each algorithm's predicted algbw at
/// every size of the ladder, the chosen one marked.
std::string bySizeText(const PlanReport& r) {
  if (r.bySize.empty()) return "";
  const std::vector<int> algos = tunedAlgos(r);
  std::string out = "\nchosen by size (predicted algbw GB/s; * = what the communicator runs";
  if (r.eagerMaxBytes > 0)
    out += "; up to " + bytesText(r.eagerMaxBytes) +
           " it runs direct's messages eagerly over slot links";
  out += "):\n  " + pad("size", 10);
  for (int a : algos) out += pad(plan::algoName(static_cast<plan::Algo>(a)), 11);
  out += "\n";
  for (const plan::TuneRow& row : r.bySize) {
    out += "  " + pad(bytesText(row.bytes), 10);
    const bool eager = row.bytes <= r.eagerMaxBytes;
    for (int a : algos) {
      const double t = row.seconds[a];
      const bool chosen =
          eager ? a == static_cast<int>(plan::Algo::kDirect) : static_cast<int>(row.winner) == a;
      out += pad(
          t < 0 ? "-" : rateText(static_cast<double>(row.bytes) / t / 1e9, 2) + (chosen ? "*" : ""),
          11);
    }
    out += "\n";
  }
  return out;
}

const AlgoPrediction* selected(const PlanReport& r) {
  for (const AlgoPrediction& p : r.predictions)
    if (p.name == "selected" && p.ok) return &p;
  return nullptr;
}

std::string ringsText(const char* title, const plan::RingPlan& rp) {
  std::string out = std::string(title) + ": " + std::to_string(rp.rings.size()) + " ring(s), " +
                    rateText(rp.rate) + " GB/s over " +
                    (rp.linkClass.empty() ? "-" : rp.linkClass) + fmt(", %.2f ms\n", rp.planMs);
  for (size_t i = 0; i < rp.rings.size(); ++i) {
    out +=
        "  ring " + std::to_string(i) + "  " + padLeft(rateText(rp.rings[i].rate), 6) + " GB/s  ";
    for (int v : rp.rings[i].order) out += std::to_string(v) + " ";
    out += "\n";
  }
  return out;
}

/// One line per tree: root, rate, weight, edges.
std::string treeLines(const std::vector<plan::Tree>& trees, double total) {
  std::string out;
  for (size_t i = 0; i < trees.size(); ++i) {
    const plan::Tree& t = trees[i];
    out += "  tree " + std::to_string(i) + "  root " + std::to_string(t.root) + "  " +
           padLeft(rateText(t.rate), 6) + " GB/s" +
           fmt(" (weight %.3f, ", total > 0 ? t.rate / total : 0) + std::to_string(t.channels) +
           " channels)  edges";
    for (size_t v = 0; v < t.parent.size(); ++v)
      if (t.parent[v] >= 0) out += " " + std::to_string(t.parent[v]) + "->" + std::to_string(v);
    if (!t.upParent.empty()) {  // a tree pair: the reduce tree differs
      out += "  reduce";
      for (size_t v = 0; v < t.upParent.size(); ++v)
        if (t.upParent[v] >= 0)
          out += " " + std::to_string(v) + "->" + std::to_string(t.upParent[v]);
    }
    out += "\n";
  }
  return out;
}

std::string treesText(const PlanReport& r) {
  const plan::TreePlan& tp = r.trees;
  const plan::Coll coll = r.request.coll;
  if (coll == plan::Coll::kGather || coll == plan::Coll::kScatter || coll == plan::Coll::kAlltoAll)
    return "";  // no plans: one direct algorithm
  if (coll == plan::Coll::kAllGather || coll == plan::Coll::kReduceScatter) {
    // A forest: rates are GB/s of each tree's root's block; the plan's the call's algbw.
    double sum = 0;
    for (const plan::Tree& t : tp.trees) sum += t.rate;
    std::string out =
        std::string(coll == plan::Coll::kAllGather ? "all-gather" : "reduce-scatter") +
        " forest: " + std::to_string(tp.trees.size()) + " tree(s) rooted at every rank, " +
        rateText(tp.rate) + " GB/s algbw (as packed " + rateText(tp.packedRate) + ") of bound " +
        rateText(tp.bound) + " GB/s" +
        (tp.optimum > 0 ? " (LP optimum " + rateText(tp.optimum) + ", "
                        : std::string(" (LP optimum not proved, ")) +
        std::to_string(tp.pricingRounds) + " pricing rounds, " + std::to_string(tp.mwuTrees) +
        " columns)" + (tp.split ? ", split: NVLink trees, then trees over the other links" : "") +
        fmt(", %.2f ms\n", tp.planMs);
    return out + treeLines(tp.trees, sum);
  }
  std::string out = std::string(coll == plan::Coll::kAllReduce ? "all-reduce" : "rooted") +
                    " trees: " + std::to_string(tp.trees.size()) + " tree(s), " +
                    rateText(tp.rate) + " GB/s of bound " + rateText(tp.bound) + " GB/s" +
                    (tp.optimum > 0 ? " (LP optimum " + rateText(tp.optimum) + ", "
                                    : std::string(" (LP optimum not proved, ")) +
                    std::to_string(tp.pricingRounds) + " pricing rounds), " +
                    (tp.judged > 0 ? "number chosen by the cost model of " +
                                         std::to_string(tp.judged) + " candidates, "
                                   : std::string()) +
                    std::to_string(tp.rounds) + " MWU rounds, " + std::to_string(tp.mwuTrees) +
                    " MWU trees" + fmt(", %.2f ms\n", tp.planMs);
  out += treeLines(tp.trees, tp.rate);
  for (const plan::SizedTrees& s : tp.larger)
    out += "  from " + bytesText(s.fromBytes) + ": " + std::to_string(s.trees.size()) +
           " tree(s), " + rateText(s.rate) + " GB/s\n" + treeLines(s.trees, s.rate);
  return out;
}

std::string hierText(const PlanReport& r) {
  if (!r.hasHier) return "";
  std::string out = "hierarchical: " + std::to_string(r.hier.machines.size()) + " machine(s), " +
                    std::to_string(r.hier.leaders.size()) + " channel(s), " +
                    rateText(r.hier.rate) + " GB/s\n";
  for (size_t c = 0; c < r.hier.leaders.size(); ++c) {
    out += "  channel " + std::to_string(c) + " leaders";
    for (int l : r.hier.leaders[c]) out += " " + std::to_string(l);
    out += "\n";
  }
  return out;
}

std::string linksText(const PlanReport& r, const plan::PlanGraph& g) {
  const AlgoPrediction* sel = selected(r);
  std::string out =
      "link utilisation (planned load / capacity; 'sim': busy share of the selected run):\n  " +
      pad("link", 40) + pad("kind", 8) + pad("GB/s", 9) + pad("rings", 8) + pad("trees", 8) +
      "sim\n";
  for (int l = 0; l < static_cast<int>(g.links().size()); ++l) {
    const double rl = l < static_cast<int>(r.ringLoad.size()) ? r.ringLoad[l] : 0;
    const double tl = l < static_cast<int>(r.treeLoad.size()) ? r.treeLoad[l] : 0;
    const double sb = sel != nullptr ? sel->linkBytes[l] : 0;
    if (!shownLink(g, l) || (rl <= 0 && tl <= 0 && sb <= 0)) continue;
    const plan::PlanLink& k = g.links()[l];
    const double sim = sel != nullptr ? sb / (k.cap * 1e9 * sel->seconds) : 0;
    out += "  " + pad(linkName(g, l), 40) + pad(topo::kindName(k.kind), 8) +
           pad(rateText(k.cap), 9) + pad(fmt("%.0f%%", 100 * rl / k.cap), 8) +
           pad(fmt("%.0f%%", 100 * tl / k.cap), 8) + fmt("%.0f%%", 100 * sim) + "\n";
  }
  return out;
}

json::Value ringsJson(const plan::RingPlan& rp) {
  json::Value o = json::Value::makeObject();
  o.set("rate", json::Value::makeNumber(rp.rate));
  o.set("link_class", json::Value::makeString(rp.linkClass));
  o.set("plan_ms", json::Value::makeNumber(rp.planMs));
  json::Value list = json::Value::makeArray();
  for (const plan::Ring& ring : rp.rings) {
    json::Value x = json::Value::makeObject(), order = json::Value::makeArray();
    for (int v : ring.order) order.push(json::Value::makeNumber(v));
    x.set("order", order);
    x.set("rate", json::Value::makeNumber(ring.rate));
    list.push(x);
  }
  o.set("rings", list);
  return o;
}

/// A set of trees as JSON: root, parent, reduce_parent, rate, weight, channels.
json::Value treeListJson(const std::vector<plan::Tree>& trees, double total) {
  json::Value list = json::Value::makeArray();
  for (const plan::Tree& t : trees) {
    json::Value x = json::Value::makeObject(), parent = json::Value::makeArray();
    for (int p : t.parent) parent.push(json::Value::makeNumber(p));
    x.set("root", json::Value::makeNumber(t.root));
    x.set("parent", parent);
    if (!t.upParent.empty()) {
      json::Value up = json::Value::makeArray();
      for (int p : t.upParent) up.push(json::Value::makeNumber(p));
      x.set("reduce_parent", up);
    }
    x.set("rate", json::Value::makeNumber(t.rate));
    x.set("weight", json::Value::makeNumber(total > 0 ? t.rate / total : 0));
    x.set("channels", json::Value::makeNumber(t.channels));
    list.push(x);
  }
  return list;
}

json::Value treesJson(const plan::TreePlan& tp) {
  json::Value o = json::Value::makeObject();
  o.set("rate", json::Value::makeNumber(tp.rate));
  o.set("packed_rate", json::Value::makeNumber(tp.packedRate));
  o.set("bound", json::Value::makeNumber(tp.bound));
  o.set("optimum", json::Value::makeNumber(tp.optimum));
  o.set("pricing_rounds", json::Value::makeNumber(tp.pricingRounds));
  o.set("rounds", json::Value::makeNumber(tp.rounds));
  o.set("mwu_trees", json::Value::makeNumber(tp.mwuTrees));
  o.set("plan_ms", json::Value::makeNumber(tp.planMs));
  o.set("trees", treeListJson(tp.trees, tp.rate));
  json::Value larger = json::Value::makeArray();
  for (const plan::SizedTrees& s : tp.larger) {
    json::Value x = json::Value::makeObject();
    x.set("from_bytes", json::Value::makeNumber(static_cast<double>(s.fromBytes)));
    x.set("rate", json::Value::makeNumber(s.rate));
    x.set("trees", treeListJson(s.trees, s.rate));
    larger.push(x);
  }
  o.set("larger", larger);
  return o;
}

json::Value predictionJson(const AlgoPrediction& p) {
  json::Value x = json::Value::makeObject();
  x.set("algorithm", json::Value::makeString(p.name));
  if (!p.detail.empty()) x.set("picks", json::Value::makeString(p.detail));
  x.set("ok", json::Value::makeBool(p.ok));
  if (p.ok) {
    x.set("seconds", json::Value::makeNumber(p.seconds));
    x.set("algbw", json::Value::makeNumber(p.algbw));
    x.set("busbw", json::Value::makeNumber(p.busbw));
    x.set("critical_rank", json::Value::makeNumber(p.criticalRank));
  } else {
    x.set("why", json::Value::makeString(p.why));
  }
  return x;
}

}  // namespace

std::string reportText(const PlanReport& r, const plan::PlanGraph& g) {
  std::string out =
      std::string(plan::collName(r.request.coll)) + " of " + bytesText(r.request.bytes) + " over " +
      std::to_string(r.nranks) + " rank(s) on " + std::to_string(r.machines) + " machine(s)" +
      (r.request.coll == plan::Coll::kBroadcast || r.request.coll == plan::Coll::kReduce ||
               r.request.coll == plan::Coll::kGather || r.request.coll == plan::Coll::kScatter
           ? ", root " + std::to_string(r.request.root)
           : "") +
      ", " + r.transport + " links" + "\nranks:";
  for (size_t i = 0; i < r.rankNodes.size(); ++i)
    out += " " + std::to_string(i) + "=" + r.rankNodes[i];
  out += fmt("\nplanning time: %.2f ms", r.planMs);
  if (r.planFromCache) out += " (from the plan cache directory)";
  if (r.replanMs >= 0)
    out += fmt("; a second communicator of this topology: %.2f ms (plan cache)", r.replanMs);
  if (r.forestMs >= 0)
    out += "\nforests for the all-reduce over forests (planned when it runs): " +
           fmt("%.2f ms", r.forestMs);
  out += "\n\n";
  out += ringsText("best rings", r.rings) + ringsText("NCCL-like rings", r.ncclRings) +
         treesText(r) + hierText(r) + "\n" + linksText(r, g) + "\npredicted (" +
         bytesText(r.request.bytes) + "):\n  " + pad("algorithm", 18) + pad("algbw GB/s", 12) +
         pad("busbw GB/s", 12) + "time ms\n";
  for (const AlgoPrediction& p : r.predictions) {
    const std::string name = p.detail.empty() ? p.name : p.name + " (" + p.detail + ")";
    if (!p.ok) {
      out += "  " + pad(name, 18) + "cannot run: " + p.why + "\n";
      continue;
    }
    out += "  " + pad(name, 18) + pad(rateText(p.algbw, 2), 12) + pad(rateText(p.busbw, 2), 12) +
           fmt("%.3f", p.seconds * 1e3) + "\n";
  }
  if (r.boundAlgbw > 0) {
    out += "  " + pad("upper bound", 18) + pad(rateText(r.boundAlgbw, 2), 12) +
           rateText(r.boundBusbw, 2) + "\n";
    out += "  proof: " + r.boundProof + "\n";
  }
  for (const auto& [name, b, dir] : {std::make_tuple("all-gather", &r.allGather, "into"),
                                     std::make_tuple("reduce-scatter", &r.reduceScatter, "out of")})
    out += std::string("  ") + name + " optimum " + rateText(b->rate, 2) +
           " GB/s algbw: " + rateText(b->crossing, 2) + " GB/s " + dir + " ranks " +
           rankSet(b->inside) + "\n";
  return out + bySizeText(r);
}

std::string reportJson(const PlanReport& r, const plan::PlanGraph& g) {
  json::Value o = json::Value::makeObject();
  o.set("collective", json::Value::makeString(plan::collName(r.request.coll)));
  o.set("bytes", json::Value::makeNumber(static_cast<double>(r.request.bytes)));
  o.set("root", json::Value::makeNumber(r.request.root));
  o.set("nranks", json::Value::makeNumber(r.nranks));
  o.set("machines", json::Value::makeNumber(r.machines));
  o.set("transport", json::Value::makeString(r.transport));
  json::Value ranks = json::Value::makeArray();
  for (const std::string& n : r.rankNodes) ranks.push(json::Value::makeString(n));
  o.set("ranks", ranks);
  o.set("plan_ms", json::Value::makeNumber(r.planMs));
  o.set("plan_from_cache", json::Value::makeBool(r.planFromCache));
  if (r.replanMs >= 0) o.set("replan_ms", json::Value::makeNumber(r.replanMs));
  if (r.forestMs >= 0) o.set("forest_ms", json::Value::makeNumber(r.forestMs));
  o.set("rings", ringsJson(r.rings));
  o.set("nccl_rings", ringsJson(r.ncclRings));
  o.set("trees", treesJson(r.trees));
  if (r.hasHier) {
    json::Value h = json::Value::makeObject(), leaders = json::Value::makeArray();
    h.set("rate", json::Value::makeNumber(r.hier.rate));
    for (const auto& ch : r.hier.leaders) {
      json::Value l = json::Value::makeArray();
      for (int v : ch) l.push(json::Value::makeNumber(v));
      leaders.push(l);
    }
    h.set("leaders", leaders);
    o.set("hier", h);
  }
  const AlgoPrediction* sel = selected(r);
  json::Value links = json::Value::makeArray();
  for (int l = 0; l < static_cast<int>(g.links().size()); ++l) {
    const double rl = r.ringLoad.at(l), tl = r.treeLoad.at(l);
    const double sim =
        sel != nullptr ? sel->linkBytes[l] / (g.links()[l].cap * 1e9 * sel->seconds) : 0;
    if (!shownLink(g, l) || (rl <= 0 && tl <= 0 && sim <= 0)) continue;
    json::Value x = json::Value::makeObject();
    x.set("from", json::Value::makeString(g.vertexName(g.links()[l].from)));
    x.set("to", json::Value::makeString(g.vertexName(g.links()[l].to)));
    x.set("kind", json::Value::makeString(topo::kindName(g.links()[l].kind)));
    x.set("cap", json::Value::makeNumber(g.links()[l].cap));
    x.set("ring_load", json::Value::makeNumber(rl));
    x.set("tree_load", json::Value::makeNumber(tl));
    x.set("sim_util", json::Value::makeNumber(sim));
    links.push(x);
  }
  o.set("links", links);
  json::Value preds = json::Value::makeArray();
  for (const AlgoPrediction& p : r.predictions) preds.push(predictionJson(p));
  o.set("predictions", preds);
  json::Value sizes = json::Value::makeArray();
  for (const plan::TuneRow& row : r.bySize) {
    json::Value e = json::Value::makeObject(), algbw = json::Value::makeObject();
    e.set("bytes", json::Value::makeNumber(static_cast<double>(row.bytes)));
    for (int a : tunedAlgos(r))
      if (row.seconds[a] > 0)
        algbw.set(plan::algoName(static_cast<plan::Algo>(a)),
                  json::Value::makeNumber(static_cast<double>(row.bytes) / row.seconds[a] / 1e9));
    e.set("algbw", algbw);
    const bool eager = row.bytes <= r.eagerMaxBytes;
    e.set("chosen", json::Value::makeString(eager ? "direct" : plan::algoName(row.winner)));
    e.set("eager", json::Value::makeBool(eager));
    sizes.push(e);
  }
  o.set("by_size", sizes);
  json::Value bound = json::Value::makeObject();
  bound.set("algbw", json::Value::makeNumber(r.boundAlgbw));
  bound.set("busbw", json::Value::makeNumber(r.boundBusbw));
  bound.set("proof", json::Value::makeString(r.boundProof));
  for (const auto& [key, b] : {std::make_pair("allgather", &r.allGather),
                               std::make_pair("reducescatter", &r.reduceScatter)}) {
    json::Value cut = json::Value::makeObject();
    cut.set("algbw", json::Value::makeNumber(b->rate));
    cut.set("crossing", json::Value::makeNumber(b->crossing));
    json::Value inside = json::Value::makeArray();
    for (int rank : b->inside) inside.push(json::Value::makeNumber(rank));
    cut.set("inside", inside);
    bound.set(key, cut);
  }
  o.set("bound", bound);
  return json::write(o) + "\n";
}

}  // namespace grove::tools

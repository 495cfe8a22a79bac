// grove-plan --survey: the results table of docs/planning.md.
//
// How it works: for the DGX-1 fixtures (P100, V100) every subset of 3..8
// GPUs is reduced to its class -- subsets whose induced NVLink graphs are
// isomorphic, edges weighted by their bonded link counts, plan alike -- by a
// canonical form (the smallest adjacency matrix over all orderings of the
// subset); each class is planned once, on its smallest subset. The other
// fixtures (DGX-2, DGX A100, the PCIe-only box, the two-machine cluster) are
// planned on all their GPUs. Each row predicts all-reduce and broadcast
// (root 0) with the cost model: NCCL-like rings against grove's best plan
// (the fastest of its rings, trees and, across machines, hierarchical), the
// upper bound, and the planning time of every plan of the row.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "tools/plan/plan_report.h"
#include "topology/topo_file.h"

namespace grove::tools {

namespace {

/// NVLink count between every pair of GPUs, by CUDA index.
std::vector<std::vector<int>> nvlinkCounts(const topo::Graph& g, std::vector<int>* indices) {
  std::map<topo::NodeId, int> pos;
  for (topo::NodeId id : g.nodesOfKind(topo::NodeKind::kGpu)) {
    pos[id] = static_cast<int>(indices->size());
    indices->push_back(g.node(id).index);
  }
  std::vector<std::vector<int>> w(indices->size(), std::vector<int>(indices->size(), 0));
  for (const topo::Link& l : g.links())
    if (l.kind == topo::LinkKind::kNvLink && pos.count(l.from) && pos.count(l.to))
      w[pos[l.from]][pos[l.to]] += l.count;
  return w;
}

/// Canonical form of the weighted graph induced by `subset` (positions).
std::vector<int> canonical(const std::vector<std::vector<int>>& w, std::vector<int> subset) {
  std::sort(subset.begin(), subset.end());
  std::vector<int> best;
  do {
    std::vector<int> m;
    m.reserve(subset.size() * subset.size());
    for (int a : subset)
      for (int b : subset) m.push_back(w[a][b]);
    if (best.empty() || m < best) best = std::move(m);
  } while (std::next_permutation(subset.begin(), subset.end()));
  return best;
}

struct Best {
  std::string name;
  double busbw = 0;
  double nccl = 0;
  double bound = 0;
  double planMs = 0;
};

Best predictRow(const topo::CommTopology& t, plan::TopoPlans& plans, plan::Coll coll,
                uint64_t bytes) {
  PlanRequest req;
  req.storePlans = false;  // the planning column times planning itself
  req.coll = coll;
  req.bytes = bytes;
  req.select = false;
  const PlanReport r = makeReport(t, plans, req);
  Best b;
  b.bound = r.boundBusbw;
  b.planMs = r.planMs;
  for (const AlgoPrediction& p : r.predictions) {
    if (!p.ok) continue;
    if (p.name == "nccl-rings")
      b.nccl = p.busbw;
    else if (p.busbw > b.busbw)
      b.busbw = p.busbw, b.name = p.name;
  }
  return b;
}

std::string cell(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::vector<SurveyRow> dgx1Rows(const std::string& dir, const std::string& name) {
  const topo::Graph g = topo::loadTopologyFile(dir + "/" + name + ".json");
  std::vector<int> indices;
  const std::vector<std::vector<int>> w = nvlinkCounts(g, &indices);
  const int n = static_cast<int>(indices.size());
  std::vector<SurveyRow> rows;
  for (int k = 3; k <= std::min(n, 8); ++k) {
    std::map<std::vector<int>, size_t> classes;
    std::vector<bool> pick(static_cast<size_t>(n), false);
    std::fill(pick.begin(), pick.begin() + k, true);
    do {  // subsets in lexicographic order, so each class keeps its smallest
      std::vector<int> subset, cuda;
      for (int i = 0; i < n; ++i)
        if (pick[i]) subset.push_back(i), cuda.push_back(indices[i]);
      auto [it, added] = classes.try_emplace(canonical(w, subset), rows.size());
      if (!added) {
        ++rows[it->second].classSize;
        continue;
      }
      SurveyRow row;
      row.machine = name;
      for (int c : cuda) row.gpus += (row.gpus.empty() ? "" : ",") + std::to_string(c);
      row.topology = placeOnGpus(g, cuda);
      rows.push_back(std::move(row));
    } while (std::prev_permutation(pick.begin(), pick.end()));
  }
  return rows;
}

SurveyRow wholeRow(const std::string& dir, const std::string& name) {
  const topo::Graph g = topo::loadTopologyFile(dir + "/" + name + ".json");
  const int gpus = static_cast<int>(g.nodesOfKind(topo::NodeKind::kGpu).size());
  if (gpus == 0) throwInvalidArgument(name + ": no GPUs");
  SurveyRow row;
  row.machine = name;
  row.gpus = "all " + std::to_string(gpus);
  row.topology = topo::placeRanks(g, gpus, 0, topo::DeviceKind::kCuda);
  return row;
}

}  // namespace

std::vector<SurveyRow> surveyRows(const std::string& dir) {
  std::vector<SurveyRow> rows = dgx1Rows(dir, "dgx1_p100");
  for (SurveyRow& r : dgx1Rows(dir, "dgx1_v100")) rows.push_back(std::move(r));
  for (const char* name :
       {"dgx2", "dgx_a100", "pcie_8gpu_2socket", "cluster_2x4nic", "ring4_addr", "dgx1_v100_addr"})
    rows.push_back(wholeRow(dir, name));
  return rows;
}

std::string surveyText(const std::string& dir, uint64_t bytes) {
  const std::vector<SurveyRow> rows = surveyRows(dir);
  std::string out =
      "Predicted bus bandwidth (GB/s, nccl-tests busbw) at " + bytesText(bytes) +
      "; all-reduce (AR) and broadcast from rank 0 (BC).\n"
      "'grove' is the fastest of grove's planned rings, trees, forests (all-reduce) and "
      "hierarchical plan, each simulated at the size.\n\n"
      "| topology | GPUs | subsets | AR NCCL rings | AR grove | AR bound | BC NCCL rings | "
      "BC grove | BC bound | planning ms |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const SurveyRow& row : rows) {
    plan::TopoPlans plans(plan::PlanGraph::fromTopology(row.topology));
    const Best ar = predictRow(row.topology, plans, plan::Coll::kAllReduce, bytes);
    const Best bc = predictRow(row.topology, plans, plan::Coll::kBroadcast, bytes);
    out += "| " + row.machine + " | " + row.gpus + " | " + std::to_string(row.classSize) + " | " +
           cell(ar.nccl) + " | " + cell(ar.busbw) + " (" + ar.name + ") | " + cell(ar.bound) +
           " | " + cell(bc.nccl) + " | " + cell(bc.busbw) + " (" + bc.name + ") | " +
           cell(bc.bound) + " | " + cell(ar.planMs + bc.planMs) + " |\n";
    std::fflush(stdout);
  }
  return out;
}

}  // namespace grove::tools

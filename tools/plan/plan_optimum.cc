// grove-plan --optimum: the stored LP optima the planner regression test
// holds the packings to (tests/fixtures/plan_optimum.json).
//
// How it works: for every survey row, the all-reduce tree LP and the
// broadcast tree LP (root 0) are solved from scratch by column generation
// (detail::optimalTrees, no seed trees, a relative gap of 1e-9 between the
// packing found and the dual bound that proves it optimal). Each row records
// the fixture, the topology nodes of its ranks (so a test can place them
// again with topo::placeRanksOn) and both optima with their certified upper
// bounds. The packers under test start from MWU trees; this run shares only
// the oracle and the LP with them.
#include <cstdio>
#include <string>

#include "algorithms/planner/planner_internal.h"
#include "tools/plan/plan_report.h"

namespace grove::tools {

namespace {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

std::string optimumJson(const std::string& dir) {
  std::string out =
      "{\n \"note\": \"tree LP optima (GB/s of message) over the grove-plan --survey rows; "
      "regenerate with "
      "scripts/plan-optimum\",\n \"rows\": [\n";
  const std::vector<SurveyRow> rows = surveyRows(dir);
  for (size_t i = 0; i < rows.size(); ++i) {
    const SurveyRow& row = rows[i];
    const plan::PlanGraph g = plan::PlanGraph::fromTopology(row.topology);
    const std::vector<double> cap = g.capacities();
    const plan::detail::TreeOptimum ar =
        plan::detail::optimalTrees(g, 0, true, cap, {}, 1e-9, 20000);
    const plan::detail::TreeOptimum bc =
        plan::detail::optimalTrees(g, 0, false, cap, {}, 1e-9, 20000);
    std::string nodes;
    for (const topo::RankPlacement& r : row.topology.ranks)
      nodes += std::string(nodes.empty() ? "" : ", ") + "\"" +
               row.topology.graph.qualifiedName(r.node) + "\"";
    out += "  {\"topology\": \"" + row.machine + "\", \"gpus\": \"" + row.gpus +
           "\", \"nodes\": [" + nodes + "],\n   \"allreduce\": " + num(ar.value) +
           ", \"allreduce_upper\": " + num(ar.upper) + ", \"broadcast\": " + num(bc.value) +
           ", \"broadcast_upper\": " + num(bc.upper) + "}" + (i + 1 < rows.size() ? ",\n" : "\n");
    std::fprintf(stderr, "%s %s: all-reduce %.4f (%d rounds), broadcast %.4f (%d rounds)\n",
                 row.machine.c_str(), row.gpus.c_str(), ar.value, ar.iterations, bc.value,
                 bc.iterations);
  }
  return out + " ]\n}\n";
}

}  // namespace grove::tools

// grove-plan's model of one planning run: where the ranks sit, the plans
// (rings, NCCL-like rings, trees, hierarchical), their link loads, the
// predicted bandwidth of every algorithm, the upper bound and the planning
// time; and its renderings (text, JSON, SVG) and the fixture survey.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/cost/cost_model.h"
#include "algorithms/planner/topo_plans.h"
#include "topology/comm_topology.h"

namespace grove::tools {

/// What to plan for.
struct PlanRequest {
  plan::Coll coll = plan::Coll::kAllReduce;  ///< allreduce, broadcast or reduce
  uint64_t bytes = 256ull << 20;             ///< message bytes of the predictions
  int root = 0;                              ///< broadcast / reduce root
  bool select = true;  ///< also predict direct and what the tuned selector picks
  /// The registered transport (transports/registry.h) whose link traits the
  /// predictions assume; "": device rings for GPU ranks, else sockets when
  /// the links carry addresses or the ranks span machines, else shm.
  std::string transport;
  /// The cost model chooses the number of trees (TopoPlans::setTreeJudge),
  /// as in a communicator; false: the packer's rule (99% of the optimum).
  bool judgeTrees = true;
  /// Take plans from the plan cache and leave them there (false: plan
  /// from scratch, as the survey's planning times do).
  bool storePlans = true;
  /// Where finished plans are kept by the topology's fingerprint
  /// (GROVE_PLAN_CACHE_DIR; "" = in memory only).
  std::string cacheDir;
};

/// The prediction of one algorithm.
struct AlgoPrediction {
  std::string name;    ///< "nccl-rings", "rings", "trees", "hier", "direct", "selected"
  std::string detail;  ///< e.g. what "selected" picked
  bool ok = false;     ///< false: cannot run here (see why)
  std::string why;
  double seconds = 0;
  double algbw = 0;  ///< GB/s
  double busbw = 0;  ///< GB/s (nccl-tests formulas)
  int criticalRank = -1;
  std::vector<double> linkBytes;  ///< by plan-graph link
};

/// One planning run.
struct PlanReport {
  PlanRequest request;
  int nranks = 0;
  int machines = 0;
  std::string transport;               ///< the transport row whose traits the predictions assume
  std::vector<std::string> rankNodes;  ///< by rank: qualified topology node name
  plan::RingPlan rings, ncclRings;
  plan::TreePlan trees;                    ///< all-reduce trees, or rooted at the root
  plan::HierPlan hier;                     ///< all-reduce only
  bool hasHier = false;                    ///< all-reduce: the hierarchical plan was made
  std::vector<double> ringLoad, treeLoad;  ///< GB/s by plan-graph link
  std::vector<AlgoPrediction> predictions;
  double boundAlgbw = 0;  ///< upper bound on algbw (GB/s)
  double boundBusbw = 0;
  std::string boundProof;        ///< what proves the bound (a partition, a cut, the LP dual)
  plan::CutBound allGather;      ///< all-gather optimum and its cut
  plan::CutBound reduceScatter;  ///< reduce-scatter optimum and its cut
  double planMs = 0;             ///< wall time of every plan above
  /// All-reduce: wall time of the two forests the all-reduce over forests
  /// runs on (planned only by a communicator that runs it); -1: none.
  double forestMs = -1;
  bool planFromCache = false;  ///< the plans above came from the cache directory
  double replanMs = -1;        ///< the same plans for a second communicator (the plan cache)
  /// The cost model's predictions at every size of its ladder and the
  /// algorithm it picks there (the communicator's size table).
  std::vector<plan::TuneRow> bySize;
  /// Calls of at most this many message bytes run eagerly over slot links
  /// (the direct algorithm's messages, plan::eagerProgram); 0: none do.
  uint64_t eagerMaxBytes = 0;
};

/// Plans and predicts for a placed communicator; `plans` is built from it.
PlanReport makeReport(const topo::CommTopology& topology, plan::TopoPlans& plans,
                      const PlanRequest& request);

/// Ranks on the GPUs with these CUDA indices of a single-machine graph.
topo::CommTopology placeOnGpus(const topo::Graph& g, const std::vector<int>& cudaIndices);

/// Human-readable report.
std::string reportText(const PlanReport& r, const plan::PlanGraph& g);
/// The same as JSON (see docs/planning.md for the fields).
std::string reportJson(const PlanReport& r, const plan::PlanGraph& g);
/// Standalone SVG: the topology's nodes and links, the trees' edges on top
/// (one colour per tree, width by rate).
std::string reportSvg(const PlanReport& r, const topo::CommTopology& topology);

/// One row of the survey: a fixture and the GPUs its ranks sit on.
struct SurveyRow {
  std::string machine;  ///< fixture name (file name without .json)
  std::string gpus;     ///< "0,1,6,7" or "all 8"
  int classSize = 1;    ///< subsets that plan alike (DGX-1 classes)
  topo::CommTopology topology;
};
/// The survey's rows: every class of DGX-1 P100 / V100 subsets of 3..8 GPUs
/// and the other fixtures on all their GPUs.
std::vector<SurveyRow> surveyRows(const std::string& fixturesDir);
/// The docs/planning.md results table over the fixtures in `fixturesDir`.
std::string surveyText(const std::string& fixturesDir, uint64_t bytes);
/// The tree LPs' optima over the survey's rows, solved by column generation
/// to a relative gap of 1e-9, as JSON (tests/fixtures/plan_optimum.json).
std::string optimumJson(const std::string& fixturesDir);

/// "{0,1,4}".
std::string rankSet(const std::vector<int>& ranks);
/// Message bytes from "256M", "1G", "4096", "64K" (binary units).
uint64_t parseBytes(const std::string& text);
/// "256 MiB"-style text of a byte count.
std::string bytesText(uint64_t bytes);
/// A rate in GB/s with `decimals` decimals, but three significant digits
/// below 1 GB/s, so the few MB/s of an emulated fabric's links do not read
/// as 0.0.
std::string rateText(double gbps, int decimals = 1);

}  // namespace grove::tools

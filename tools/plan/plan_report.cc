// grove-plan's planning run: plans, link loads, predictions of every
// algorithm through the cost model, and the text / JSON renderings.
#include "tools/plan/plan_report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>

#include "algorithms/builders/builders.h"
#include "algorithms/cost/sim_memo.h"
#include "algorithms/planner/plan_store.h"
#include "base/config.h"
#include "base/error.h"
#include "topology/json.h"
#include "transports/registry.h"

namespace grove::tools {

using plan::Algo;
using plan::Coll;

namespace {

using BuildFn = std::function<plan::Program(const plan::CollArgs&)>;

/// A ring as a chain rooted at `root` (NCCL's pipelined ring broadcast/reduce).
plan::Tree chainOf(const plan::Ring& ring, int root) {
  const int n = static_cast<int>(ring.order.size());
  plan::Tree t;
  t.root = root;
  t.rate = ring.rate;
  t.parent.assign(static_cast<size_t>(n), -1);
  const int at =
      static_cast<int>(std::find(ring.order.begin(), ring.order.end(), root) - ring.order.begin());
  for (int j = 1; j < n; ++j) t.parent[ring.order[(at + j) % n]] = ring.order[(at + j - 1) % n];
  return t;
}

/// Programs that run a collective over a set of rings.
BuildFn ringsBuilder(Coll coll, const std::vector<plan::Ring>& rings,
                     const plan::PlanParams& params) {
  return [coll, rings, params](const plan::CollArgs& a) {
    if (rings.empty()) throwInvalidArgument("no rings were found");
    if (coll == Coll::kAllReduce) return plan::buildRingsAllReduce(a, params, rings);
    if (coll == Coll::kAllGather) return plan::buildRingsAllGather(a, params, rings);
    if (coll == Coll::kReduceScatter) return plan::buildRingsReduceScatter(a, params, rings);
    std::vector<plan::Tree> chains;
    for (const plan::Ring& r : rings) chains.push_back(chainOf(r, a.root));
    if (coll == Coll::kBroadcast) return plan::buildTreeBroadcast(a, params, chains);
    return plan::buildTreeReduce(a, params, chains);
  };
}

/// grove-plan simulates every chunk of a call up to this size, beyond the
/// 256 MiB up to which the size tables do: a line misses programs whose
/// time is not yet a pipeline's at its points (two 8-GPU boxes: a forest
/// all-gather of 256 MiB extended from 16 and 64 MiB to 281 GB/s, simulated
/// at 157, bounded by 200).
constexpr uint64_t kSimulatedUpTo = 1ull << 30;

/// Simulates `fn`'s programs; above kSimulatedUpTo the time is extrapolated
/// from 64 and 256 MiB (plan::secondsBySize) and the link bytes scaled from
/// 256 MiB.
AlgoPrediction predictWith(const std::string& name, plan::SimMemo& memo, const plan::CollArgs& args,
                           const BuildFn& fn, const plan::SimParams& sim) {
  AlgoPrediction p;
  p.name = name;
  try {
    plan::FlowSimResult last;
    uint64_t lastBytes = 0;
    auto secondsAt = [&](uint64_t bytes) {
      std::vector<plan::Program> progs;
      plan::CollArgs a = plan::argsFor(args.coll, bytes, args.nranks);
      a.root = args.root;
      for (int r = 0; r < args.nranks; ++r) {
        a.rank = r;
        progs.push_back(fn(a));
      }
      last = memo.simulate(progs, sim);
      lastBytes = bytes;
      return last.seconds;
    };
    const uint64_t bytes = plan::messageBytes(args);
    p.seconds = bytes <= kSimulatedUpTo ? secondsAt(bytes) : plan::secondsBySize(bytes, secondsAt);
    p.ok = p.seconds > 0;
    p.algbw = p.ok ? static_cast<double>(bytes) / p.seconds / 1e9 : 0;
    p.busbw = p.algbw * plan::busBwFactor(args.coll, args.nranks);
    p.criticalRank = last.criticalRank;
    p.linkBytes = last.linkBytes;
    for (double& b : p.linkBytes) b *= static_cast<double>(bytes) / static_cast<double>(lastBytes);
  } catch (const Error& e) {
    p.why = e.what();
  }
  return p;
}

// What a communicator of these ranks would run over: GPU ranks move data
// over device rings whether or not the links carry addresses (the addresses
// only choose which link a host connection takes), host ranks over sockets
// when the links carry addresses or the ranks span machines, else shared
// memory. The answer is a row of the transport registry.
const transport::TransportEntry& transportOf(const topo::CommTopology& t, int machines) {
  const transport::TransportEntry* e = nullptr;
  if (!t.ranks.empty() && t.graph.node(t.ranks[0].node).kind == topo::NodeKind::kGpu)
    e = transport::firstProviding(transport::kDeviceRings);
  else
    e = transport::findTransport(t.graph.hasLinkAddresses() || machines > 1 ? "socket" : "shm");
  if (e == nullptr) throwInternalError("grove-plan: the transport registry lacks a default row");
  return *e;
}

}  // namespace

std::string rankSet(const std::vector<int>& ranks) {
  std::string out = "{";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out + "}";
}

namespace {

std::string allReduceProof(const plan::PlanGraph& g, const PlanReport& r) {
  const double rsag = 1.0 / (1.0 / r.allGather.rate + 1.0 / r.reduceScatter.rate);
  if (rsag >= r.boundAlgbw * (1 - 1e-9))
    return "reduce-scatter + all-gather at 1/(1/" + rateText(r.reduceScatter.rate, 2) + " + 1/" +
           rateText(r.allGather.rate, 2) + ")";
  if (std::abs(r.trees.optimum - r.boundAlgbw) > 1e-6 * r.boundAlgbw)
    return "the per-rank, summed and per-machine flow bounds (tighter than the trees' dual bound "
           "column "
           "generation reached in its rounds)";
  const plan::PartitionBound p = plan::allReducePartition(g);
  if (std::abs(p.rate - r.boundAlgbw) > 1e-6 * r.boundAlgbw)
    return "the all-reduce tree LP's optimum, proved by its dual (column generation)";
  std::string parts;
  for (const std::vector<int>& part : p.parts) parts += (parts.empty() ? "" : " ") + rankSet(part);
  return "the all-reduce tree LP's optimum; partition " + parts + ": " + rateText(p.crossing, 2) +
         " GB/s between parts / 2(" + std::to_string(p.parts.size()) + "-1)";
}

}  // namespace

PlanReport makeReport(const topo::CommTopology& topology, plan::TopoPlans& plans,
                      const PlanRequest& req) {
  const plan::PlanGraph& g = plans.graph();
  // Gather, scatter and all-to-all have no plans (one direct algorithm):
  // only its prediction is shown.
  const bool plannable = req.coll == Coll::kAllReduce || req.coll == Coll::kBroadcast ||
                         req.coll == Coll::kReduce || req.coll == Coll::kAllGather ||
                         req.coll == Coll::kReduceScatter;
  if (!plannable && req.coll != Coll::kGather && req.coll != Coll::kScatter &&
      req.coll != Coll::kAlltoAll)
    throwInvalidArgument(std::string("grove-plan does not plan ") + plan::collName(req.coll));
  if (req.root < 0 || req.root >= g.nranks())
    throwInvalidArgument("root " + std::to_string(req.root) + " out of range [0," +
                         std::to_string(g.nranks()) + ")");
  PlanReport r;
  r.request = req;
  r.nranks = g.nranks();
  std::set<int> machines;
  for (int i = 0; i < r.nranks; ++i) {
    machines.insert(g.machineOf(i));
    r.rankNodes.push_back(topology.graph.qualifiedName(topology.ranks[i].node));
  }
  r.machines = static_cast<int>(machines.size());
  const bool allReduce = req.coll == Coll::kAllReduce;
  const bool gather = req.coll == Coll::kAllGather;
  const bool forest = gather || req.coll == Coll::kReduceScatter;
  const transport::TransportEntry* row = req.transport.empty()
                                             ? &transportOf(topology, r.machines)
                                             : transport::findTransport(req.transport);
  if (row == nullptr)
    throwInvalidArgument("--transport: '" + req.transport + "' is not a transport (one of " +
                         transport::transportNames() + ")");
  r.transport = row->name;
  const plan::SimParams sim = plan::simParamsFor(row->traits);
  // Ranks on device rings run their lanes as thread blocks, and the
  // selector gives them channels by size, as a CUDA communicator's does.
  plan::SelectorConfig cfg = plan::SelectorConfig::fromRegistry();
  cfg.gpuLanes = row->traits.deviceRings;
  plan::Selector sel(r.nranks, row->traits, cfg);
  // As a communicator does (src/core/comm.cc), at GROVE_TREE_JUDGE_BYTES.
  const uint64_t judgeBytes = req.judgeTrees ? config::getSize("GROVE_TREE_JUDGE_BYTES") : 0;
  auto configure = [&](plan::TopoPlans& p) {
    if (judgeBytes > 0) plan::installTreeJudges(p, sel, sim, judgeBytes);
    if (req.storePlans) p.useStore(&plan::PlanStore::process(), req.cacheDir);
  };
  auto planAll = [&](plan::TopoPlans& p, PlanReport& into) {
    const auto t0 = std::chrono::steady_clock::now();
    if (allReduce && plannable) p.planAllReduce();  // at once, as a tuned communicator does
    into.rings = p.rings();
    into.ncclRings = p.ncclRings();
    if (plannable)
      into.trees = allReduce ? p.allReduceTrees()
                   : gather  ? p.allGatherTrees()
                   : forest  ? p.reduceScatterTrees()
                             : p.rootedTrees(req.root);
    into.hasHier = allReduce;
    if (into.hasHier) into.hier = p.hierarchical();
    const auto t1 = std::chrono::steady_clock::now();
    if (allReduce && plannable) {  // the forests the all-reduce over forests runs on
      p.reduceScatterTrees();
      p.allGatherTrees();
      into.forestMs =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    }
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  configure(plans);
  const uint64_t hitsBefore = plan::PlanStore::process().hits();
  r.planMs = planAll(plans, r);
  r.planFromCache = req.storePlans && plan::PlanStore::process().hits() > hitsBefore;
  if (req.storePlans) {
    // What a second communicator of this topology pays: the same plans,
    // from the store (the report keeps the first plans' figures).
    plan::TopoPlans again{plan::PlanGraph(plans.graph())};
    configure(again);
    PlanReport second;
    r.replanMs = planAll(again, second);
  }
  r.ringLoad = plan::linkLoad(g, r.rings.rings);
  r.treeLoad = forest ? plan::forestLoad(g, r.trees.trees, gather)
                      : plan::linkLoad(g, r.trees.trees, allReduce);
  r.boundAlgbw =
      r.trees.bound;  // allReduceBound / broadcastBound / the cut, as the packer found it
  r.allGather = plan::allGatherBound(g);
  r.reduceScatter = plan::reduceScatterBound(g);
  if (!plannable) {
    r.boundAlgbw = 0;
    r.boundProof = "none computed for this collective";
  } else if (forest) {
    const plan::CutBound& cut = gather ? r.allGather : r.reduceScatter;
    r.boundAlgbw = cut.rate;
    r.boundProof = "the cut: " + rateText(cut.crossing, 2) + " GB/s " +
                   (gather ? "into" : "out of") + " ranks " + rankSet(cut.inside) +
                   " for the blocks of the " +
                   std::to_string(r.nranks - static_cast<int>(cut.inside.size())) +
                   " rank(s) outside (ForestColl)";
  } else {
    r.boundProof = allReduce ? allReduceProof(g, r)
                             : "the smallest max flow from the root to one rank (Edmonds)";
  }
  r.boundBusbw = r.boundAlgbw * plan::busBwFactor(req.coll, r.nranks);

  // The predictions below and the size table ask for some calls twice
  // (the table's line above 256 MiB, the selected call): simulated once.
  plan::SimMemo memo(g);
  // Plans follow the size asked for, also where it is extrapolated.
  plan::PlanParams params = sel.select(req.coll, req.bytes).params;
  params.planBytes = req.bytes;
  plan::CollArgs args = plan::argsFor(req.coll, req.bytes, r.nranks);
  args.root = req.root;
  auto planned = [&](Algo a) {
    return
        [a, params, &plans](const plan::CollArgs& x) { return plan::build(a, x, params, &plans); };
  };
  if (plannable) {
    r.predictions.push_back(predictWith("nccl-rings", memo, args,
                                        ringsBuilder(req.coll, r.ncclRings.rings, params), sim));
    r.predictions.push_back(
        predictWith("rings", memo, args, ringsBuilder(req.coll, r.rings.rings, params), sim));
    r.predictions.push_back(predictWith("trees", memo, args, planned(Algo::kTree), sim));
    if (allReduce)
      r.predictions.push_back(predictWith("forests", memo, args, planned(Algo::kForest), sim));
  }
  if (r.hasHier)
    r.predictions.push_back(predictWith("hier", memo, args, planned(Algo::kHier), sim));
  if (!req.select) return r;
  r.predictions.push_back(predictWith("direct", memo, args, planned(Algo::kDirect), sim));
  // What GROVE_ALGO=ring runs: the planned rings only where they beat one
  // rank-order ring; broadcast and reduce as a rank-order chain.
  if (plannable)
    r.predictions.push_back(predictWith("ring", memo, args, planned(Algo::kRing), sim));

  // What the communicator would run: the cost model's table for this size.
  r.bySize = plan::tuneCollective(sel, plans, req.coll, r.nranks, sim, &memo);
  plan::CollArgs eagerCall = args;
  eagerCall.count = sel.eagerMaxBytes() / dtypeSize(eagerCall.dtype);
  if (eagerCall.count > 0 && sel.eager(eagerCall)) r.eagerMaxBytes = sel.eagerMaxBytes();
  sel.setSizeTable(req.coll, plan::sizeRulesOf(r.bySize));
  plan::Selection chosen = sel.select(req.coll, req.bytes);
  chosen.params.planBytes = req.bytes;
  AlgoPrediction s = predictWith(
      "selected", memo, args,
      [&](const plan::CollArgs& x) { return plan::build(chosen.algo, x, chosen.params, &plans); },
      sim);
  s.detail = plan::algoName(chosen.algo);
  r.predictions.push_back(s);
  return r;
}

topo::CommTopology placeOnGpus(const topo::Graph& g, const std::vector<int>& cudaIndices) {
  const std::vector<topo::NodeId> machines = g.machines();
  if (machines.size() != 1)
    throwInvalidArgument("--gpus needs a single-machine topology (this one has " +
                         std::to_string(machines.size()) + " machines; use --ranks)");
  topo::CommTopology t;
  t.graph = g;
  t.ranksByMachine.resize(1);
  std::set<int> seen;
  for (int idx : cudaIndices) {
    if (!seen.insert(idx).second)
      throwInvalidArgument("--gpus lists GPU " + std::to_string(idx) + " twice");
    topo::NodeId node = -1;
    for (topo::NodeId id : g.nodesOfKind(topo::NodeKind::kGpu))
      if (g.node(id).index == idx) node = id;
    if (node < 0) {
      std::string have;
      for (topo::NodeId id : g.nodesOfKind(topo::NodeKind::kGpu))
        have += (have.empty() ? "" : ",") + std::to_string(g.node(id).index);
      throwInvalidArgument("no GPU with CUDA index " + std::to_string(idx) + " (the topology has " +
                           (have.empty() ? std::string("none") : have) + ")");
    }
    topo::RankPlacement p;
    p.node = node;
    p.machine = machines[0];
    p.localRank = static_cast<int>(t.ranks.size());
    t.ranksByMachine[0].push_back(static_cast<int>(t.ranks.size()));
    t.ranks.push_back(p);
  }
  if (t.ranks.empty()) throwInvalidArgument("--gpus lists no GPU");
  return t;
}

uint64_t parseBytes(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throwInvalidArgument("bad size '" + text + "' (e.g. 4096, 64K, 256M, 1G)");
  }
  const std::string unit = text.substr(used);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KiB")
    mult = 1024;
  else if (unit == "M" || unit == "m" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    throwInvalidArgument("bad size '" + text + "' (e.g. 4096, 64K, 256M, 1G)");
  if (!(v * mult >= 4) || v * mult > 64.0 * (1ull << 30))
    throwInvalidArgument("size '" + text + "' out of range (4 B .. 64 GiB)");
  return static_cast<uint64_t>(v * mult);
}

std::string rateText(double gbps, int decimals) {
  char buf[64];
  if (gbps > 0 && gbps < 1)
    std::snprintf(buf, sizeof buf, "%.3g", gbps);
  else
    std::snprintf(buf, sizeof buf, "%.*f", decimals, gbps);
  return buf;
}

std::string bytesText(uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + " GiB";
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= (1u << 10) && b % (1u << 10) == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

}  // namespace grove::tools

// build() with the communicator's topology plans: lowers the planned trees,
// rings and hierarchical plan with the tree / ordered-ring / hier builders.
// Kept apart from selector.cc so that plan-less users of the selector do not
// link the planners.
#include <algorithm>
#include <limits>
#include <string>

#include "algorithms/builders/builders.h"
#include "algorithms/planner/topo_plans.h"
#include "algorithms/select/selector.h"
#include "base/error.h"
#include "base/log.h"

namespace grove::plan {

namespace {

/// The planned rings, unless one ring in rank order is as fast (or
/// the ring search failed: then rank order, with a warning; the search is
/// deterministic, so every rank falls back alike).
const std::vector<Ring>* plannedRings(TopoPlans& plans, int nranks) {
  const RingPlan* plan = nullptr;
  try {
    plan = &plans.rings();
  } catch (const Error& e) {
    GROVE_WARN(log::kPlan, "ring search failed (%s); rings follow rank order", e.what());
    return nullptr;
  }
  const std::vector<Ring>& rings = plan->rings;
  if (rings.empty()) return nullptr;
  // Keep rank order unless the planned rings are really faster (on a host
  // communicator every order is the same, and rank order is what users expect).
  Ring identity;
  for (int r = 0; r < nranks; ++r) identity.order.push_back(r);
  identity.rate = 1;
  const std::vector<double> load = linkLoad(plans.graph(), {identity});
  double identityRate = std::numeric_limits<double>::infinity();
  for (size_t l = 0; l < load.size(); ++l)
    if (load[l] > 0) identityRate = std::min(identityRate, plans.graph().links()[l].cap / load[l]);
  if (plan->rate <= identityRate * 1.01) return nullptr;
  return &rings;
}

/// The plan's tree set for a call of `bytes` message bytes (the same on
/// every rank: the plan and the call are).
const std::vector<Tree>& plannedTrees(const TreePlan& plan, uint64_t bytes, const char* coll,
                                      const char* algo = "tree") {
  if (plan.trees.empty())
    throwInvalidArgument(std::string("algorithm ") + algo +
                         ": the topology plan has no trees for " + coll);
  return plan.treesFor(bytes);
}

}  // namespace

Program build(Algo algo, const CollArgs& args, const PlanParams& params, TopoPlans* plans) {
  if (plans == nullptr || !algoSupports(algo, args.coll) || args.coll == Coll::kSendRecv)
    return build(algo, args, params);
  if (plans->graph().nranks() != args.nranks)
    throwInvalidArgument("build: the topology plans cover " +
                         std::to_string(plans->graph().nranks()) + " ranks, the call " +
                         std::to_string(args.nranks));
  const char* coll = collName(args.coll);
  const uint64_t bytes = params.planBytes > 0 ? params.planBytes : messageBytes(args);
  if (args.nranks == 1 && algo != Algo::kRing) {
    // One rank: the builders only copy, no plan needed.
    if (algo == Algo::kHier) return buildHierAllReduce(args, params, HierPlan{});
    if (algo == Algo::kForest) return buildForestAllReduce(args, params, {}, {});
    if (args.coll == Coll::kAllReduce) return buildTreeAllReduce(args, params, {});
    if (args.coll == Coll::kBroadcast) return buildTreeBroadcast(args, params, {});
    if (args.coll == Coll::kAllGather) return buildTreeAllGather(args, params, {});
    if (args.coll == Coll::kReduceScatter) return buildTreeReduceScatter(args, params, {});
    return buildTreeReduce(args, params, {});
  }
  switch (algo) {
    case Algo::kTree:
      if (args.coll == Coll::kAllReduce)
        return buildTreeAllReduce(args, params, plannedTrees(plans->allReduceTrees(), bytes, coll));
      if (args.coll == Coll::kAllGather)
        return buildTreeAllGather(args, params, plannedTrees(plans->allGatherTrees(), bytes, coll));
      if (args.coll == Coll::kReduceScatter)
        return buildTreeReduceScatter(args, params,
                                      plannedTrees(plans->reduceScatterTrees(), bytes, coll));
      if (args.root < 0 || args.root >= args.nranks)
        throwInvalidArgument(std::string("tree ") + coll + ": root " + std::to_string(args.root) +
                             " out of range [0," + std::to_string(args.nranks) + ")");
      if (args.coll == Coll::kBroadcast)
        return buildTreeBroadcast(args, params,
                                  plannedTrees(plans->rootedTrees(args.root), bytes, coll));
      return buildTreeReduce(args, params,
                             plannedTrees(plans->rootedTrees(args.root), bytes, coll));
    case Algo::kHier: return buildHierAllReduce(args, params, plans->hierarchical());
    case Algo::kForest:
      return buildForestAllReduce(
          args, params, plannedTrees(plans->reduceScatterTrees(), bytes, "reducescatter", "forest"),
          plannedTrees(plans->allGatherTrees(), bytes, "allgather", "forest"));
    case Algo::kRing: {
      const std::vector<Ring>* rings = nullptr;
      if (args.nranks > 1 && (args.coll == Coll::kAllReduce || args.coll == Coll::kAllGather ||
                              args.coll == Coll::kReduceScatter))
        rings = plannedRings(*plans, args.nranks);
      if (rings == nullptr) return build(algo, args, params);
      if (args.coll == Coll::kAllReduce) return buildRingsAllReduce(args, params, *rings);
      if (args.coll == Coll::kAllGather) return buildRingsAllGather(args, params, *rings);
      return buildRingsReduceScatter(args, params, *rings);
    }
    case Algo::kDirect:
    case Algo::kDoubling:
    case Algo::kHalving: break;
  }
  return build(algo, args, params);
}

}  // namespace grove::plan

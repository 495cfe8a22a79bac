// TopoPlans: a communicator's plans, each built on first use and cached.
#include <utility>

#include "algorithms/planner/planner_internal.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"

namespace grove::plan {

TopoPlans::TopoPlans(PlanGraph graph, PackOptions options)
    : graph_(std::move(graph)), options_(options) {}

TreePlan TopoPlans::jointOrSplit(TreePlan joint, TreePlan split, bool allReduce, int root) const {
  split.optimum = joint.optimum;  // the joint LP covers every split packing
  split.bound = joint.bound;
  split.judged = joint.judged;
  if (split.trees.empty()) return joint;
  if (!options_.judge || graph_.nranks() > kMaxJudgeRanks)
    return split.rate > joint.rate ? split : joint;
  // The judge's verdict (a plan it cannot build loses).
  const double jointSeconds =
      joint.judgedSeconds > 0 ? joint.judgedSeconds
                              : detail::judgeSeconds(options_.judge, joint.trees, allReduce, root);
  return detail::judgeSeconds(options_.judge, split.trees, allReduce, root) <
                 jointSeconds * (1 - 1e-9)
             ? split
             : joint;
}

const RingPlan& TopoPlans::rings() {
  if (!rings_) rings_ = searchRings(graph_);
  return *rings_;
}

const RingPlan& TopoPlans::ncclRings() {
  if (!ncclRings_) ncclRings_ = ncclLikeRings(graph_);
  return *ncclRings_;
}

const TreePlan& TopoPlans::allReduceTrees() {
  if (!allReduceTrees_) {
    allReduceTrees_ = jointOrSplit(packAllReduceTrees(graph_, options_),
                                   packHetero(graph_, 0, true, options_), true, 0);
  }
  return *allReduceTrees_;
}

const TreePlan& TopoPlans::rootedTrees(int root) {
  if (root < 0 || root >= graph_.nranks())
    throwInvalidArgument("TopoPlans::rootedTrees: root " + std::to_string(root) +
                         " out of range [0, " + std::to_string(graph_.nranks()) + ")");
  auto it = rootedTrees_.find(root);
  if (it == rootedTrees_.end()) {
    it = rootedTrees_
             .emplace(root, jointOrSplit(packTrees(graph_, root, options_),
                                         packHetero(graph_, root, false, options_), false, root))
             .first;
  }
  return it->second;
}

const HierPlan& TopoPlans::hierarchical() {
  if (!hierarchical_) hierarchical_ = planHierarchical(graph_);
  return *hierarchical_;
}

}  // namespace grove::plan

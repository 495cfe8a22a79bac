// TopoPlans: a communicator's plans, each built on first use and cached.
#include <limits>
#include <utility>

#include "algorithms/topo_plan.h"
#include "base/error.h"

namespace grove::plan {

TopoPlans::TopoPlans(PlanGraph graph, PackOptions options) : graph_(std::move(graph)), options_(options) {}

bool TopoPlans::better(const TreePlan& split, const TreePlan& joint, bool allReduce, int root) const {
  if (split.trees.empty()) return false;
  if (!options_.judge || graph_.nranks() > kMaxJudgeRanks) return split.rate > joint.rate;
  // The judge's verdict (a plan it cannot build loses).
  auto seconds = [&](const TreePlan& p) {
    try {
      return options_.judge(p.trees, allReduce, root);
    } catch (const Error&) {
      return std::numeric_limits<double>::infinity();
    }
  };
  const double jointSeconds = joint.judgedSeconds > 0 ? joint.judgedSeconds : seconds(joint);
  return seconds(split) < jointSeconds * (1 - 1e-9);
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
    TreePlan joint = packAllReduceTrees(graph_, options_);
    TreePlan split = packHetero(graph_, 0, true, options_);
    split.optimum = joint.optimum;  // the joint LP covers every split packing
    split.bound = joint.bound;
    split.judged = joint.judged;
    allReduceTrees_ = better(split, joint, true, 0) ? std::move(split) : std::move(joint);
  }
  return *allReduceTrees_;
}

const TreePlan& TopoPlans::rootedTrees(int root) {
  if (root < 0 || root >= graph_.nranks())
    throwInvalidArgument("TopoPlans::rootedTrees: root " + std::to_string(root) + " out of range [0, " +
                         std::to_string(graph_.nranks()) + ")");
  auto it = rootedTrees_.find(root);
  if (it == rootedTrees_.end()) {
    TreePlan joint = packTrees(graph_, root, options_);
    TreePlan split = packHetero(graph_, root, false, options_);
    split.optimum = joint.optimum;
    split.bound = joint.bound;
    split.judged = joint.judged;
    it = rootedTrees_.emplace(root, better(split, joint, false, root) ? std::move(split) : std::move(joint)).first;
  }
  return it->second;
}

const HierPlan& TopoPlans::hierarchical() {
  if (!hierarchical_) hierarchical_ = planHierarchical(graph_);
  return *hierarchical_;
}

}  // namespace grove::plan

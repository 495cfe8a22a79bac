// TopoPlans: a communicator's plans, each built on first use and cached,
// and with a store, shared with every communicator of the same topology.
#include <algorithm>
#include <chrono>
#include <type_traits>
#include <utility>

#include "algorithms/planner/concurrent.h"
#include "algorithms/planner/plan_store.h"
#include "algorithms/planner/planner_internal.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"
#include "base/log.h"

namespace grove::plan {

namespace {

// The items a TopoPlans makes, by the name the store files each under.
constexpr const char* kRings = "rings";
constexpr const char* kNcclRings = "nccl-rings";
constexpr const char* kAllReduceTrees = "trees-allreduce";
constexpr const char* kRootedTreesPrefix = "trees-root";  // + the root
constexpr const char* kAllGatherForest = "forest-allgather";
constexpr const char* kReduceScatterForest = "forest-reducescatter";
constexpr const char* kHier = "hier";

}  // namespace

TopoPlans::TopoPlans(PlanGraph graph, PackOptions options)
    : graph_(std::move(graph)), options_(options) {}

void TopoPlans::setTreeJudge(TreeJudge judge, std::string key, std::vector<SizeJudge> larger,
                             TreeJudge exact) {
  // The plans judge some sets more than once (the packer, the split, the
  // choice between them): each judge remembers its verdicts.
  options_.judge = detail::rememberingJudge(std::move(judge));
  options_.exactJudge = detail::rememberingJudge(std::move(exact));
  for (SizeJudge& band : larger) {
    band.judge = detail::rememberingJudge(std::move(band.judge));
    band.exact = detail::rememberingJudge(std::move(band.exact));
  }
  options_.largerJudges = std::move(larger);
  judgeKey_ = std::move(key);
}

TreePlan TopoPlans::jointOrSplit(int root, bool allReduce) const {
  // The joint packing and the heterogeneous split are independent: they
  // are packed at once (their judges remember verdicts under a lock), each
  // judged at the judge's own size only. The sets of both near the fastest
  // are then judged at each larger size in one pool (judgeSets), so those
  // simulations, the longest of the planning, run side by side.
  PackOptions own = options_;
  own.largerJudges.clear();
  TreePlan joint, split;
  detail::forEachConcurrently(2, detail::planThreads(), [&](size_t i) {
    if (i == 0)
      joint = allReduce ? packAllReduceTrees(graph_, own) : packTrees(graph_, root, own);
    else
      split = packHetero(graph_, root, allReduce, own);
  });
  split.optimum = joint.optimum;  // the joint LP covers every split packing
  split.bound = joint.bound;
  split.judged = joint.judged;
  const bool judged = options_.judge && graph_.nranks() <= kMaxJudgeRanks;
  if (!judged) return split.trees.empty() || !(split.rate > joint.rate) ? joint : split;
  // The fastest wins (a set that cannot be built was never near; the joint
  // packing wins a tie); each larger judge weighs the sets of both near it.
  std::vector<JudgedTrees> near = std::move(joint.contenders);
  const size_t fromJoint = near.size();
  for (JudgedTrees& c : split.contenders) {
    c.winsTies = false;
    near.push_back(std::move(c));
  }
  joint.contenders.clear();
  split.contenders.clear();
  if (near.empty()) return joint;  // no set could be built: the packer's own
  std::vector<detail::JudgedSet> sets;
  for (const JudgedTrees& c : near) sets.push_back({&c.trees, c.winsTies, c.seconds});
  const detail::Verdict v = detail::judgeSets(options_, sets, allReduce, root);
  if (v.chosen == sets.size()) return joint;
  TreePlan plan = v.chosen < fromJoint ? std::move(joint) : std::move(split);
  plan.trees = near[v.chosen].trees;
  plan.rate = 0;
  for (const Tree& t : plan.trees) plan.rate += t.rate;
  plan.judgedSeconds = v.seconds;
  plan.larger = detail::largerSets(options_, v, sets);
  return plan;
}

template <typename Plan, typename Decode, typename Encode, typename Make>
Plan TopoPlans::planned(const std::string& item, Decode decode, Encode encode, Make make) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto ms = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
  const bool stored = storing();
  std::string name;
  if (stored) {
    name = fingerprint() + "-" + item;
    if (std::optional<std::string> text = store_->load(name, storeDir_)) {
      Plan plan;
      std::string why;
      if (decode(*text, graph_, &plan, &why)) {
        plan.planMs = ms();
        GROVE_INFO(log::kPlan, "%s of %d ranks: from the plan cache in %.2f ms", item.c_str(),
                   graph_.nranks(), plan.planMs);
        return plan;
      }
      GROVE_WARN(log::kPlan, "plan cache: %s is not a plan of this topology (%s); planning again",
                 name.c_str(), why.c_str());
      store_->drop(name, storeDir_);
    }
  }
  Plan plan = make();
  plan.planMs = ms();
  GROVE_INFO(log::kPlan, "%s of %d ranks: planned in %.1f ms", item.c_str(), graph_.nranks(),
             plan.planMs);
  if (stored) store_->save(name, encode(plan), storeDir_);
  return plan;
}

const RingPlan& TopoPlans::rings() {
  if (!rings_)
    rings_ =
        planned<RingPlan>(kRings, decodeRings, encodeRings, [&] { return searchRings(graph_); });
  return *rings_;
}

const RingPlan& TopoPlans::ncclRings() {
  if (!ncclRings_)
    ncclRings_ = planned<RingPlan>(kNcclRings, decodeRings, encodeRings,
                                   [&] { return ncclLikeRings(graph_); });
  return *ncclRings_;
}

const TreePlan& TopoPlans::allReduceTrees() {
  if (!allReduceTrees_) {
    allReduceTrees_ = planned<TreePlan>(kAllReduceTrees, decodeTrees, encodeTrees,
                                        [&] { return jointOrSplit(0, true); });
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
             .emplace(root,
                      planned<TreePlan>(kRootedTreesPrefix + std::to_string(root), decodeTrees,
                                        encodeTrees, [&] { return jointOrSplit(root, false); }))
             .first;
  }
  return it->second;
}

const TreePlan& TopoPlans::allGatherTrees() {
  if (!allGatherTrees_)
    allGatherTrees_ = planned<TreePlan>(kAllGatherForest, decodeTrees, encodeTrees,
                                        [&] { return packAllGatherTrees(graph_, options_); });
  return *allGatherTrees_;
}

const TreePlan& TopoPlans::reduceScatterTrees() {
  if (!reduceScatterTrees_)
    reduceScatterTrees_ = planned<TreePlan>(kReduceScatterForest, decodeTrees, encodeTrees, [&] {
      return packReduceScatterTrees(graph_, options_);
    });
  return *reduceScatterTrees_;
}

const std::string& TopoPlans::fingerprint() {
  if (fingerprint_.empty()) fingerprint_ = planFingerprint(graph_, options_, judgeKey_);
  return fingerprint_;
}

void TopoPlans::planAllReduce() {
  // The plans are independent members; only the fingerprint that names
  // them in the store is shared, so it is made first.
  if (storing()) fingerprint();
  detail::forEachConcurrently(2, detail::planThreads(), [&](size_t i) {
    if (i == 0) {
      allReduceTrees();
      return;
    }
    rings();
    ncclRings();
    hierarchical();
  });
}

const HierPlan& TopoPlans::hierarchical() {
  if (!hierarchical_)
    hierarchical_ =
        planned<HierPlan>(kHier, decodeHier, encodeHier, [&] { return planHierarchical(graph_); });
  return *hierarchical_;
}

std::vector<TopoPlans::NamedPlan> TopoPlans::exportPlans() const {
  std::vector<NamedPlan> out;
  if (rings_) out.emplace_back(kRings, encodeRings(*rings_));
  if (ncclRings_) out.emplace_back(kNcclRings, encodeRings(*ncclRings_));
  if (allReduceTrees_) out.emplace_back(kAllReduceTrees, encodeTrees(*allReduceTrees_));
  for (const auto& [root, plan] : rootedTrees_)
    out.emplace_back(kRootedTreesPrefix + std::to_string(root), encodeTrees(plan));
  if (allGatherTrees_) out.emplace_back(kAllGatherForest, encodeTrees(*allGatherTrees_));
  if (reduceScatterTrees_)
    out.emplace_back(kReduceScatterForest, encodeTrees(*reduceScatterTrees_));
  if (hierarchical_) out.emplace_back(kHier, encodeHier(*hierarchical_));
  return out;
}

bool TopoPlans::take(const std::string& item, const std::string& text, std::string* why) {
  // Decodes the text into `slot` (an optional plan member).
  auto into = [&](auto decode, auto& slot) {
    typename std::remove_reference_t<decltype(slot)>::value_type plan;
    if (!decode(text, graph_, &plan, why)) return false;
    slot = std::move(plan);
    return true;
  };
  if (item == kRings) return into(decodeRings, rings_);
  if (item == kNcclRings) return into(decodeRings, ncclRings_);
  if (item == kAllReduceTrees) return into(decodeTrees, allReduceTrees_);
  if (item == kAllGatherForest) return into(decodeTrees, allGatherTrees_);
  if (item == kReduceScatterForest) return into(decodeTrees, reduceScatterTrees_);
  if (item == kHier) return into(decodeHier, hierarchical_);
  const std::string prefix = kRootedTreesPrefix;
  const std::string digits =
      item.compare(0, prefix.size(), prefix) == 0 ? item.substr(prefix.size()) : "";
  if (!digits.empty() && digits.size() <= 9 &&
      digits.find_first_not_of("0123456789") == std::string::npos &&
      (digits == "0" || digits[0] != '0') && std::stoi(digits) < graph_.nranks()) {
    const int root = std::stoi(digits);
    std::optional<TreePlan> plan;
    if (!into(decodeTrees, plan)) return false;
    auto rooted = [&](const std::vector<Tree>& set) {
      return std::all_of(set.begin(), set.end(), [&](const Tree& t) { return t.root == root; });
    };
    bool ok = rooted(plan->trees);
    for (const SizedTrees& sized : plan->larger) ok = ok && rooted(sized.trees);
    if (!ok) {
      *why = "a tree is not rooted at rank " + digits;
      return false;
    }
    rootedTrees_.insert_or_assign(root, std::move(*plan));
    return true;
  }
  *why = "no plan is called '" + item + "'";
  return false;
}

bool TopoPlans::importPlans(const std::vector<NamedPlan>& plans, const std::string& fingerprint,
                            std::string* why) {
  const bool keep = storing() && !fingerprint.empty() && fingerprint == this->fingerprint();
  for (const auto& [item, text] : plans) {
    std::string bad;
    if (!take(item, text, &bad)) {
      *why = item + ": " + bad;
      return false;
    }
    if (keep) store_->save(this->fingerprint() + "-" + item, text, storeDir_);
  }
  return true;
}

std::string TopoPlans::sharingKey() { return nameable() ? fingerprint() : std::string(); }

}  // namespace grove::plan

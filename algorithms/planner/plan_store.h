// The plan store: finished plans kept by the topology's fingerprint, so that
// a second communicator over the same topology (a subgroup, a shrunk or
// grown communicator, torchft's group after each quorum, the next job on
// the machine) takes its rings and trees instead of searching them again.
//
// How it works. A TopoPlans given a store (TopoPlans::useStore) names each
// plan it builds by a fingerprint -- a 128-bit SipHash of everything the
// planner reads: the plan graph (vertices, links with their exact
// capacities and latencies, rank placement, relay rules), the packing
// knobs, what the tree judge is told (its size and parameters) and the
// planner's format version -- plus the plan's name ("rings", "trees-ar",
// "trees-root3", "hier"). Planning is deterministic, so a plan taken from
// the store is the plan this rank would have made, and every rank of a
// communicator ends with the same plans whether it found them or not.
//
// The store keeps plans as text (plan_codec.cc: every number exact) in
// memory for the process, and, when a directory is named
// (GROVE_PLAN_CACHE_DIR), one file per plan there, written to a temporary
// name and renamed into place so that ranks writing at once never leave a
// torn file. A plan read back is checked against the graph before use (every
// ring a permutation of the ranks, every tree spanning and acyclic, every
// route a path of the graph's links between the right ranks); one that fails
// is dropped with a warning and planned again. The directory must belong to
// this user and be writable by no one else (as ssh asks of ~/.ssh): a plan
// that passes the checks but differs from the truth would make ranks
// disagree, so a directory others can write to is not read.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "algorithms/planner/topo_plans.h"

namespace grove::plan {

/// The fingerprint of the plans a TopoPlans would make: 32 hex digits.
/// judgeKey names what the tree judge is told (empty: no judge).
std::string planFingerprint(const PlanGraph& g, const PackOptions& options,
                            const std::string& judgeKey);

/// Plans as text and back. decode* returns false (and says why in *why)
/// for text that is not a well-formed plan of `g`; nothing is trusted.
std::string encodeRings(const RingPlan& plan);
std::string encodeTrees(const TreePlan& plan);
std::string encodeHier(const HierPlan& plan);
bool decodeRings(const std::string& text, const PlanGraph& g, RingPlan* out, std::string* why);
bool decodeTrees(const std::string& text, const PlanGraph& g, TreePlan* out, std::string* why);
bool decodeHier(const std::string& text, const PlanGraph& g, HierPlan* out, std::string* why);

/// Plans kept by name, in memory and optionally in a directory. Thread-safe.
class PlanStore {
 public:
  /// The process's store (what communicators share).
  static PlanStore& process();

  /// The text stored under `name` (memory first, then the directory when
  /// one is given and usable); nullopt when there is none.
  std::optional<std::string> load(const std::string& name, const std::string& dir = "");
  /// Keeps `text` under `name` in memory and, when `dir` is usable, on disk.
  void save(const std::string& name, const std::string& text, const std::string& dir = "");
  /// Forgets `name` (memory and directory): a plan that failed its checks.
  void drop(const std::string& name, const std::string& dir = "");
  /// Empties the memory (tests).
  void clearMemory();

  /// Loads that found a plan, and saves, since the process started.
  uint64_t hits() const;
  uint64_t saves() const;

  /// At most this many plans stay in memory (the oldest go first).
  static constexpr size_t kMaxInMemory = 512;
  /// A file larger than this is not a plan.
  static constexpr size_t kMaxFileBytes = 16u << 20;

 private:
  /// Whether `dir` may be read and written (checked once per directory):
  /// a directory owned by this user that no one else may write to.
  bool usable(const std::string& dir);

  mutable std::mutex mu_;
  std::map<std::string, std::string> memory_;
  std::deque<std::string> order_;         ///< names in memory, oldest first
  std::map<std::string, bool> dirState_;  ///< directories checked, usable or not
  uint64_t hits_ = 0;
  uint64_t saves_ = 0;
};

}  // namespace grove::plan

// Simulations remembered by what they simulate, so that a prediction asked
// for twice runs once (see sim_memo.cc).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "algorithms/cost/flow_sim.h"

namespace grove::plan {

/// The results of the simulations over one plan graph, by a 128-bit hash of
/// every rank's program and the simulator's knobs. Safe to share between
/// threads; the simulations run outside its lock.
class SimMemo {
 public:
  /// `g` must outlive the memo.
  explicit SimMemo(const PlanGraph& g) : g_(g) {}
  SimMemo(const SimMemo&) = delete;
  SimMemo& operator=(const SimMemo&) = delete;

  /// plan::simulate(g, programs, p), or what it gave the last time these
  /// programs were simulated with these knobs. Throws as simulate does (a
  /// failure is not remembered).
  FlowSimResult simulate(const std::vector<Program>& programs, const SimParams& p);
  const PlanGraph& graph() const { return g_; }
  int hits() const;    ///< simulations answered from the memo
  int misses() const;  ///< simulations run

 private:
  const PlanGraph& g_;
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, FlowSimResult> seen_;
  int hits_ = 0;
  int misses_ = 0;
};

}  // namespace grove::plan

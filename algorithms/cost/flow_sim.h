// The flow-level simulator of the cost model (see cost_model.h for the
// whole picture, flow_sim.cc for how it works): every rank's program runs
// over a network of directed links whose capacity the transfers in flight
// share max-min fairly.
#pragma once

#include <functional>
#include <vector>

#include "algorithms/planner/topo_plans.h"
#include "ir/schedule.h"

namespace grove::plan {

/// Knobs of the simulator.
struct SimParams {
  double stepOverheadUs =
      2.0;               ///< fixed cost of every step that sends (on top of the route latency)
  double localGBps = 0;  ///< speed of local copy / reduce steps (GB/s); 0 = free
  /// Events are taken together where none is late by more than this share
  /// of its own transfer's time (its bytes at its rate; one not flowing yet,
  /// at its path's speed): time jumps past the next event to the latest one
  /// that allows (0: only events within a nanosecond merge). The tree judges
  /// rank sets against each other with 0.02 (judgeSimParams) and simulate
  /// about 4x fewer events.
  double mergeShare = 0;
};

/// What the simulator needs of a network: directed links with a capacity and
/// a latency, and the route (link indices) between two ranks.
struct FlowNet {
  /// By link; > 0. A link of at least PlanGraph::kUnbounded / 2 (a rank's
  /// port no other rank shares) limits no transfer's rate.
  std::vector<double> capGBps;
  std::vector<double> latencyUs;  ///< by link
  /// Route from rank a to rank b (a != b); empty = unreachable.
  std::function<std::vector<int>(int a, int b)> route;
};

/// The FlowNet of a plan graph: its links, and PlanGraph::widestRoute (cached
/// per pair). The FlowNet refers to `g`, which must outlive it.
FlowNet flowNetOf(const PlanGraph& g);

/// What a simulation found.
struct FlowSimResult {
  double seconds = 0;               ///< until the last rank finished
  std::vector<double> linkBytes;    ///< bytes that crossed each link, by link index
  std::vector<double> rankSeconds;  ///< when each rank finished its program
  int criticalRank = -1;            ///< the rank that finished last
  int transfers = 0;                ///< transfers (matched send/receive steps) simulated
  int events = 0;                   ///< rate recomputations
};

/// Simulates one program per rank (index = rank) over `net`. Throws
/// Error(groveInvalidArgument) when the programs' sends and receives do not
/// match, a route is missing, or the programs stall.
FlowSimResult simulate(const FlowNet& net, const std::vector<Program>& programs,
                       const SimParams& p);
/// Same over a plan graph's links and widest routes (flowNetOf(g)).
FlowSimResult simulate(const PlanGraph& g, const std::vector<Program>& programs,
                       const SimParams& p);

}  // namespace grove::plan

// The transfer graph of a flow simulation (flow_sim.h): every rank's steps
// in one array, every sending step matched with its peer's receiving step
// (a transfer, over the route the sender planned or the widest), and the
// parts of the call that repeat one another. flow_sim.cc runs it.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "algorithms/cost/flow_sim.h"

namespace grove::plan::flow {

inline constexpr double kNever = std::numeric_limits<double>::infinity();

/// One step of one rank's program, with its transfers.
struct SimStep {
  const Step* step = nullptr;
  int rank = 0;
  int laneEnd = 0;        ///< one past the last step id of its lane
  std::vector<int> ins;   ///< transfers it receives (one per source)
  int insLeft = 0;        ///< of those, not yet arrived
  std::vector<int> outs;  ///< transfers it sends (one per destination)
  int outsLeft = 0;       ///< of those, not yet released (last byte sent)
  bool started = false;
  bool ended = false;
  bool merged = false;  ///< its lane is a copy another lane runs for (mergeCopies)
  double startedAt = 0;
  double localEnd = kNever;
  double releasedAt = 0;   ///< latest release of its outgoing transfers
  double lastArrival = 0;  ///< latest arrival of its incoming transfers
};

/// A matched send and receive: bytes over a route, and (the simulation's
/// state) how far they have come.
struct Transfer {
  // What each event reads, first, in 58 bytes (at most two cache lines; the
  // rest of the struct is read when a transfer starts or ends):
  double bytes = 0;
  double sent = 0;    ///< bytes arrived so far
  double rate = 0;    ///< bytes/s now
  double delay = 0;   ///< seconds from the sender's start to the first byte
  double flight = 0;  ///< the route's latency (s): how long the last byte is in flight
  double activeAt = kNever;
  /// Its inputs (the transfers its sender forwards; none: a plain send) are
  /// FlowGraph::ups[upBegin, upEnd).
  int upBegin = 0, upEnd = 0;
  bool released = false;  ///< the sender has sent its last byte (its step may go on)
  bool done = false;
  // The rest:
  int upstreamsLeft = 0;   ///< of those, not yet done
  double doneAt = kNever;  ///< when its last byte arrived
  int route = -1;
  int sender = -1, receiver = -1;  ///< step ids
};

/// The steps, lanes and transfers of a set of programs.
struct FlowGraph {
  std::vector<SimStep> steps;
  std::vector<std::vector<std::vector<int>>> laneStart;  ///< [rank][phase][lane] -> first step id
  std::vector<Transfer> xfers;
  std::vector<int> ups;  ///< every transfer's inputs (Transfer::upBegin)
  std::vector<std::vector<int>> routes;
  std::vector<double> routeDelay;  ///< by route: latency + step overhead (s)
  std::vector<int> copies;         ///< by transfer: the copies it stands for (0: merged away)
  /// By transfer: its path, the links of its route that may limit its rate
  /// (not an unbounded one: a rank's port no other rank shares, which no
  /// share of any transfer can fill); `paths`: the distinct lists.
  std::vector<int> pathOf;
  std::vector<std::vector<int>> paths;

  /// One past the last step id of rank r's phase ph.
  int phaseEnd(const std::vector<Program>& progs, int r, size_t ph) const;
};

/// Steps of two copies of a part (mergeCopies) may differ by this many bytes.
constexpr uint64_t kCopyBytes = 64;

/// The transfer graph of `progs` over `net`; throws InvalidArgument for a
/// bad peer, unmatched steps or a missing route.
FlowGraph buildFlowGraph(const FlowNet& net, const std::vector<Program>& progs, const SimParams& p);

}  // namespace grove::plan::flow

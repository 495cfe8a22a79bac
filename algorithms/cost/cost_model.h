// The cost model: a flow-level simulation of every rank's program over the
// plan graph, the predicted time of an algorithm built from the topology
// plans, and the per-size selection table filled from those predictions.
//
// The simulator (flow_sim.cc) is fluid: it does not move packets but keeps,
// for every transfer in flight, how many bytes have arrived, and lets the
// transfers that share a link share its capacity max-min fairly, recomputing
// the shares at every event. Its rules are those of the host executor:
// phases in sequence, the lanes of a phase concurrently, the steps of a lane
// in order; a step that sends starts its transfer after the route's latency
// plus SimParams::stepOverheadUs; a receiving step ends when its bytes have
// arrived; a streaming forward (recvCopySend, recvReduceSend, ...) never
// sends bytes it has not received, so chains pipeline. See flow_sim.cc.
//
// The model (cost_model.cc) builds each rank's program with
// build(algo, args, params, &plans) and simulates it; tuneSelector() runs it
// for every algorithm a collective allows at sizes 1 KiB .. 1 GiB and hands
// the winners to Selector::setSizeTable().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/cost/flow_sim.h"
#include "algorithms/cost/sim_memo.h"
#include "algorithms/planner/topo_plans.h"
#include "algorithms/select/selector.h"
#include "ir/schedule.h"

namespace grove::plan {

class TopoPlans;

/// Simulator settings for a communicator whose links have these traits:
/// each step pays the links' step overhead (over TCP system calls and
/// wake-ups, about 20 us; shared memory 2 us).
SimParams simParamsFor(const LinkTraits& links);

/// nccl-tests' bus-bandwidth factor: busbw = algbw * factor (all-reduce
/// 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; others 1).
double busBwFactor(Coll coll, int nranks);

/// The call the cost model predicts for `bytes` message bytes (as
/// messageBytes() counts them): float32 elements, the count per rank for
/// all-gather and reduce-scatter, at least one element.
CollArgs argsFor(Coll coll, uint64_t bytes, int nranks);

/// Builds every rank's program (args.rank varies) with build(algo, args,
/// params, &plans) and simulates it; the predicted seconds of the call.
/// With a memo (over plans.graph()), programs it has simulated before are
/// not simulated again.
double predictSeconds(TopoPlans& plans, Algo algo, const CollArgs& args, const PlanParams& params,
                      const SimParams& p, SimMemo* memo = nullptr);
/// predictSeconds with the full simulation result.
FlowSimResult predict(TopoPlans& plans, Algo algo, const CollArgs& args, const PlanParams& params,
                      const SimParams& p, SimMemo* memo = nullptr);

/// The simulator settings of the quick tree judges installTreeJudges()
/// installs: `p`, with events taken together where each is late by at most
/// 2 % of its own transfer's time (SimParams::mergeShare). A tree set's
/// time moves by up to about half a percent, a simulation takes about 4x
/// fewer events, and near ties go to full simulations.
SimParams judgeSimParams(const SimParams& p);

/// The cost model's TreeJudge (TopoPlans::setTreeJudge): builds the tree
/// all-reduce or broadcast over the candidate trees for a `bytes` call with
/// the selector's parameters at that size and simulates it over `g` (which
/// must outlive the judge). This is how the number of trees trades rate
/// (more trees reach closer to the optimum) against each tree's pipeline
/// fill and per-step costs (fewer, heavier trees). With a memo (over `g`),
/// programs simulated before are not simulated again (a set's fair shares
/// and its LP weights often make the same programs).
TreeJudge treeJudge(const PlanGraph& g, const Selector& sel, const SimParams& p,
                    uint64_t bytes = 32ull << 20, std::shared_ptr<SimMemo> memo = nullptr);
/// The cost model's ForestJudge (PackOptions::forestJudge): the forest
/// all-gather or reduce-scatter of a `bytes` call with the selector's
/// parameters at that size, simulated over `g` (which must outlive it).
ForestJudge forestJudge(const PlanGraph& g, const Selector& sel, const SimParams& p,
                        uint64_t bytes = 32ull << 20);
/// What the judges treeJudge() and forestJudge() make with these arguments
/// depend on: their size, the parameters the selector gives all-reduce,
/// broadcast, all-gather and reduce-scatter there,
/// and the simulator's settings (TopoPlans::setTreeJudge's key, which
/// names stored plans).
std::string treeJudgeKey(const Selector& sel, const SimParams& p, uint64_t bytes = 32ull << 20);

/// Installs the cost model's judges on `plans` (TopoPlans::setTreeJudge):
/// one at `bytes` (a data-parallel gradient bucket) for every call below
/// about 1.4 x bytes, and one at 2 x bytes for the calls from there up (a
/// large call can afford the fill of more trees), with the key naming both;
/// and the forest judge at `bytes` (TopoPlans::setForestJudge). The tree
/// judges simulate with judgeSimParams(p), their near ties settled with `p`
/// (PackOptions::exactJudge); the forest judge simulates with `p`.
void installTreeJudges(TopoPlans& plans, const Selector& sel, const SimParams& p, uint64_t bytes);

/// Predicted seconds of a `bytes`-sized call from a function that predicts
/// any size: called directly up to 256 MiB; above, extended along the line
/// through its 64 MiB and 256 MiB predictions (called in that order), as a
/// pipeline's time grows by its chunks while its fill stays (simulating
/// every chunk of a huge message is slow).
double secondsBySize(uint64_t bytes, const std::function<double(uint64_t bytes)>& secondsAt);
/// That line at `bytes` (> 256 MiB) from the 64 MiB and 256 MiB times; in
/// proportion to t256 when the times do not grow with the size.
double extendedSeconds(double t64, double t256, uint64_t bytes);

/// The sizes tuneSelector() predicts: 1 KiB, 4 KiB, ..., 1 GiB.
std::vector<uint64_t> tuneSizes();

/// The prediction behind one collective's size table.
struct TuneRow {
  uint64_t bytes = 0;           ///< message bytes (messageBytes())
  std::vector<double> seconds;  ///< by Algo value; < 0 = not allowed or cannot build
  Algo winner = Algo::kRing;    ///< the fastest prediction (the default on a tie)
};

/// Predicts, for `coll` at every tuneSizes() size, each algorithm the
/// selector allows (and that can build on these plans), and returns one row
/// per size. Sizes above 256 MiB are extended from 64 and 256 MiB
/// (extendedSeconds) to keep tuning fast. With a memo (over plans.graph()),
/// a call whose programs it has simulated is not simulated again.
std::vector<TuneRow> tuneCollective(const Selector& sel, TopoPlans& plans, Coll coll, int nranks,
                                    const SimParams& p, SimMemo* memo = nullptr);

/// The size rules of a tuning: runs of one winner merged, each boundary at
/// twice the last size of its run (the geometric middle of the x4 steps),
/// the last rule open-ended (UINT64_MAX).
std::vector<SizeRule> sizeRulesOf(const std::vector<TuneRow>& rows);

/// For all-reduce, broadcast, reduce, all-gather and reduce-scatter: tunes
/// and installs the size table (Selector::setSizeTable). Collectives with a
/// single allowed algorithm are left alone.
void tuneSelector(Selector& sel, TopoPlans& plans, int nranks, const SimParams& p);

}  // namespace grove::plan

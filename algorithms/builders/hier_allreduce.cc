// Hierarchical all-reduce over a HierPlan (topo_plan.h): machines, and per
// channel one leader rank on each machine.
//
// How it works:
//
// The message is split into one near-equal part per channel of the plan;
// channel c moves its part on connection channel c, in three phases that run
// one after another (every channel's lanes side by side within a phase):
//
//   1. inside each machine, a chain reduce of the part to the channel's
//      leader (the chain follows the machine's rank list starting after the
//      leader and ends at it; the leader folds its own input last, into its
//      output);
//   2. among the leaders, a ring all-reduce of the part in machine order, in
//      place on the leaders' outputs, pipelined in chunks of at most
//      params.chunkBytes (the ring's last reduction is the final one);
//   3. inside each machine, a chain broadcast of the part from the leader.
//
// Each level is built by the existing chain and ring builders on a
// sub-group (the machine's ranks, or the leaders) and then lowered onto the
// communicator: sub-group ranks become the real ranks, channel 0 becomes the
// plan channel, offsets move to the part, and in phases 2 and 3 the "input"
// is the output the previous phase filled. With one machine only phases 1
// and 3 remain (the leader's reduction is final); with one rank per machine
// only phase 2 (a leader alone copies its input first).
#include <algorithm>
#include <string>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"
#include "ir/step_traits.h"

namespace grove::plan {

using detail::Span;

namespace {

/// How a sub-group's program maps onto the communicator.
struct Lowering {
  const std::vector<int>* ranks = nullptr;  ///< sub-group rank -> communicator rank
  int channel = 0;
  uint64_t byteOffset = 0;     ///< where the part starts in the buffers
  bool inputIsOutput = false;  ///< read the output where the sub-program reads its input
  bool keepFinal = true;       ///< false: this level's last reduction is not the final one
};

BufRef lowerRef(BufRef b, const Lowering& l) {
  if (l.inputIsOutput && b.buf == Buf::kInput) b.buf = Buf::kOutput;
  if (b.buf == Buf::kInput || b.buf == Buf::kOutput) b.offset += l.byteOffset;
  return b;
}

/// Appends the lanes of a single-phase sub-group program to `phase`.
void appendLowered(Phase& phase, const Program& sub, const Lowering& l) {
  if (sub.phases.size() > 1) throwInternalError("hier allreduce: sub-program has several phases");
  if (sub.phases.empty()) return;
  for (const Lane& lane : sub.phases[0].lanes) {
    Lane out;
    for (Step s : lane.steps) {
      if (s.sendPeer >= 0) s.sendPeer = (*l.ranks)[static_cast<size_t>(s.sendPeer)];
      for (int32_t& p : s.moreSendPeers)
        if (p >= 0) p = (*l.ranks)[static_cast<size_t>(p)];
      if (s.recvPeer >= 0) s.recvPeer = (*l.ranks)[static_cast<size_t>(s.recvPeer)];
      for (int32_t& p : s.moreRecvPeers)
        if (p >= 0) p = (*l.ranks)[static_cast<size_t>(p)];
      if (s.sendPeer >= 0 || s.recvPeer >= 0) s.channel = l.channel;
      if (stepReadsSrc(s.kind)) s.src = lowerRef(s.src, l);
      if (stepWritesDst(s.kind)) s.dst = lowerRef(s.dst, l);
      s.final = s.final && l.keepFinal;
      out.steps.push_back(s);
    }
    detail::addLane(phase, std::move(out));
  }
}

/// Checks the plan against the call; returns this rank's machine index.
int checkPlan(const CollArgs& a, const HierPlan& plan) {
  const std::string w = "hier allreduce: ";
  if (plan.machines.empty() || plan.leaders.empty())
    throwInvalidArgument(w + "the plan has no machines or no channels");
  if (static_cast<int>(plan.leaders.size()) > kP2PChannel)
    throwInvalidArgument(w + std::to_string(plan.leaders.size()) + " channels exceed " +
                         std::to_string(kP2PChannel));
  std::vector<int> machineOf(static_cast<size_t>(a.nranks), -1);
  for (size_t m = 0; m < plan.machines.size(); ++m) {
    if (plan.machines[m].empty())
      throwInvalidArgument(w + "machine " + std::to_string(m) + " has no ranks");
    for (int r : plan.machines[m]) {
      if (r < 0 || r >= a.nranks || machineOf[static_cast<size_t>(r)] >= 0)
        throwInvalidArgument(w + "rank " + std::to_string(r) +
                             " is out of range or on two machines");
      machineOf[static_cast<size_t>(r)] = static_cast<int>(m);
    }
  }
  for (int r = 0; r < a.nranks; ++r)
    if (machineOf[static_cast<size_t>(r)] < 0)
      throwInvalidArgument(w + "rank " + std::to_string(r) + " is on no machine");
  for (const std::vector<int>& ls : plan.leaders) {
    if (ls.size() != plan.machines.size())
      throwInvalidArgument(w + "a channel names " + std::to_string(ls.size()) + " leaders for " +
                           std::to_string(plan.machines.size()) + " machines");
    for (size_t m = 0; m < ls.size(); ++m)
      if (ls[m] < 0 || ls[m] >= a.nranks ||
          machineOf[static_cast<size_t>(ls[m])] != static_cast<int>(m))
        throwInvalidArgument(w + "leader " + std::to_string(ls[m]) + " is not on machine " +
                             std::to_string(m));
  }
  return machineOf[static_cast<size_t>(a.rank)];
}

int indexIn(const std::vector<int>& v, int x) {
  return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
}

}  // namespace

Program buildHierAllReduce(const CollArgs& a, const PlanParams& p, const HierPlan& plan) {
  const uint64_t es = detail::checkArgs(a, p, "hier allreduce");
  if (a.nranks == 1) return detail::selfCopyProgram(a, a.count * es, 0, 0, "hier");
  const int me = checkPlan(a, plan);
  const std::vector<int>& machine = plan.machines[static_cast<size_t>(me)];
  const int machines = static_cast<int>(plan.machines.size());
  const int channels = static_cast<int>(plan.leaders.size());
  Program prog;
  prog.algo = "hier";
  Phase reduce, allReduce, broadcast;
  for (int c = 0; c < channels; ++c) {
    const Span part = detail::evenSplit(a.count, channels, c);
    if (part.count == 0) continue;
    const std::vector<int>& leaders = plan.leaders[static_cast<size_t>(c)];
    const int leader = leaders[static_cast<size_t>(me)];
    PlanParams sp = p;
    sp.nChannels = 1;
    CollArgs sub = a;
    sub.count = part.count;
    sub.nranks = static_cast<int>(machine.size());
    sub.rank = indexIn(machine, a.rank);
    sub.root = indexIn(machine, leader);
    Lowering l{&machine, c, part.offset * es, false, machines == 1};
    sub.coll = Coll::kReduce;
    appendLowered(reduce, buildChainReduce(sub, sp), l);
    if (machines > 1 && a.rank == leader) {
      CollArgs ring = sub;
      ring.coll = Coll::kAllReduce;
      ring.nranks = machines;
      ring.rank = me;
      ring.inPlace = true;
      appendLowered(allReduce, buildRingAllReduce(ring, sp),
                    Lowering{&leaders, c, part.offset * es, true, true});
    }
    sub.coll = Coll::kBroadcast;
    sub.inPlace = true;
    appendLowered(broadcast, buildChainBroadcast(sub, sp),
                  Lowering{&machine, c, part.offset * es, true, true});
  }
  detail::addPhase(prog, std::move(reduce));
  detail::addPhase(prog, std::move(allReduce));
  detail::addPhase(prog, std::move(broadcast));
  return prog;
}

}  // namespace grove::plan

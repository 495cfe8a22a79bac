// Grouped point-to-point send/recv.
//
// How it works:
//
// A group (groveGroupStart ... groveGroupEnd) may hold any number of sends
// and receives; NCCL runs them all concurrently, and sends and receives
// between one pair of ranks match in call order. So the program has one
// phase with one lane per (direction, peer): the lane holds that peer's sends
// (or receives) in call order, while the lanes of different peers and
// directions progress independently -- a rank may send to and receive from
// the same peer at once without deadlock, whatever the sizes.
//
// All p2p traffic uses the dedicated channel kP2PChannel, so its bytes never
// interleave with a collective's stream on channels 0..nChannels-1.
//
// Sends to self pair with receives from self in call order and become local
// copies in one extra lane (NCCL allows self send/recv inside a group).
// Zero-byte operations move nothing and are dropped on both sides.
#include <map>
#include <string>
#include <utility>

#include "algorithms/builder_util.h"
#include "algorithms/builders.h"
#include "base/error.h"

namespace grove::plan {

Program buildP2P(const std::vector<P2POp>& ops, int rank, int nranks) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throwInvalidArgument("sendrecv: rank " + std::to_string(rank) + " out of range [0," +
                         std::to_string(nranks) + ")");
  Program prog;
  prog.algo = "p2p";
  Phase phase;
  std::map<std::pair<bool, int>, size_t> laneOf;  // (isSend, peer) -> lane index
  std::vector<const P2POp*> selfSends, selfRecvs;
  for (const P2POp& op : ops) {
    if (op.peer < 0 || op.peer >= nranks)
      throwInvalidArgument("sendrecv: peer " + std::to_string(op.peer) + " out of range [0," +
                           std::to_string(nranks) + ")");
    if (op.bytes == 0) continue;
    if (op.peer == rank) {
      (op.isSend ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    auto [it, added] = laneOf.try_emplace({op.isSend, op.peer}, phase.lanes.size());
    if (added) phase.lanes.emplace_back();
    phase.lanes[it->second].steps.push_back(
        op.isSend ? detail::netStep(StepKind::kSend, -1, op.peer, kP2PChannel, op.buf, {}, op.bytes)
                  : detail::netStep(StepKind::kRecv, op.peer, -1, kP2PChannel, {}, op.buf, op.bytes));
  }
  if (selfSends.size() != selfRecvs.size())
    throwInvalidArgument("sendrecv: rank " + std::to_string(rank) + " has " +
                         std::to_string(selfSends.size()) + " non-empty send(s) to itself but " +
                         std::to_string(selfRecvs.size()) + " receive(s) from itself");
  Lane self;
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i]->bytes != selfRecvs[i]->bytes)
      throwInvalidArgument("sendrecv: send to self #" + std::to_string(i) + " has " +
                           std::to_string(selfSends[i]->bytes) + " bytes but the matching "
                           "receive has " + std::to_string(selfRecvs[i]->bytes));
    self.steps.push_back(detail::copyStep(selfSends[i]->buf, selfRecvs[i]->buf, selfSends[i]->bytes));
  }
  detail::addLane(phase, std::move(self));
  detail::addPhase(prog, std::move(phase));
  return prog;
}

}  // namespace grove::plan

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
// All p2p traffic uses the dedicated channels from kP2PChannel, so its bytes
// never interleave with a collective's stream on channels 0..nChannels-1.
// With a P2PSplit (GPU communicators, where a lane is one thread block that
// alone moves a few tens of GB/s) an op of b bytes is cut into
// k = clamp(b / bytesPerChannel, 1, m) pieces of whole 4 KiB multiples (the
// last shorter), piece j on channel kP2PChannel + j, in the lane of
// (direction, peer, j). m is maxChannels, and at most 64 / (2 (nranks - 1)),
// so that a group with every peer in both directions stays within 64 lanes
// (blocks that must all be resident). Both ends cut an op of the same size
// in the same communicator the same way, so pieces meet in call order on
// every channel.
//
// Sends to self pair with receives from self in call order and become local
// copies in one extra lane (NCCL allows self send/recv inside a group).
// Zero-byte operations move nothing and are dropped on both sides.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "base/error.h"

namespace grove::plan {

namespace {

// Most lanes the pieces of one group may take: a lane is a thread block,
// and every lane of a phase must be resident at once.
constexpr int kMaxSplitLanes = 64;

/// Bytes of each piece of an op of `bytes` (the last piece may be shorter).
uint64_t pieceBytes(uint64_t bytes, const P2PSplit& split, int nranks) {
  const int most = std::min(split.maxChannels, kMaxSplitLanes / std::max(1, 2 * (nranks - 1)));
  if (split.bytesPerChannel == 0 || most < 2) return bytes;
  const uint64_t k =
      std::clamp<uint64_t>(bytes / split.bytesPerChannel, 1, static_cast<uint64_t>(most));
  constexpr uint64_t kAlign = 4096;
  return std::max<uint64_t>(kAlign, (bytes / k + kAlign - 1) / kAlign * kAlign);
}

}  // namespace

Program buildP2P(const std::vector<P2POp>& ops, int rank, int nranks, const P2PSplit& split) {
  if (split.maxChannels > kMaxP2PChannels)
    throwInvalidArgument("sendrecv: " + std::to_string(split.maxChannels) + " channels (at most " +
                         std::to_string(kMaxP2PChannels) + ")");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throwInvalidArgument("sendrecv: rank " + std::to_string(rank) + " out of range [0," +
                         std::to_string(nranks) + ")");
  Program prog;
  prog.algo = "p2p";
  Phase phase;
  std::map<std::tuple<bool, int, int>, size_t> laneOf;  // (isSend, peer, piece) -> lane index
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
    const uint64_t piece = pieceBytes(op.bytes, split, nranks);
    for (uint64_t off = 0, j = 0; off < op.bytes; off += piece, ++j) {
      const int ch = kP2PChannel + static_cast<int>(j);
      const uint64_t n = std::min(piece, op.bytes - off);
      const BufRef at{op.buf.buf, op.buf.index, op.buf.offset + off};
      auto [it, added] =
          laneOf.try_emplace({op.isSend, op.peer, static_cast<int>(j)}, phase.lanes.size());
      if (added) phase.lanes.emplace_back();
      phase.lanes[it->second].steps.push_back(
          op.isSend ? detail::netStep(StepKind::kSend, -1, op.peer, ch, at, {}, n)
                    : detail::netStep(StepKind::kRecv, op.peer, -1, ch, {}, at, n));
    }
  }
  if (selfSends.size() != selfRecvs.size())
    throwInvalidArgument("sendrecv: rank " + std::to_string(rank) + " has " +
                         std::to_string(selfSends.size()) + " non-empty send(s) to itself but " +
                         std::to_string(selfRecvs.size()) + " receive(s) from itself");
  Lane self;
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i]->bytes != selfRecvs[i]->bytes)
      throwInvalidArgument("sendrecv: send to self #" + std::to_string(i) + " has " +
                           std::to_string(selfSends[i]->bytes) +
                           " bytes but the matching "
                           "receive has " +
                           std::to_string(selfRecvs[i]->bytes));
    self.steps.push_back(
        detail::copyStep(selfSends[i]->buf, selfRecvs[i]->buf, selfSends[i]->bytes));
  }
  detail::addLane(phase, std::move(self));
  detail::addPhase(prog, std::move(phase));
  return prog;
}

}  // namespace grove::plan

// What each StepKind touches: which peers, which local operands. Shared by
// the builders, the validator, the simulator and the executors so that they
// agree on the meaning of every step.
#pragma once

#include "ir/schedule.h"

namespace grove::plan {

/// True if the step consumes bytes from recvPeer.
constexpr bool stepReceives(StepKind k) {
  return k == StepKind::kRecv || k == StepKind::kRecvReduce || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopySend || k == StepKind::kRecvCopySend;
}

/// True if the step produces bytes for sendPeer.
constexpr bool stepSends(StepKind k) {
  return k == StepKind::kSend || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopySend || k == StepKind::kRecvCopySend;
}

/// True if the step reads Step::src.
constexpr bool stepReadsSrc(StepKind k) {
  return k == StepKind::kSend || k == StepKind::kRecvReduce || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopySend || k == StepKind::kCopy || k == StepKind::kReduce;
}

/// True if the step writes Step::dst (kReduce also reads it).
constexpr bool stepWritesDst(StepKind k) {
  return k == StepKind::kRecv || k == StepKind::kRecvReduce || k == StepKind::kRecvReduceCopySend ||
         k == StepKind::kRecvCopySend || k == StepKind::kCopy || k == StepKind::kReduce;
}

/// True if the step applies the reduction operator (so `final` matters).
constexpr bool stepReduces(StepKind k) {
  return k == StepKind::kRecvReduce || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopySend || k == StepKind::kReduce;
}

/// True if the step touches no link.
constexpr bool stepIsLocal(StepKind k) { return !stepReceives(k) && !stepSends(k); }

/// Number of ranks the step sends to: 0 for kinds that do not send, else
/// sendPeer plus the used entries of moreSendPeers (those before the first -1).
inline int sendPeerCount(const Step& s) {
  if (!stepSends(s.kind)) return 0;
  int n = 1;
  while (n <= kMaxMoreSendPeers && s.moreSendPeers[n - 1] >= 0) ++n;
  return n;
}

/// Destination i (0 <= i < sendPeerCount(s)) of a sending step: sendPeer, then moreSendPeers.
inline int sendPeerAt(const Step& s, int i) { return i == 0 ? s.sendPeer : s.moreSendPeers[i - 1]; }

/// True if the step sends to more than one rank.
inline bool stepFansOut(const Step& s) { return sendPeerCount(s) > 1; }

/// Calls f(peer) for every rank the step sends to, sendPeer first.
template <typename F>
void forEachSendPeer(const Step& s, F f) {
  const int n = sendPeerCount(s);
  for (int i = 0; i < n; ++i) f(sendPeerAt(s, i));
}

/// True if the kind may fan in (take Step::moreRecvPeers): the reducing receives.
constexpr bool stepMayFanIn(StepKind k) {
  return k == StepKind::kRecvReduce || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopySend;
}

/// Number of ranks the step receives from: 0 for kinds that do not receive,
/// else recvPeer plus (on kinds that may fan in) the used entries of
/// moreRecvPeers (those before the first -1).
inline int recvPeerCount(const Step& s) {
  if (!stepReceives(s.kind)) return 0;
  int n = 1;
  if (!stepMayFanIn(s.kind)) return n;
  while (n <= kMaxMoreRecvPeers && s.moreRecvPeers[n - 1] >= 0) ++n;
  return n;
}

/// Source i (0 <= i < recvPeerCount(s)) of a receiving step: recvPeer, then moreRecvPeers.
inline int recvPeerAt(const Step& s, int i) { return i == 0 ? s.recvPeer : s.moreRecvPeers[i - 1]; }

/// True if the step receives from more than one rank.
inline bool stepFansIn(const Step& s) { return recvPeerCount(s) > 1; }

/// Calls f(peer) for every rank the step receives from, recvPeer first (the
/// order in which their bytes are reduced in).
template <typename F>
void forEachRecvPeer(const Step& s, F f) {
  const int n = recvPeerCount(s);
  for (int i = 0; i < n; ++i) f(recvPeerAt(s, i));
}

}  // namespace grove::plan

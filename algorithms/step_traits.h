// What each StepKind touches: which peers, which local operands. Shared by
// the builders, the validator, the simulator and the executors so that they
// agree on the meaning of every step.
#pragma once

#include "algorithms/schedule.h"

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
  return k == StepKind::kRecv || k == StepKind::kRecvReduce ||
         k == StepKind::kRecvReduceCopySend || k == StepKind::kRecvCopySend ||
         k == StepKind::kCopy || k == StepKind::kReduce;
}

/// True if the step applies the reduction operator (so `final` matters).
constexpr bool stepReduces(StepKind k) {
  return k == StepKind::kRecvReduce || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopySend || k == StepKind::kReduce;
}

/// True if the step touches no link.
constexpr bool stepIsLocal(StepKind k) { return !stepReceives(k) && !stepSends(k); }

}  // namespace grove::plan

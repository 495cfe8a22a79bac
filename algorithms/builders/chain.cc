// Chain algorithms: pipelined broadcast and reduce along the ring order.
//
// How it works:
//
// Broadcast: the ranks form a chain that starts at the root and follows the
// ring (root, root+1, ..., root-1). The root sends the message to root+1;
// every middle rank receives it into its output and, in the same step,
// forwards it to the next rank (RecvCopySend); the last rank only receives.
// Steps stream -- a rank forwards bytes as soon as they arrive -- so the
// whole chain is busy at once and the time is about one message transfer plus
// one small latency per hop, as with NCCL's pipelined ring broadcast.
//
// Reduce: the chain runs toward the root, starting right after it
// (root+1, root+2, ..., root). The first rank sends its input; each middle
// rank adds its input to what arrives and passes the partial result on
// (RecvReduceSend); the root adds its own input last and writes the result
// (RecvReduce, final: avg divides here).
//
// A chain has no cycle, so no step waits on a step that waits on it; a step
// may therefore move the whole message (the link buffer only bounds how far
// ahead a sender runs). The message is split over nChannels channels, each a
// lane on its own connection, so several streams progress side by side.
//
// Both use only the links r -> r+1, which the ring all-reduce also uses.
#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"

namespace grove::plan {

using detail::modRank;
using detail::ref;
using detail::Span;

namespace {

/// One lane per channel, holding this rank's single chain step (`kind`, from
/// r-1 to r+1) on the channel's part of the message; the step is final when
/// it ends a reduction.
void addChainLanes(Phase& phase, const CollArgs& a, const PlanParams& p, uint64_t es,
                   StepKind kind) {
  const int prev = modRank(a.rank - 1, a.nranks), next = modRank(a.rank + 1, a.nranks);
  for (int ch = 0; ch < p.nChannels; ++ch) {
    const Span part = detail::evenSplit(a.count, p.nChannels, ch);
    if (part.count == 0) continue;
    const uint64_t off = part.offset * es;
    Lane lane;
    lane.steps.push_back(detail::netStep(kind, prev, next, ch, ref(Buf::kInput, off),
                                         ref(Buf::kOutput, off), part.count * es,
                                         /*final=*/kind == StepKind::kRecvReduce));
    detail::addLane(phase, std::move(lane));
  }
}

}  // namespace

Program buildChainBroadcast(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "chain broadcast");
  const uint64_t bytes = a.count * es;
  const bool isRoot = a.rank == a.root;
  if (a.nranks == 1) return detail::selfCopyProgram(a, bytes, 0, 0, "ring");
  const int n = a.nranks;
  const int pos = modRank(a.rank - a.root, n);  // 0 = root, n-1 = end of the chain
  const StepKind kind = pos == 0       ? StepKind::kSend
                        : pos == n - 1 ? StepKind::kRecv
                                       : StepKind::kRecvCopySend;
  Program prog;
  prog.algo = "ring";
  Phase phase;
  addChainLanes(phase, a, p, es, kind);
  if (isRoot && !a.inPlace && bytes > 0) {
    Lane local;
    local.steps.push_back(detail::copyStep(ref(Buf::kInput, 0), ref(Buf::kOutput, 0), bytes));
    detail::addLane(phase, std::move(local));
  }
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildChainReduce(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "chain reduce");
  const uint64_t bytes = a.count * es;
  if (a.nranks == 1) return detail::selfCopyProgram(a, bytes, 0, 0, "ring");
  const int n = a.nranks;
  const int pos = modRank(a.rank - a.root - 1, n);  // 0 = root+1 (start), n-1 = root
  const StepKind kind = pos == 0       ? StepKind::kSend
                        : pos == n - 1 ? StepKind::kRecvReduce
                                       : StepKind::kRecvReduceSend;
  Program prog;
  prog.algo = "ring";
  Phase phase;
  addChainLanes(phase, a, p, es, kind);
  detail::addPhase(prog, std::move(phase));
  return prog;
}

}  // namespace grove::plan

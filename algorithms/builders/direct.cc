// Direct ("latency") algorithms for small messages: all-reduce, broadcast,
// all-gather and reduce in one hop.
//
// How it works:
//
// A ring needs 2(nranks-1) dependent hops; for small messages the time is all
// latency, so these algorithms move every contribution straight to where it
// is needed, in one communication phase where every link is its own lane
// (every send to a peer and every receive from a peer progresses
// independently, so the phase cannot deadlock whatever the message size).
// Peers are visited starting at rank+1, so not everyone talks to rank 0 first.
//
// All-reduce: each rank sends its whole input to every other rank and
// receives every other rank's input into a scratch slot. Phase 2 is local:
// output = x0, then output = output op x1, ..., op x(n-1) -- strictly in
// rank order, so every rank performs the very same sequence of operations
// and gets bitwise-identical results (floating-point sums included). The last
// reduction is `final` (avg divides there). In place, the output would
// overwrite this rank's own contribution before its turn, so phase 1 also
// copies the input into the rank's own scratch slot.
//
// Reduce: the same, but only the root receives and reduces; the others just
// send. Reduce-scatter: rank r sends block p of its input to rank p, and
// each rank reduces the n copies of its own block in rank order (the eager
// collectives' pattern, exec/eager.h). Broadcast: the root sends to each
// rank. All-gather: every rank sends its block to every other rank, which
// receives it straight into its output.
//
// Scratch: one slot of the message size per peer (plus one for the own input
// when in place); these algorithms are meant for messages of a few KiB.
#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"

namespace grove::plan {

using detail::copyLane;
using detail::modRank;
using detail::recvLane;
using detail::ref;
using detail::sendLane;

namespace {

/// Ends the program of a reducing rank (all-reduce, reduce-scatter, the
/// root of reduce): receives every peer's contribution into scratch beside
/// the sends already in `comm` (the communication phase), then reduces all
/// of them in rank order into the output; this rank's own is the input at
/// `own`. Adds both phases and sets prog.scratchBytes.
void gatherAndReduce(const CollArgs& a, uint64_t bytes, uint64_t own, Phase comm, Program& prog) {
  const int n = a.nranks, r = a.rank;
  // In place, slot j belongs to rank j; out of place, this rank needs no slot.
  auto slot = [&](int j) -> uint64_t {
    return static_cast<uint64_t>(a.inPlace ? j : (j < r ? j : j - 1)) * bytes;
  };
  prog.scratchBytes = static_cast<uint64_t>(a.inPlace ? n : n - 1) * bytes;
  for (int i = 1; i < n; ++i) {
    const int q = modRank(r - i, n);  // rank r-1 sends to r first
    detail::addLane(comm, recvLane(q, ref(Buf::kScratch, slot(q)), bytes));
  }
  if (a.inPlace)
    detail::addLane(comm, copyLane(ref(Buf::kInput, own), ref(Buf::kScratch, slot(r)), bytes));
  auto contribution = [&](int j) {
    return (j == r && !a.inPlace) ? ref(Buf::kInput, own) : ref(Buf::kScratch, slot(j));
  };
  Lane lane;
  lane.steps.push_back(detail::copyStep(contribution(0), ref(Buf::kOutput, 0), bytes));
  for (int j = 1; j < n; ++j)
    lane.steps.push_back(detail::reduceStep(contribution(j), ref(Buf::kOutput, 0), bytes,
                                            /*final=*/j == n - 1));
  Phase reduce;
  detail::addLane(reduce, std::move(lane));
  detail::addPhase(prog, std::move(comm));
  detail::addPhase(prog, std::move(reduce));
}

}  // namespace

Program buildDirectAllReduce(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "direct allreduce");
  const uint64_t bytes = a.count * es;
  Program prog;
  if (detail::trivialProgram(a, bytes, 0, 0, "direct", prog)) return prog;
  Phase comm;
  for (int i = 1; i < a.nranks; ++i)
    detail::addLane(comm, sendLane(modRank(a.rank + i, a.nranks), ref(Buf::kInput, 0), bytes));
  gatherAndReduce(a, bytes, 0, std::move(comm), prog);
  return prog;
}

Program buildDirectReduceScatter(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "direct reducescatter");
  const uint64_t bytes = a.count * es;  // one block: what each rank keeps
  const uint64_t myBlock = static_cast<uint64_t>(a.rank) * bytes;
  Program prog;
  if (detail::trivialProgram(a, bytes, myBlock, 0, "direct", prog)) return prog;
  Phase comm;
  for (int i = 1; i < a.nranks; ++i) {
    const int q = modRank(a.rank + i, a.nranks);
    detail::addLane(comm, sendLane(q, ref(Buf::kInput, static_cast<uint64_t>(q) * bytes), bytes));
  }
  gatherAndReduce(a, bytes, myBlock, std::move(comm), prog);
  return prog;
}

Program buildDirectReduce(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "direct reduce");
  const uint64_t bytes = a.count * es;
  Program prog;
  if (detail::trivialProgram(a, bytes, 0, 0, "direct", prog)) return prog;
  Phase comm;
  if (a.rank != a.root) {
    detail::addLane(comm, sendLane(a.root, ref(Buf::kInput, 0), bytes));
    detail::addPhase(prog, std::move(comm));
    return prog;
  }
  gatherAndReduce(a, bytes, 0, std::move(comm), prog);
  return prog;
}

Program buildDirectBroadcast(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "direct broadcast");
  const uint64_t bytes = a.count * es;
  Program prog;
  if (detail::trivialProgram(a, bytes, 0, 0, "direct", prog)) return prog;
  Phase comm;
  if (a.rank == a.root) {
    for (int i = 1; i < a.nranks; ++i)
      detail::addLane(comm, sendLane(modRank(a.rank + i, a.nranks), ref(Buf::kInput, 0), bytes));
    if (!a.inPlace)
      detail::addLane(comm, copyLane(ref(Buf::kInput, 0), ref(Buf::kOutput, 0), bytes));
  } else {
    detail::addLane(comm, recvLane(a.root, ref(Buf::kOutput, 0), bytes));
  }
  detail::addPhase(prog, std::move(comm));
  return prog;
}

Program buildDirectAllGather(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "direct allgather");
  const uint64_t bytes = a.count * es;
  const uint64_t myBlock = static_cast<uint64_t>(a.rank) * bytes;
  Program prog;
  if (detail::trivialProgram(a, bytes, 0, myBlock, "direct", prog)) return prog;
  Phase comm;
  for (int i = 1; i < a.nranks; ++i)
    detail::addLane(comm, sendLane(modRank(a.rank + i, a.nranks), ref(Buf::kInput, 0), bytes));
  for (int i = 1; i < a.nranks; ++i) {
    const int q = modRank(a.rank - i, a.nranks);
    detail::addLane(comm, recvLane(q, ref(Buf::kOutput, static_cast<uint64_t>(q) * bytes), bytes));
  }
  if (!a.inPlace)
    detail::addLane(comm, copyLane(ref(Buf::kInput, 0), ref(Buf::kOutput, myBlock), bytes));
  detail::addPhase(prog, std::move(comm));
  return prog;
}

}  // namespace grove::plan

// Ring algorithms: all-reduce, all-gather and reduce-scatter around the ring
// of ranks in rank order (rank r sends to r+1 and receives from r-1).
//
// How it works (the structure of NCCL's ring kernels):
//
// The data is split into nChannels contiguous parts, one per channel; each
// channel is its own lane and its own connection namespace, so the channels
// progress independently. Within a channel the data is processed in loops of
// nranks chunks of at most chunkBytes each (the last, shorter loop is split
// evenly, so some of its chunks may be empty; every rank computes the same
// split, and empty chunks are simply skipped by everyone).
//
// All-reduce, one loop, seen from rank r (chunk indices mod nranks):
//
//   Send               chunk r-1            push my part of chunk r-1 to r+1
//   RecvReduceSend     chunks r-2 .. r-n+1  add mine to what r-1 sent, pass on
//   RecvReduceCopySend chunk r   (final)    chunk r is now fully reduced: write
//                                           it to the output and pass it on
//   RecvCopySend       chunks r-1 .. r-n+2  fully reduced chunks travel on
//   Recv               chunk r+1            the last one stops here
//
// After nranks-1 reduction steps every chunk has visited every rank once and
// is complete on exactly one rank (chunk r on rank r); the nranks-1 copy
// steps then circulate the finished chunks. Each step moves at most
// chunkBytes, and the link buffers hold more than one chunk, so the cycle of
// dependencies around the ring never deadlocks.
//
// In place (input == output) is safe: each output chunk is written only by a
// step that comes after (or is) the last step reading the same input chunk.
//
// All-gather uses the second half only: Send my block, nranks-2 RecvCopySend,
// one Recv (out of place, a separate lane copies my block into the output).
// Reduce-scatter uses the first half: Send, nranks-2 RecvReduceSend, and a
// final RecvReduce of block r into the output. There the ring "chunks" are
// the nranks blocks of the input, and a loop moves one chunk of each block.
#include <algorithm>

#include "algorithms/builder_util.h"
#include "algorithms/builders.h"

namespace grove::plan {

using detail::modRank;
using detail::ref;
using detail::Span;

namespace {

/// Neighbours and element size shared by the loop emitters.
struct RingCtx {
  int n = 1;
  int rank = 0;
  int prev = 0;
  int next = 0;
  int channel = 0;
  uint64_t es = 1;
};

RingCtx makeCtx(const CollArgs& a, uint64_t es, int channel) {
  return RingCtx{a.nranks, a.rank, modRank(a.rank - 1, a.nranks), modRank(a.rank + 1, a.nranks),
                 channel, es};
}

/// Appends one step on chunk `s` (same element offset in input and output).
void ringStep(Lane& lane, const RingCtx& c, StepKind kind, Span s, bool final = false) {
  if (s.count == 0) return;
  const uint64_t off = s.offset * c.es;
  lane.steps.push_back(detail::netStep(kind, c.prev, c.next, c.channel, ref(Buf::kInput, off),
                                       ref(Buf::kOutput, off), s.count * c.es, final));
}

/// Steps of one all-reduce loop; `chunkAt(k)` gives chunk k's absolute span.
template <typename ChunkAt>
void allReduceLoop(Lane& lane, const RingCtx& c, ChunkAt chunkAt) {
  const int n = c.n, r = c.rank;
  ringStep(lane, c, StepKind::kSend, chunkAt(modRank(r - 1, n)));
  for (int j = 2; j <= n - 1; ++j) ringStep(lane, c, StepKind::kRecvReduceSend, chunkAt(modRank(r - j, n)));
  ringStep(lane, c, StepKind::kRecvReduceCopySend, chunkAt(r), /*final=*/true);
  for (int j = 1; j <= n - 2; ++j) ringStep(lane, c, StepKind::kRecvCopySend, chunkAt(modRank(r - j, n)));
  ringStep(lane, c, StepKind::kRecv, chunkAt(modRank(r + 1, n)));
}

/// The skeleton all-gather and reduce-scatter share: one lane per channel,
/// and per chunk of the channel's part of each block, the steps body(lane,
/// ctx, byte offset within a block, bytes) appends.
template <typename Body>
void blockRingLanes(Phase& phase, const CollArgs& a, const PlanParams& p, uint64_t es, Body body) {
  const uint64_t chunk = detail::chunkElems(p, es);
  for (int ch = 0; ch < p.nChannels; ++ch) {
    const Span part = detail::evenSplit(a.count, p.nChannels, ch);
    const RingCtx c = makeCtx(a, es, ch);
    Lane lane;
    for (uint64_t off = 0; off < part.count; off += chunk) {
      const uint64_t elems = std::min(chunk, part.count - off);
      body(lane, c, (part.offset + off) * es, elems * es);
    }
    detail::addLane(phase, std::move(lane));
  }
}

}  // namespace

Program buildRingAllReduce(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "ring allreduce");
  if (a.nranks == 1) return detail::selfCopyProgram(a, a.count * es, 0, 0, "ring");
  const uint64_t chunk = detail::chunkElems(p, es);
  const uint64_t loopMax = chunk * static_cast<uint64_t>(a.nranks);
  Program prog;
  prog.algo = "ring";
  Phase phase;
  for (int ch = 0; ch < p.nChannels; ++ch) {
    const Span part = detail::evenSplit(a.count, p.nChannels, ch);
    const RingCtx c = makeCtx(a, es, ch);
    Lane lane;
    for (uint64_t off = 0; off < part.count;) {
      const uint64_t loopElems = std::min(loopMax, part.count - off);
      const uint64_t base = part.offset + off;
      allReduceLoop(lane, c, [&](int k) {
        Span s = detail::loopChunk(loopElems, chunk, a.nranks, k);
        s.offset += base;
        return s;
      });
      off += loopElems;
    }
    detail::addLane(phase, std::move(lane));
  }
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildRingAllGather(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "ring allgather");
  const uint64_t blockBytes = a.count * es;
  const uint64_t myBlock = static_cast<uint64_t>(a.rank) * blockBytes;
  if (a.nranks == 1) return detail::selfCopyProgram(a, blockBytes, 0, myBlock, "ring");
  const int n = a.nranks, r = a.rank;
  Program prog;
  prog.algo = "ring";
  Phase phase;
  blockRingLanes(phase, a, p, es, [&](Lane& lane, const RingCtx& c, uint64_t inOff, uint64_t bytes) {
    auto outRef = [&](int block) {
      return ref(Buf::kOutput, static_cast<uint64_t>(block) * blockBytes + inOff);
    };
    lane.steps.push_back(detail::netStep(StepKind::kSend, c.prev, c.next, c.channel,
                                         ref(Buf::kInput, inOff), {}, bytes));
    for (int j = 1; j <= n - 2; ++j)
      lane.steps.push_back(detail::netStep(StepKind::kRecvCopySend, c.prev, c.next, c.channel, {},
                                           outRef(modRank(r - j, n)), bytes));
    lane.steps.push_back(detail::netStep(StepKind::kRecv, c.prev, c.next, c.channel, {},
                                         outRef(modRank(r + 1, n)), bytes));
  });
  if (!a.inPlace && blockBytes > 0) {
    Lane local;
    local.steps.push_back(detail::copyStep(ref(Buf::kInput, 0), ref(Buf::kOutput, myBlock),
                                           blockBytes));
    detail::addLane(phase, std::move(local));
  }
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildRingReduceScatter(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "ring reducescatter");
  const uint64_t blockBytes = a.count * es;
  if (a.nranks == 1) return detail::selfCopyProgram(a, blockBytes, 0, 0, "ring");
  const int n = a.nranks, r = a.rank;
  Program prog;
  prog.algo = "ring";
  Phase phase;
  blockRingLanes(phase, a, p, es, [&](Lane& lane, const RingCtx& c, uint64_t outOff, uint64_t bytes) {
    auto inRef = [&](int block) {
      return ref(Buf::kInput, static_cast<uint64_t>(block) * blockBytes + outOff);
    };
    lane.steps.push_back(detail::netStep(StepKind::kSend, c.prev, c.next, c.channel,
                                         inRef(modRank(r - 1, n)), {}, bytes));
    for (int j = 2; j <= n - 1; ++j)
      lane.steps.push_back(detail::netStep(StepKind::kRecvReduceSend, c.prev, c.next, c.channel,
                                           inRef(modRank(r - j, n)), {}, bytes));
    lane.steps.push_back(detail::netStep(StepKind::kRecvReduce, c.prev, c.next, c.channel, inRef(r),
                                         ref(Buf::kOutput, outOff), bytes, /*final=*/true));
  });
  detail::addPhase(prog, std::move(phase));
  return prog;
}

}  // namespace grove::plan

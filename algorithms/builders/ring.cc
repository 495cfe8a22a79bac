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
//
// Rings in any order, several at once (buildRings*: the rings a topology
// planner found): in the description above "r" is the rank's position in
// the ring's order, and r-1 / r+1 its neighbours there; the chunk at
// position k of an all-reduce loop completes on the rank at position k, and
// the block a step of all-gather / reduce-scatter moves is the block of the
// rank at that position. The message is split into one contiguous share per
// ring, proportional to the ring's rate (rateSplit), and each ring's share
// over its own sub-channels (ring i, sub-channel s uses channel i*subs+s;
// subs = params.nChannels / number of rings, at least 1, so that all stay
// below kP2PChannel). The rank-order builders are the one-ring case with the
// identity order. A planned ring's hop routes (Ring::routes) are recorded for
// each channel of the ring (Program::routes), as trees do.
#include <algorithm>
#include <string>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"

namespace grove::plan {

using detail::modRank;
using detail::ref;
using detail::Span;

namespace {

/// One ring's neighbours around this rank, the channel and element size
/// shared by the loop emitters.
struct RingCtx {
  int n = 1;
  int rank = 0;
  int pos = 0;  ///< this rank's position in the order
  int prev = 0;
  int next = 0;
  int channel = 0;
  uint64_t es = 1;
  const std::vector<int>* order = nullptr;
  /// Rank at position k (mod n) of the ring.
  int rankAt(int k) const { return (*order)[static_cast<size_t>(modRank(k, n))]; }
};

/// The rings of a call, checked, with each ring's share of the elements.
struct RingSet {
  std::vector<std::vector<int>> orders;
  std::vector<int> pos;      ///< this rank's position in each ring
  std::vector<Span> shares;  ///< each ring's elements
  int subs = 1;              ///< channels per ring
};

/// Checks that every ring holds each rank once and splits `count` by rate.
RingSet makeRingSet(const CollArgs& a, const PlanParams& p, const std::vector<Ring>& rings,
                    uint64_t count, const std::string& who) {
  if (rings.empty()) throwInvalidArgument(who + ": no rings");
  if (static_cast<int>(rings.size()) > kP2PChannel)
    throwInvalidArgument(who + ": " + std::to_string(rings.size()) + " rings exceed the " +
                         std::to_string(kP2PChannel) + " channels available");
  RingSet rs;
  std::vector<double> rates;
  for (const Ring& ring : rings) {
    std::vector<int> seen(static_cast<size_t>(a.nranks), -1);
    bool ok = static_cast<int>(ring.order.size()) == a.nranks;
    for (size_t i = 0; ok && i < ring.order.size(); ++i) {
      const int v = ring.order[i];
      ok = v >= 0 && v < a.nranks && seen[static_cast<size_t>(v)] < 0;
      if (ok) seen[static_cast<size_t>(v)] = static_cast<int>(i);
    }
    if (!ok)
      throwInvalidArgument(who + ": a ring's order is not a permutation of the " +
                           std::to_string(a.nranks) + " ranks");
    rs.orders.push_back(ring.order);
    rs.pos.push_back(seen[static_cast<size_t>(a.rank)]);
    rates.push_back(ring.rate);
  }
  rs.shares = detail::rateSplit(count, rates, who.c_str());
  // Several rings are parallel streams already: sub-channels only make up
  // the difference to params.nChannels (this bounds the connections opened).
  const int nr = static_cast<int>(rings.size());
  rs.subs = std::max(1, std::min(p.nChannels / nr, kP2PChannel / nr));
  return rs;
}

/// Calls body(ctx, part) for every non-empty part (ring i, sub-channel s).
template <typename Body>
void forEachRingPart(const CollArgs& a, uint64_t es, const RingSet& rs, Body body) {
  for (size_t i = 0; i < rs.orders.size(); ++i)
    for (int sub = 0; sub < rs.subs; ++sub) {
      Span part = detail::evenSplit(rs.shares[i].count, rs.subs, sub);
      part.offset += rs.shares[i].offset;
      if (part.count == 0) continue;
      const int n = a.nranks, pos = rs.pos[i];
      const std::vector<int>& order = rs.orders[i];
      const RingCtx c{n,
                      a.rank,
                      pos,
                      order[static_cast<size_t>(modRank(pos - 1, n))],
                      order[static_cast<size_t>(modRank(pos + 1, n))],
                      static_cast<int>(i) * rs.subs + sub,
                      es,
                      &order};
      body(c, part);
    }
}

/// Records the planned routes of this rank's hops in every ring (to its
/// successor, from its predecessor), on each of that ring's channels.
void addRingRoutes(Program& prog, const std::vector<Ring>& rings, const RingSet& rs, int n) {
  for (size_t i = 0; i < rings.size(); ++i) {
    const int pos = rs.pos[i];
    const auto& order = rs.orders[i];
    const auto& routes = rings[i].routes;
    const size_t out = static_cast<size_t>(pos), in = static_cast<size_t>(modRank(pos - 1, n));
    for (int sub = 0; sub < rs.subs; ++sub) {
      const int ch = static_cast<int>(i) * rs.subs + sub;
      if (out < routes.size())
        detail::addRoute(prog, order[static_cast<size_t>(modRank(pos + 1, n))], ch, true,
                         routes[out]);
      if (in < routes.size()) detail::addRoute(prog, order[in], ch, false, routes[in]);
    }
  }
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
  const int n = c.n, r = c.pos;
  ringStep(lane, c, StepKind::kSend, chunkAt(modRank(r - 1, n)));
  for (int j = 2; j <= n - 1; ++j)
    ringStep(lane, c, StepKind::kRecvReduceSend, chunkAt(modRank(r - j, n)));
  ringStep(lane, c, StepKind::kRecvReduceCopySend, chunkAt(r), /*final=*/true);
  for (int j = 1; j <= n - 2; ++j)
    ringStep(lane, c, StepKind::kRecvCopySend, chunkAt(modRank(r - j, n)));
  ringStep(lane, c, StepKind::kRecv, chunkAt(modRank(r + 1, n)));
}

/// The skeleton all-gather and reduce-scatter share: one lane per (ring,
/// channel), and per chunk of that part of each block, the steps body(lane,
/// ctx, byte offset within a block, bytes) appends.
template <typename Body>
void blockRingLanes(Phase& phase, const CollArgs& a, const RingSet& rs, const PlanParams& p,
                    uint64_t es, Body body) {
  const uint64_t chunk = detail::chunkElems(p, es);
  forEachRingPart(a, es, rs, [&](const RingCtx& c, Span part) {
    Lane lane;
    for (uint64_t off = 0; off < part.count; off += chunk) {
      const uint64_t elems = std::min(chunk, part.count - off);
      body(lane, c, (part.offset + off) * es, elems * es);
    }
    detail::addLane(phase, std::move(lane));
  });
}

/// The one ring in rank order.
std::vector<Ring> rankOrderRing(int nranks) {
  Ring ring;
  for (int r = 0; r < nranks; ++r) ring.order.push_back(r);
  ring.rate = 1;
  return {ring};
}

}  // namespace

Program buildRingsAllReduce(const CollArgs& a, const PlanParams& p,
                            const std::vector<Ring>& rings) {
  const uint64_t es = detail::checkArgs(a, p, "ring allreduce");
  if (a.nranks == 1) return detail::selfCopyProgram(a, a.count * es, 0, 0, "ring");
  const RingSet rs = makeRingSet(a, p, rings, a.count, "ring allreduce");
  const uint64_t chunk = detail::chunkElems(p, es);
  const uint64_t loopMax = chunk * static_cast<uint64_t>(a.nranks);
  Program prog;
  prog.algo = "ring";
  addRingRoutes(prog, rings, rs, a.nranks);
  Phase phase;
  forEachRingPart(a, es, rs, [&](const RingCtx& c, Span part) {
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
  });
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildRingsAllGather(const CollArgs& a, const PlanParams& p,
                            const std::vector<Ring>& rings) {
  const uint64_t es = detail::checkArgs(a, p, "ring allgather");
  const uint64_t blockBytes = a.count * es;
  const uint64_t myBlock = static_cast<uint64_t>(a.rank) * blockBytes;
  if (a.nranks == 1) return detail::selfCopyProgram(a, blockBytes, 0, myBlock, "ring");
  const RingSet rs = makeRingSet(a, p, rings, a.count, "ring allgather");
  const int n = a.nranks;
  Program prog;
  prog.algo = "ring";
  addRingRoutes(prog, rings, rs, a.nranks);
  Phase phase;
  blockRingLanes(
      phase, a, rs, p, es, [&](Lane& lane, const RingCtx& c, uint64_t inOff, uint64_t bytes) {
        auto outRef = [&](int k) {
          return ref(Buf::kOutput, static_cast<uint64_t>(c.rankAt(k)) * blockBytes + inOff);
        };
        lane.steps.push_back(detail::netStep(StepKind::kSend, c.prev, c.next, c.channel,
                                             ref(Buf::kInput, inOff), {}, bytes));
        for (int j = 1; j <= n - 2; ++j)
          lane.steps.push_back(detail::netStep(StepKind::kRecvCopySend, c.prev, c.next, c.channel,
                                               {}, outRef(c.pos - j), bytes));
        lane.steps.push_back(detail::netStep(StepKind::kRecv, c.prev, c.next, c.channel, {},
                                             outRef(c.pos + 1), bytes));
      });
  if (!a.inPlace && blockBytes > 0) {
    Lane local;
    local.steps.push_back(
        detail::copyStep(ref(Buf::kInput, 0), ref(Buf::kOutput, myBlock), blockBytes));
    detail::addLane(phase, std::move(local));
  }
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildRingsReduceScatter(const CollArgs& a, const PlanParams& p,
                                const std::vector<Ring>& rings) {
  const uint64_t es = detail::checkArgs(a, p, "ring reducescatter");
  const uint64_t blockBytes = a.count * es;
  if (a.nranks == 1) return detail::selfCopyProgram(a, blockBytes, 0, 0, "ring");
  const RingSet rs = makeRingSet(a, p, rings, a.count, "ring reducescatter");
  const int n = a.nranks;
  Program prog;
  prog.algo = "ring";
  addRingRoutes(prog, rings, rs, a.nranks);
  Phase phase;
  blockRingLanes(
      phase, a, rs, p, es, [&](Lane& lane, const RingCtx& c, uint64_t outOff, uint64_t bytes) {
        auto inRef = [&](int k) {
          return ref(Buf::kInput, static_cast<uint64_t>(c.rankAt(k)) * blockBytes + outOff);
        };
        lane.steps.push_back(detail::netStep(StepKind::kSend, c.prev, c.next, c.channel,
                                             inRef(c.pos - 1), {}, bytes));
        for (int j = 2; j <= n - 1; ++j)
          lane.steps.push_back(detail::netStep(StepKind::kRecvReduceSend, c.prev, c.next, c.channel,
                                               inRef(c.pos - j), {}, bytes));
        lane.steps.push_back(detail::netStep(StepKind::kRecvReduce, c.prev, c.next, c.channel,
                                             inRef(c.pos), ref(Buf::kOutput, outOff), bytes,
                                             /*final=*/true));
      });
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildRingAllReduce(const CollArgs& a, const PlanParams& p) {
  return buildRingsAllReduce(a, p, rankOrderRing(a.nranks));
}

Program buildRingAllGather(const CollArgs& a, const PlanParams& p) {
  return buildRingsAllGather(a, p, rankOrderRing(a.nranks));
}

Program buildRingReduceScatter(const CollArgs& a, const PlanParams& p) {
  return buildRingsReduceScatter(a, p, rankOrderRing(a.nranks));
}

}  // namespace grove::plan

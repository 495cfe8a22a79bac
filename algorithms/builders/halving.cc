// Halving-doubling (Rabenseifner) all-reduce: a reduce-scatter by recursive
// halving, then an all-gather by recursive doubling. Every rank sends and
// receives 2(P-1)/P of the vector, as in the ring, but in 2 log2(P) rounds
// instead of 2(n-1), and each round is an exchange between two ranks that
// waits on no one else.
//
// How it works (P a power of two; other counts fold in first, below):
//
// The vector is cut into P blocks. Reduce-scatter: in the round at distance
// d = 1, 2, .., P/2 each rank pairs with the rank whose number differs in
// bit d. Both hold the same range of blocks; the rank with that bit clear
// keeps the lower half and the other the upper half. Each sends the half it
// gives away and reduces the partner's copy of the half it keeps into its
// own, so after the last round rank v holds block bitreverse(v) reduced over
// all ranks (that reduction is `final`: avg divides there). The first round
// reads the input and writes the output; later rounds read and write the
// output. The half that is sent and the half that is reduced never overlap,
// so no round reads what it writes, in place or not.
//
// All-gather: in the rounds at distance d = P/2, .., 2, 1 the partners swap
// the ranges they hold, which are adjacent, and each then holds their union.
// Every block is reduced once, at one rank, and copied from there, so every
// rank ends with bitwise the same result.
//
// Why the nearest partner first: the first and the last round each move half
// the vector, the others a quarter and less, so the largest rounds are
// between neighbours v and v ^ 1. Across hosts neighbours usually share one
// (launchers place consecutive ranks together), so the largest rounds stay
// on the fast local links. With more ranks than CPUs on one host,
// grove-launch binds consecutive ranks to different CPUs, and a loopback
// TCP exchange between two CPUs runs faster than one whose two ends share a
// CPU (4 ranks on 2 CPUs, 2 MiB: about 2.1 against 1.5 GB/s bus bandwidth;
// docs/benchmarks.md).
//
// With n = P + e ranks (P the largest power of two below n), ranks 0, 2, ..,
// 2e-2 first send their input to the next (odd) rank, which folds it into
// its output; the P ranks left run the rounds as virtual ranks 0..P-1; last
// each folding rank sends the result back. (The same fold as the recursive
// doubling all-reduce: detail::PowerOfTwoFold.)
//
// Channels: the vector is first split into one contiguous part per channel,
// and each part runs the rounds above on its own channel, in lanes of the
// same phases. A round's send and its reducing receive are separate lanes,
// so the partners' exchanges progress independently and a round cannot
// deadlock whatever the message size.
#include <algorithm>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"

namespace grove::plan {

using detail::laneOf;
using detail::phaseOf;
using detail::recvLane;
using detail::ref;
using detail::sendLane;
using detail::Span;

namespace {

/// The blocks of the vector: channel c's part cut into P blocks; a range of
/// blocks [lo, hi) of one channel is contiguous.
class Blocks {
 public:
  Blocks(uint64_t count, uint64_t es, int channels, int P)
      : count_(count), es_(es), channels_(channels), P_(P) {}
  /// Byte offset of the first block of [lo, hi) on channel c.
  uint64_t offset(int c, int lo) const { return block(c, lo).offset * es_; }
  /// Bytes of blocks [lo, hi) on channel c.
  uint64_t bytes(int c, int lo, int hi) const {
    if (hi <= lo) return 0;
    const Span last = block(c, hi - 1);
    return (last.offset + last.count - block(c, lo).offset) * es_;
  }
  /// Byte offset and size of channel c's whole part.
  Span part(int c) const { return detail::evenSplit(count_, channels_, c); }

 private:
  Span block(int c, int i) const {
    const Span p = part(c);
    Span b = detail::evenSplit(p.count, P_, i);
    b.offset += p.offset;
    return b;
  }
  uint64_t count_, es_;
  int channels_, P_;
};

}  // namespace

Program buildHalvingAllReduce(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "halving allreduce");
  const uint64_t bytes = a.count * es;
  Program prog;
  if (detail::trivialProgram(a, bytes, 0, 0, "halving", prog)) return prog;
  const int r = a.rank;
  const detail::PowerOfTwoFold fold(a.nranks, r);
  const int P = fold.P, v = fold.virt;
  const int channels = static_cast<int>(std::min<uint64_t>(std::max(p.nChannels, 1), a.count));
  const Blocks blocks(a.count, es, channels, P);
  // One lane per channel for a step over each channel's whole part.
  auto perPart = [&](auto&& step) {
    Phase phase;
    for (int c = 0; c < channels; ++c) {
      const Span part = blocks.part(c);
      if (part.count > 0) detail::addLane(phase, step(c, part.offset * es, part.count * es));
    }
    detail::addPhase(prog, std::move(phase));
  };

  // Ranks 0, 2, .., 2*extra-2 hand their input over and get the result back.
  if (fold.handsOver) {
    perPart([&](int c, uint64_t off, uint64_t len) {
      return sendLane(r + 1, ref(Buf::kInput, off), len, c);
    });
    perPart([&](int c, uint64_t off, uint64_t len) {
      return recvLane(r + 1, ref(Buf::kOutput, off), len, c);
    });
    return prog;
  }
  const bool folds = fold.folds;
  if (folds)
    perPart([&](int c, uint64_t off, uint64_t len) {
      return laneOf(detail::netStep(StepKind::kRecvReduce, r - 1, -1, c, ref(Buf::kInput, off),
                                    ref(Buf::kOutput, off), len));
    });

  // Reduce-scatter by recursive halving: [lo, hi) are the blocks this rank holds.
  Buf from = folds ? Buf::kOutput : Buf::kInput;
  int lo = 0, hi = P;
  for (int d = 1; d < P; d *= 2) {
    const int peer = fold.real(v ^ d);
    const int mid = lo + (hi - lo) / 2;
    const bool upper = (v & d) != 0;
    const int keepLo = upper ? mid : lo, keepHi = upper ? hi : mid;
    const int giveLo = upper ? lo : mid, giveHi = upper ? mid : hi;
    Phase phase;
    for (int c = 0; c < channels; ++c) {
      if (const uint64_t give = blocks.bytes(c, giveLo, giveHi); give > 0)
        detail::addLane(phase, sendLane(peer, ref(from, blocks.offset(c, giveLo)), give, c));
      if (const uint64_t keep = blocks.bytes(c, keepLo, keepHi); keep > 0) {
        const uint64_t off = blocks.offset(c, keepLo);
        const bool last = 2 * d == P;
        detail::addLane(phase,
                        laneOf(detail::netStep(StepKind::kRecvReduce, peer, -1, c, ref(from, off),
                                               ref(Buf::kOutput, off), keep, /*final=*/last)));
      }
    }
    detail::addPhase(prog, std::move(phase));
    from = Buf::kOutput;
    lo = keepLo;
    hi = keepHi;
  }

  // All-gather by recursive doubling: swap the held range with the partner's neighbour range.
  for (int d = P / 2; d >= 1; d /= 2) {
    const int peer = fold.real(v ^ d);
    const int width = hi - lo;
    const int theirLo = (v & d) != 0 ? lo - width : hi;
    Phase phase;
    for (int c = 0; c < channels; ++c) {
      if (const uint64_t mine = blocks.bytes(c, lo, hi); mine > 0)
        detail::addLane(phase, sendLane(peer, ref(Buf::kOutput, blocks.offset(c, lo)), mine, c));
      if (const uint64_t theirs = blocks.bytes(c, theirLo, theirLo + width); theirs > 0)
        detail::addLane(phase,
                        recvLane(peer, ref(Buf::kOutput, blocks.offset(c, theirLo)), theirs, c));
    }
    detail::addPhase(prog, std::move(phase));
    lo = std::min(lo, theirLo);
    hi = lo + 2 * width;
  }

  if (folds)
    perPart([&](int c, uint64_t off, uint64_t len) {
      return sendLane(r - 1, ref(Buf::kOutput, off), len, c);
    });
  return prog;
}

}  // namespace grove::plan

// Helpers shared by the builders (internal to algorithms/): argument checks,
// splitting element ranges over channels and ring loops, step constructors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/schedule.h"

namespace grove::plan::detail {

/// A range of elements: [offset, offset + count).
struct Span {
  uint64_t offset = 0;
  uint64_t count = 0;
};

/// Checks the call (rank, root, nranks, dtype, op, sizes fit in 64 bits) and
/// the params; returns the element size. Throws Error(groveInvalidArgument).
uint64_t checkArgs(const CollArgs& args, const PlanParams& params, const char* who);

/// Part `i` of `total` elements split into `parts` near-equal contiguous parts.
Span evenSplit(uint64_t total, int parts, int i);

/// Splits `total` elements into contiguous shares, one per rate, each
/// proportional to its rate (element-aligned; all rates 0 = equal shares).
/// Every rank computes the same split. Throws Error(groveInvalidArgument)
/// naming `who` when `rates` is empty or holds a negative or non-finite rate.
std::vector<Span> rateSplit(uint64_t total, const std::vector<double>& rates, const char* who);

/// Elements of one pipelined chunk: chunkBytes / elemSize, at least 1.
uint64_t chunkElems(const PlanParams& params, uint64_t elemSize);

/// Chunk k of one ring loop of `loopElems` elements (relative to the loop's
/// start): a full loop (nranks*chunk elements) has nranks equal chunks; a
/// shorter last loop is split evenly (some chunks may be empty).
Span loopChunk(uint64_t loopElems, uint64_t chunk, int nranks, int k);

/// Largest power of two not above n (n >= 1).
inline int floorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/// How the pairwise-round algorithms (recursive doubling, halving-doubling)
/// run on n = P + extra ranks, P the largest power of two not above n: ranks
/// 0, 2, .., 2*extra-2 hand their input to the next (odd) rank, which folds
/// it in and later hands the result back; the P ranks left run the rounds as
/// virtual ranks 0..P-1.
struct PowerOfTwoFold {
  PowerOfTwoFold(int nranks, int rank)
      : P(floorPow2(nranks)),
        extra(nranks - P),
        handsOver(rank < 2 * extra && rank % 2 == 0),
        folds(rank < 2 * extra && rank % 2 == 1),
        virt(rank < 2 * extra ? rank / 2 : rank - extra) {}
  /// The real rank of virtual rank v.
  int real(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
  int P, extra;
  bool handsOver;  ///< this rank only hands its input over and takes the result back
  bool folds;      ///< this rank takes in rank - 1's input first and sends it the result last
  int virt;        ///< this rank's virtual rank (when it does not hand over)
};

/// (a mod n) for possibly negative a.
inline int modRank(int a, int n) { return ((a % n) + n) % n; }

/// A reference to a local buffer.
inline BufRef ref(Buf b, uint64_t offset) { return BufRef{b, 0, offset}; }

/// A step that talks to peers: sets recvPeer/sendPeer as the kind needs.
Step netStep(StepKind kind, int recvPeer, int sendPeer, int channel, BufRef src, BufRef dst,
             uint64_t bytes, bool final = false);
/// A local copy dst = src.
Step copyStep(BufRef src, BufRef dst, uint64_t bytes);
/// A local reduction dst = dst op src.
Step reduceStep(BufRef src, BufRef dst, uint64_t bytes, bool final);

/// A lane of one step.
Lane laneOf(Step step);
/// A lane that sends `bytes` of src to `peer` on `channel`.
Lane sendLane(int peer, BufRef src, uint64_t bytes, int channel = 0);
/// A lane that receives `bytes` from `peer` on `channel` into dst.
Lane recvLane(int peer, BufRef dst, uint64_t bytes, int channel = 0);
/// A lane that copies src to dst locally.
Lane copyLane(BufRef src, BufRef dst, uint64_t bytes);

/// Appends a lane with these steps to the phase, unless it has none.
void addLane(Phase& phase, Lane lane);
/// A phase of these lanes (lanes without steps dropped, as addLane does).
Phase phaseOf(std::vector<Lane> lanes);
/// Appends the phase to the program, unless it has no lanes.
void addPhase(Program& program, Phase phase);

/// Records the planned route of this rank's link to (send) or from (!send)
/// `peer` on `channel` in program.routes; nothing when `links` is empty (the
/// widest route) or the link already has a route.
void addRoute(Program& program, int peer, int channel, bool send, const std::vector<int>& links);

/// Program of a single-rank call: copy input+inOffset to output+outOffset
/// (nothing when in place or empty).
Program selfCopyProgram(const CollArgs& args, uint64_t bytes, uint64_t inOffset, uint64_t outOffset,
                        const char* algo);

/// The start the builders share: a one-rank call is selfCopyProgram's copy
/// and a call of 0 bytes has nothing to do. Sets `prog` to that program and
/// returns true when nothing more is to be built; otherwise sets `prog` to an
/// empty program named `algo` and returns false.
bool trivialProgram(const CollArgs& args, uint64_t bytes, uint64_t inOffset, uint64_t outOffset,
                    const char* algo, Program& prog);

}  // namespace grove::plan::detail

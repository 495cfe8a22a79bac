// Recursive doubling: all-reduce, all-gather and broadcast in log2(nranks)
// rounds, for small messages where the number of messages and of dependent
// hops is the cost.
//
// How it works:
//
// All-reduce. Round k (k = 0, 1, ...) pairs each rank with the rank whose
// number differs in bit k. Both send what they hold and reduce what they
// receive into it, so after round k every rank holds the reduction over its
// aligned group of 2^(k+1) ranks, and after log2(n) rounds over all. Both
// partners combine the same two values (mine op theirs = theirs op mine: the
// supported ops are commutative, IEEE sums and products included), so every
// rank ends with bitwise the same result. A round reads the previous
// round's result while it writes the next one, so the values alternate
// between two scratch slots; the first round reads the input and the last
// writes the output; in place with two ranks (one round, which would read
// what it writes) the input is first copied into a scratch slot. The last
// reduction is `final` (avg divides there).
//
// With a rank count that is not a power of two, n = P + e (P the largest
// power of two below n): first each of the ranks 0, 2, ..., 2e-2 sends its
// input to the next (odd) rank, which folds it in; then the P ranks left
// (the odd ones below 2e and all from 2e up) run the rounds above as
// virtual ranks 0..P-1; last each folding rank sends the result back to the
// rank it took the input from, which receives it straight into its output.
//
// All-gather (a power-of-two rank count). After round k every rank holds the
// 2^(k+1) blocks of its aligned group in place in the output, which are
// contiguous, so round k sends 2^k blocks from the output and receives the
// partner group's 2^k blocks beside them. The first round sends straight
// from the input (and copies it into the output block when out of place).
// Other rank counts use the direct all-gather (one hop; its own program).
//
// Broadcast (any rank count): the binomial tree. Number the ranks from the
// root (v = (rank - root) mod n). In round k the 2^k ranks that hold the
// data (v < 2^k) send it to v + 2^k, when that exists. So rank v receives
// once, from v minus its highest set bit, into its output, and then sends
// its output to v + 2^j for every 2^j above that bit, the farthest (the
// largest subtree) first: n - 1 messages in ceil(log2(n)) hops, against
// the direct broadcast's n - 1 messages all from the root.
//
// Every all-reduce and all-gather round is one phase with a send lane and a receive lane, so the
// partners' sends and receives progress independently and a round cannot
// deadlock whatever the message size. Messages: n log2(n) in log2(n) hops,
// against n(n-1) in one hop for the direct algorithms.
#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"

namespace grove::plan {

using detail::floorPow2;
using detail::laneOf;
using detail::phaseOf;
using detail::recvLane;
using detail::ref;
using detail::sendLane;

namespace {

constexpr int kDoublingChannel = 0;

}  // namespace

Program buildDoublingAllReduce(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "doubling allreduce");
  const uint64_t bytes = a.count * es;
  Program prog;
  if (detail::trivialProgram(a, bytes, 0, 0, "doubling", prog)) return prog;
  const int r = a.rank;
  const detail::PowerOfTwoFold fold(a.nranks, r);
  int rounds = 0;
  while ((1 << rounds) < fold.P) ++rounds;

  // Ranks 0, 2, .., 2*extra-2 only hand their input over and get the result
  // back.
  if (fold.handsOver) {
    detail::addPhase(prog,
                     phaseOf({sendLane(r + 1, ref(Buf::kInput, 0), bytes, kDoublingChannel)}));
    detail::addPhase(prog,
                     phaseOf({recvLane(r + 1, ref(Buf::kOutput, 0), bytes, kDoublingChannel)}));
    return prog;
  }
  const bool folds = fold.folds;  // an odd rank that takes in rank r-1's input

  // The values of the reductions: value 0 is the input, value `total` the
  // output, and those between alternate between scratch slots so that no
  // reduction reads the buffer it writes.
  // In place with a single reduction (two ranks), the input is first copied
  // into the scratch slot, as the only round would otherwise read what it
  // writes.
  const int total = rounds + (folds ? 1 : 0);
  const bool copyIn = a.inPlace && total == 1;
  prog.scratchBytes = total >= 3 ? 2 * bytes : (total == 2 || copyIn ? bytes : 0);
  auto value = [&](int i) -> BufRef {
    if (i == 0) return copyIn ? ref(Buf::kScratch, 0) : ref(Buf::kInput, 0);
    if (i == total) return ref(Buf::kOutput, 0);
    return ref(Buf::kScratch, static_cast<uint64_t>((total - 1 - i) % 2) * bytes);
  };
  // value(i + 1) = value(i) op what `peer` sends (the last one `final`).
  auto reduceFrom = [&](int peer, int i) {
    return laneOf(detail::netStep(StepKind::kRecvReduce, peer, -1, kDoublingChannel, value(i),
                                  value(i + 1), bytes, /*final=*/i + 1 == total));
  };
  if (copyIn)
    detail::addPhase(prog, phaseOf({detail::copyLane(ref(Buf::kInput, 0), value(0), bytes)}));
  int i = 0;
  if (folds) detail::addPhase(prog, phaseOf({reduceFrom(r - 1, i++)}));
  for (int k = 0; k < rounds; ++k, ++i) {
    const int peer = fold.real(fold.virt ^ (1 << k));
    detail::addPhase(
        prog, phaseOf({sendLane(peer, value(i), bytes, kDoublingChannel), reduceFrom(peer, i)}));
  }
  if (folds)
    detail::addPhase(prog,
                     phaseOf({sendLane(r - 1, ref(Buf::kOutput, 0), bytes, kDoublingChannel)}));
  return prog;
}

Program buildDoublingAllGather(const CollArgs& a, const PlanParams& p) {
  const int n = a.nranks, r = a.rank;
  if ((n & (n - 1)) != 0) return buildDirectAllGather(a, p);
  const uint64_t es = detail::checkArgs(a, p, "doubling allgather");
  const uint64_t bytes = a.count * es;
  const uint64_t myBlock = static_cast<uint64_t>(r) * bytes;
  Program prog;
  if (detail::trivialProgram(a, bytes, 0, myBlock, "doubling", prog)) return prog;
  for (int k = 0; (1 << k) < n; ++k) {
    const int group = 1 << k;
    const int peer = r ^ group;
    const uint64_t mine = static_cast<uint64_t>(r & ~(group - 1)) * bytes;
    const uint64_t theirs = static_cast<uint64_t>(peer & ~(group - 1)) * bytes;
    const uint64_t len = static_cast<uint64_t>(group) * bytes;
    Phase phase = phaseOf({sendLane(peer, k == 0 ? ref(Buf::kInput, 0) : ref(Buf::kOutput, mine),
                                    len, kDoublingChannel),
                           recvLane(peer, ref(Buf::kOutput, theirs), len, kDoublingChannel)});
    if (k == 0 && !a.inPlace)
      detail::addLane(phase,
                      detail::copyLane(ref(Buf::kInput, 0), ref(Buf::kOutput, myBlock), bytes));
    detail::addPhase(prog, std::move(phase));
  }
  return prog;
}

Program buildDoublingBroadcast(const CollArgs& a, const PlanParams& p) {
  const uint64_t es = detail::checkArgs(a, p, "doubling broadcast");
  const uint64_t bytes = a.count * es;
  Program prog;
  if (detail::trivialProgram(a, bytes, 0, 0, "doubling", prog)) return prog;
  const int n = a.nranks;
  const int v = detail::modRank(a.rank - a.root, n);
  auto real = [&](int virt) { return (virt + a.root) % n; };
  // The lowest power of two above v's highest set bit (1 for the root).
  const int top = v == 0 ? 1 : 2 * floorPow2(v);
  if (v != 0)
    detail::addPhase(
        prog,
        phaseOf({recvLane(real(v - top / 2), ref(Buf::kOutput, 0), bytes, kDoublingChannel)}));
  const BufRef from = v == 0 ? ref(Buf::kInput, 0) : ref(Buf::kOutput, 0);
  Phase fanOut;
  for (int step = floorPow2(n - 1); step >= top; step /= 2)  // the farthest child first
    if (v + step < n)
      detail::addLane(fanOut, sendLane(real(v + step), from, bytes, kDoublingChannel));
  if (v == 0 && !a.inPlace)
    detail::addLane(fanOut, detail::copyLane(ref(Buf::kInput, 0), ref(Buf::kOutput, 0), bytes));
  if (!fanOut.lanes.empty()) detail::addPhase(prog, std::move(fanOut));
  return prog;
}

}  // namespace grove::plan

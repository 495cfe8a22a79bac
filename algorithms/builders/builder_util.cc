#include "algorithms/builders/builder_util.h"

#include <algorithm>
#include <cmath>

#include "algorithms/builders/builders.h"
#include "base/dtype.h"
#include "base/error.h"
#include "ir/step_traits.h"

namespace grove::plan {

uint64_t messageBytes(const CollArgs& a) {
  uint64_t bytes = a.count * dtypeSize(a.dtype);
  switch (a.coll) {
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kGather:
    case Coll::kScatter:
    case Coll::kAlltoAll: return bytes * static_cast<uint64_t>(std::max(a.nranks, 1));
    default: return bytes;
  }
}

namespace detail {

namespace {

bool isRooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}

bool isReducing(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

}  // namespace

uint64_t checkArgs(const CollArgs& a, const PlanParams& p, const char* who) {
  const std::string w = std::string(who) + ": ";
  if (a.nranks < 1) throwInvalidArgument(w + "nranks " + std::to_string(a.nranks) + " < 1");
  if (a.rank < 0 || a.rank >= a.nranks)
    throwInvalidArgument(w + "rank " + std::to_string(a.rank) + " out of range [0," +
                         std::to_string(a.nranks) + ")");
  if (isRooted(a.coll) && (a.root < 0 || a.root >= a.nranks))
    throwInvalidArgument(w + "root " + std::to_string(a.root) + " out of range [0," +
                         std::to_string(a.nranks) + ")");
  if (!dtypeValid(a.dtype))
    throwInvalidArgument(w + "invalid data type " + std::to_string(static_cast<int>(a.dtype)));
  if (isReducing(a.coll) && !opValid(a.op))
    throwInvalidArgument(w + "invalid reduction op " + std::to_string(static_cast<int>(a.op)));
  if (p.nChannels < 1 || p.nChannels > kP2PChannel)
    throwInvalidArgument(w + "nChannels " + std::to_string(p.nChannels) + " out of range [1," +
                         std::to_string(kP2PChannel) + "]");
  if (p.chunkBytes == 0) throwInvalidArgument(w + "chunkBytes must be > 0");
  const uint64_t es = dtypeSize(a.dtype);
  // count * es * nranks must fit comfortably in 64 bits.
  const uint64_t limit = (uint64_t{1} << 62) / es / static_cast<uint64_t>(a.nranks);
  if (a.count > limit) throwInvalidArgument(w + "count " + std::to_string(a.count) + " too large");
  return es;
}

Span evenSplit(uint64_t total, int parts, int i) {
  const uint64_t n = static_cast<uint64_t>(parts), k = static_cast<uint64_t>(i);
  const uint64_t base = total / n, rem = total % n;
  return Span{k * base + std::min(k, rem), base + (k < rem ? 1 : 0)};
}

std::vector<Span> rateSplit(uint64_t total, const std::vector<double>& rates, const char* who) {
  if (rates.empty()) throwInvalidArgument(std::string(who) + ": no rings or trees to split over");
  long double sum = 0;
  for (double r : rates) {
    if (!std::isfinite(r) || r < 0)
      throwInvalidArgument(std::string(who) + ": rate " + std::to_string(r) +
                           " is not a finite non-negative number");
    sum += r;
  }
  std::vector<Span> out(rates.size());
  const int parts = static_cast<int>(rates.size());
  if (sum <= 0) {
    for (int i = 0; i < parts; ++i) out[i] = evenSplit(total, parts, i);
    return out;
  }
  // Share i ends at round(total * (rates[0] + ... + rates[i]) / sum): the
  // boundaries only grow, and the last one is exactly `total`.
  long double cum = 0;
  uint64_t start = 0;
  for (int i = 0; i < parts; ++i) {
    cum += rates[i];
    uint64_t end =
        i == parts - 1 ? total : static_cast<uint64_t>(std::llroundl(total * (cum / sum)));
    end = std::clamp(end, start, total);
    out[i] = Span{start, end - start};
    start = end;
  }
  return out;
}

uint64_t chunkElems(const PlanParams& p, uint64_t elemSize) {
  return std::max<uint64_t>(1, p.chunkBytes / elemSize);
}

Span loopChunk(uint64_t loopElems, uint64_t chunk, int nranks, int k) {
  const uint64_t n = static_cast<uint64_t>(nranks);
  if (loopElems == n * chunk) return Span{static_cast<uint64_t>(k) * chunk, chunk};
  return evenSplit(loopElems, nranks, k);
}

Step netStep(StepKind kind, int recvPeer, int sendPeer, int channel, BufRef src, BufRef dst,
             uint64_t bytes, bool final) {
  Step s;
  s.kind = kind;
  s.final = final;
  s.recvPeer = stepReceives(kind) ? recvPeer : -1;
  s.sendPeer = stepSends(kind) ? sendPeer : -1;
  s.channel = channel;
  if (stepReadsSrc(kind)) s.src = src;
  if (stepWritesDst(kind)) s.dst = dst;
  s.bytes = bytes;
  return s;
}

Step copyStep(BufRef src, BufRef dst, uint64_t bytes) {
  return netStep(StepKind::kCopy, -1, -1, 0, src, dst, bytes);
}

Step reduceStep(BufRef src, BufRef dst, uint64_t bytes, bool final) {
  return netStep(StepKind::kReduce, -1, -1, 0, src, dst, bytes, final);
}

Lane laneOf(Step step) {
  Lane lane;
  lane.steps.push_back(step);
  return lane;
}

Lane sendLane(int peer, BufRef src, uint64_t bytes, int channel) {
  return laneOf(netStep(StepKind::kSend, -1, peer, channel, src, {}, bytes));
}

Lane recvLane(int peer, BufRef dst, uint64_t bytes, int channel) {
  return laneOf(netStep(StepKind::kRecv, peer, -1, channel, {}, dst, bytes));
}

Lane copyLane(BufRef src, BufRef dst, uint64_t bytes) { return laneOf(copyStep(src, dst, bytes)); }

Phase phaseOf(std::vector<Lane> lanes) {
  Phase phase;
  for (Lane& lane : lanes) addLane(phase, std::move(lane));
  return phase;
}

void addLane(Phase& phase, Lane lane) {
  if (!lane.steps.empty()) phase.lanes.push_back(std::move(lane));
}

void addRoute(Program& program, int peer, int channel, bool send, const std::vector<int>& links) {
  if (links.empty() || peer < 0) return;
  for (const LinkRoute& r : program.routes)
    if (r.peer == peer && r.channel == channel && r.send == send) return;
  program.routes.push_back(LinkRoute{peer, channel, send, links});
}

void addPhase(Program& program, Phase phase) {
  if (!phase.lanes.empty()) program.phases.push_back(std::move(phase));
}

bool trivialProgram(const CollArgs& a, uint64_t bytes, uint64_t inOffset, uint64_t outOffset,
                    const char* algo, Program& prog) {
  if (a.nranks == 1) {
    prog = selfCopyProgram(a, bytes, inOffset, outOffset, algo);
    return true;
  }
  prog = Program();
  prog.algo = algo;
  return bytes == 0;
}

Program selfCopyProgram(const CollArgs& a, uint64_t bytes, uint64_t inOffset, uint64_t outOffset,
                        const char* algo) {
  Program prog;
  prog.algo = algo;
  if (a.inPlace || bytes == 0) return prog;
  Phase phase;
  Lane lane;
  lane.steps.push_back(copyStep(ref(Buf::kInput, inOffset), ref(Buf::kOutput, outOffset), bytes));
  addLane(phase, std::move(lane));
  addPhase(prog, std::move(phase));
  return prog;
}

}  // namespace detail
}  // namespace grove::plan

#include "ir/schedule.h"

#include <algorithm>
#include <sstream>

#include "ir/step_traits.h"

namespace grove::plan {

const char* bufName(Buf b) {
  switch (b) {
    case Buf::kInput: return "in";
    case Buf::kOutput: return "out";
    case Buf::kScratch: return "scratch";
    case Buf::kExtra: return "extra";
  }
  return "invalid";
}

namespace {

std::string refText(const BufRef& r) {
  std::string s = bufName(r.buf);
  if (r.buf == Buf::kExtra) s += "[" + std::to_string(r.index) + "]";
  return s + "+" + std::to_string(r.offset);
}

}  // namespace

std::string describe(const Step& s) {
  std::ostringstream o;
  o << stepKindName(s.kind);
  if (!stepIsLocal(s.kind)) {
    o << " ";
    if (stepFansIn(s)) {
      o << "{";
      forEachRecvPeer(s, [&, first = true](int peer) mutable {
        o << (first ? "" : ",") << peer;
        first = false;
      });
      o << "}->";
    } else if (stepReceives(s.kind)) {
      o << s.recvPeer << "->";
    }
    o << "[me]";
    if (stepFansOut(s)) {
      o << "->{";
      forEachSendPeer(s, [&, first = true](int peer) mutable {
        o << (first ? "" : ",") << peer;
        first = false;
      });
      o << "}";
    } else if (stepSends(s.kind)) {
      o << "->" << s.sendPeer;
    }
    o << " ch" << s.channel;
  }
  o << " src=" << (stepReadsSrc(s.kind) ? refText(s.src) : "-");
  o << " dst=" << (stepWritesDst(s.kind) ? refText(s.dst) : "-");
  o << " " << s.bytes << "B";
  if (s.final) o << " final";
  // Extra peers that sendPeerCount does not see (validatePrograms rejects them): show them.
  int used = 0;
  for (int32_t p : s.moreSendPeers) used += p >= 0 ? 1 : 0;
  if (used != std::max(sendPeerCount(s) - 1, 0)) o << " moreSendPeers(malformed)";
  used = 0;
  for (int32_t p : s.moreRecvPeers) used += p >= 0 ? 1 : 0;
  if (used != std::max(recvPeerCount(s) - 1, 0)) o << " moreRecvPeers(malformed)";
  return o.str();
}

std::string describe(const Program& p) {
  std::ostringstream o;
  o << "program algo=" << (p.algo.empty() ? "?" : p.algo) << " scratch=" << p.scratchBytes
    << "B phases=" << p.phases.size() << "\n";
  for (size_t ph = 0; ph < p.phases.size(); ++ph) {
    const Phase& phase = p.phases[ph];
    o << "  phase " << ph << ": " << phase.lanes.size() << " lane(s)\n";
    for (size_t l = 0; l < phase.lanes.size(); ++l) {
      const Lane& lane = phase.lanes[l];
      o << "    lane " << l << ": " << lane.steps.size() << " step(s)\n";
      for (size_t i = 0; i < lane.steps.size(); ++i)
        o << "      [" << i << "] " << describe(lane.steps[i]) << "\n";
    }
  }
  return o.str();
}

}  // namespace grove::plan

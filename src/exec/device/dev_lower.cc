// Lowering a plan::Program to its device form (see dev_program.h).
//
// How it works: one walk over phases, lanes and steps. Zero-byte steps are
// dropped (no bytes, no padding: the host executor skips them too), and so
// are lanes left without steps and phases left without lanes. Each step's
// peers become indices into the send and receive ring tables, assigned in
// order of first use: key (peer, channel, route) -> index, so the executor
// binds sendKeys[i] / recvKeys[i] to ring i. Buffer references become slots
// (input 0, output 1, scratch 2, extra i at 3 + i) plus an offset. The
// checks are the host runner's that do not depend on the call's data type
// (a partial element is checked by the interpreter, which knows it): no step
// writes the input, none reaches past the scratch size, every used peer is a
// rank, and no two lanes of one phase share a ring (their bytes would
// interleave unpredictably). With LowerOptions, a lane of one long local
// step becomes several lanes, one piece of the step each (addLane).
#include <algorithm>
#include <sstream>
#include <string>

#include "base/error.h"
#include "exec/device/dev_program.h"
#include "ir/step_traits.h"

namespace grove::exec::dev {
namespace {

using plan::StepKind;
using transport::LinkKey;

/// Index of key in keys, appended on first use.
uint16_t ringIndex(std::vector<LinkKey>& keys, const LinkKey& key) {
  auto it = std::find(keys.begin(), keys.end(), key);
  if (it != keys.end()) return static_cast<uint16_t>(it - keys.begin());
  if (keys.size() >= 0xffff) throwInternalError("device lowering: more than 65535 rings");
  keys.push_back(key);
  return static_cast<uint16_t>(keys.size() - 1);
}

std::string where(const plan::Step& s, size_t phase, size_t lane, size_t index) {
  return "device lowering: phase " + std::to_string(phase) + " lane " + std::to_string(lane) +
         " step " + std::to_string(index) + " (" + plan::stepKindName(s.kind) + " of " +
         std::to_string(s.bytes) + " B on channel " + std::to_string(s.channel) + ")";
}

class Lowerer {
 public:
  Lowerer(const plan::Program& program, const RouteFn& routeOf, const LowerOptions& options)
      : program_(program), routeOf_(routeOf), options_(options) {}

  DevProgram run();

 private:
  DevStep lowerStep(const plan::Step& s, size_t phase, size_t lane, size_t index);
  uint8_t slotOf(const plan::BufRef& ref, bool write, const plan::Step& s, const std::string& at);
  LinkKey keyOf(int peer, int channel, bool send) const {
    return LinkKey{peer, channel, routeOf_ ? routeOf_(peer, channel, send) : 0u};
  }
  void checkPhaseRings(const DevPhase& ph, size_t phase) const;
  uint32_t piecesOf(const DevStep& d) const;
  void addLane(uint32_t begin);

  const plan::Program& program_;
  const RouteFn& routeOf_;
  const LowerOptions options_;
  DevProgram out_;
  uint32_t slots_ = 3;
};

uint8_t Lowerer::slotOf(const plan::BufRef& ref, bool write, const plan::Step& s,
                        const std::string& at) {
  switch (ref.buf) {
    case plan::Buf::kInput:
      if (write) throwInternalError(at + ": a step writes the input buffer");
      return kSlotInput;
    case plan::Buf::kOutput: return kSlotOutput;
    case plan::Buf::kScratch:
      if (ref.offset + s.bytes > program_.scratchBytes) {
        throwInternalError(at + ": step reaches past the scratch buffer (" +
                           std::to_string(ref.offset + s.bytes) + " > " +
                           std::to_string(program_.scratchBytes) + " bytes)");
      }
      return kSlotScratch;
    case plan::Buf::kExtra:
      if (ref.index >= static_cast<uint32_t>(kMaxSlots - kSlotExtra0)) {
        throwInternalError(at + ": extra buffer " + std::to_string(ref.index) + " (at most " +
                           std::to_string(kMaxSlots - kSlotExtra0) + " extra buffers)");
      }
      slots_ = std::max(slots_, static_cast<uint32_t>(kSlotExtra0 + ref.index + 1));
      return static_cast<uint8_t>(kSlotExtra0 + ref.index);
  }
  throwInternalError(at + ": unknown buffer");
}

DevStep Lowerer::lowerStep(const plan::Step& s, size_t phase, size_t lane, size_t index) {
  const std::string at = where(s, phase, lane, index);
  if (static_cast<uint8_t>(s.kind) > static_cast<uint8_t>(StepKind::kReduce))
    throwInternalError(at + ": unknown step kind");
  DevStep d;
  d.kind = static_cast<uint8_t>(s.kind);
  d.final = s.final ? 1 : 0;
  d.bytes = s.bytes;
  const int nSend = plan::sendPeerCount(s), nRecv = plan::recvPeerCount(s);
  if (nSend > kMaxStepLinks || nRecv > kMaxStepLinks)
    throwInternalError(at + ": fan-out or fan-in wider than " + std::to_string(kMaxStepLinks));
  for (int k = 0; k < nSend; ++k) {
    const int peer = plan::sendPeerAt(s, k);
    if (peer < 0) throwInternalError(at + ": sends to no rank");
    d.send[k] = ringIndex(out_.sendKeys, keyOf(peer, s.channel, true));
  }
  for (int k = 0; k < nRecv; ++k) {
    const int peer = plan::recvPeerAt(s, k);
    if (peer < 0) throwInternalError(at + ": receives from no rank");
    d.recv[k] = ringIndex(out_.recvKeys, keyOf(peer, s.channel, false));
  }
  d.nSend = static_cast<uint8_t>(nSend);
  d.nRecv = static_cast<uint8_t>(nRecv);
  if (plan::stepReadsSrc(s.kind)) {
    d.srcSlot = slotOf(s.src, false, s, at);
    d.srcOff = s.src.offset;
  }
  if (plan::stepWritesDst(s.kind)) {
    d.dstSlot = slotOf(s.dst, true, s, at);
    d.dstOff = s.dst.offset;
  }
  return d;
}

// Two lanes of one phase on one ring would interleave their bytes.
void Lowerer::checkPhaseRings(const DevPhase& ph, size_t phase) const {
  std::vector<std::pair<uint32_t, uint32_t>> users;  // (ring id: send i or 0x10000 + recv i, lane)
  for (uint32_t l = ph.begin; l < ph.end; ++l) {
    const DevLane& ln = out_.lanes[l];
    for (uint32_t i = ln.begin; i < ln.end; ++i) {
      const DevStep& d = out_.steps[i];
      uint32_t rings[2 * kMaxStepLinks];
      uint32_t n = 0;
      for (uint32_t k = 0; k < d.nSend; ++k) rings[n++] = d.send[k];
      for (uint32_t k = 0; k < d.nRecv; ++k) rings[n++] = 0x10000u + d.recv[k];
      for (uint32_t k = 0; k < n; ++k) {
        auto it = std::find_if(users.begin(), users.end(),
                               [&](const auto& u) { return u.first == rings[k]; });
        if (it == users.end()) {
          users.emplace_back(rings[k], l);
        } else if (it->second != l) {
          const bool send = rings[k] < 0x10000u;
          const LinkKey& key = send ? out_.sendKeys[rings[k]] : out_.recvKeys[rings[k] - 0x10000u];
          throwInternalError("device lowering: phase " + std::to_string(phase) + " uses the ring " +
                             (send ? "to" : "from") + " rank " + std::to_string(key.peer) + " ch " +
                             std::to_string(key.channel) + " in two lanes (lanes " +
                             std::to_string(it->second - ph.begin) + " and " +
                             std::to_string(l - ph.begin) + ")");
        }
      }
    }
  }
}

// How many lanes a lane of the one step `d` becomes (1: not cut).
uint32_t Lowerer::piecesOf(const DevStep& d) const {
  const auto kind = static_cast<StepKind>(d.kind);
  if (kind != StepKind::kCopy && kind != StepKind::kReduce) return 1;
  if (options_.localSplitBytes == 0 || options_.maxSplitLanes < 2) return 1;
  if (d.bytes < 2 * options_.localSplitBytes) return 1;
  if (d.srcSlot >= kSlotExtra0 || d.dstSlot >= kSlotExtra0) return 1;
  if (d.srcSlot == d.dstSlot && d.srcOff < d.dstOff + d.bytes && d.dstOff < d.srcOff + d.bytes)
    return 1;
  return static_cast<uint32_t>(
      std::min<uint64_t>(options_.maxSplitLanes, d.bytes / options_.localSplitBytes));
}

// Closes the lane of steps [begin, end): dropped when empty, cut into pieces
// when it is one long local step.
void Lowerer::addLane(uint32_t begin) {
  const auto end = static_cast<uint32_t>(out_.steps.size());
  if (end == begin) return;
  const uint32_t pieces = end - begin == 1 ? piecesOf(out_.steps[begin]) : 1;
  if (pieces == 1) {
    out_.lanes.push_back(DevLane{begin, end});
    return;
  }
  const DevStep whole = out_.steps[begin];
  constexpr uint64_t kAlign = 4096;
  const uint64_t piece = (whole.bytes / pieces + kAlign - 1) / kAlign * kAlign;
  out_.steps.pop_back();
  for (uint64_t off = 0; off < whole.bytes; off += piece) {
    DevStep d = whole;
    d.srcOff += off;
    d.dstOff += off;
    d.bytes = std::min(piece, whole.bytes - off);
    const auto at = static_cast<uint32_t>(out_.steps.size());
    out_.steps.push_back(d);
    out_.lanes.push_back(DevLane{at, at + 1});
  }
}

DevProgram Lowerer::run() {
  out_.algo = program_.algo;
  out_.scratchBytes = program_.scratchBytes;
  for (size_t p = 0; p < program_.phases.size(); ++p) {
    DevPhase ph;
    ph.begin = static_cast<uint32_t>(out_.lanes.size());
    const auto& lanes = program_.phases[p].lanes;
    for (size_t l = 0; l < lanes.size(); ++l) {
      const auto begin = static_cast<uint32_t>(out_.steps.size());
      for (size_t i = 0; i < lanes[l].steps.size(); ++i) {
        const plan::Step& s = lanes[l].steps[i];
        if (s.bytes == 0) continue;
        out_.steps.push_back(lowerStep(s, p, l, i));
      }
      addLane(begin);
    }
    ph.end = static_cast<uint32_t>(out_.lanes.size());
    if (ph.end == ph.begin) continue;
    checkPhaseRings(ph, out_.phases.size());
    out_.maxLanes = std::max(out_.maxLanes, ph.end - ph.begin);
    out_.phases.push_back(ph);
  }
  out_.nSlots = slots_;
  return std::move(out_);
}

const char* slotName(uint8_t slot, std::string& buf) {
  switch (slot) {
    case kSlotInput: return "in";
    case kSlotOutput: return "out";
    case kSlotScratch: return "scratch";
    default: buf = "extra" + std::to_string(slot - kSlotExtra0); return buf.c_str();
  }
}

void describeStep(std::ostringstream& os, const DevProgram& prog, const DevStep& d) {
  const auto kind = static_cast<StepKind>(d.kind);
  os << plan::stepKindName(kind);
  if (d.nRecv > 0) {
    os << " from";
    for (uint32_t k = 0; k < d.nRecv; ++k)
      os << " r" << d.recv[k] << "(rank " << prog.recvKeys[d.recv[k]].peer << ")";
  }
  if (d.nSend > 0) {
    os << " to";
    for (uint32_t k = 0; k < d.nSend; ++k)
      os << " s" << d.send[k] << "(rank " << prog.sendKeys[d.send[k]].peer << ")";
  }
  std::string buf;
  if (plan::stepReadsSrc(kind)) os << " src=" << slotName(d.srcSlot, buf) << "+" << d.srcOff;
  if (plan::stepWritesDst(kind)) os << " dst=" << slotName(d.dstSlot, buf) << "+" << d.dstOff;
  os << " " << d.bytes << "B";
  if (d.final) os << " final";
}

}  // namespace

DevProgram lowerProgram(const plan::Program& program, const RouteFn& routeOf,
                        const LowerOptions& options) {
  return Lowerer(program, routeOf, options).run();
}

std::string describe(const DevProgram& prog) {
  std::ostringstream os;
  os << "device program '" << prog.algo << "': " << prog.phases.size() << " phases, "
     << prog.lanes.size() << " lanes (at most " << prog.maxLanes << " at once), "
     << prog.steps.size() << " steps, " << prog.nSlots << " slots, scratch " << prog.scratchBytes
     << " B\n";
  auto keys = [&](const char* what, const std::vector<LinkKey>& ks) {
    os << what << ":";
    for (size_t i = 0; i < ks.size(); ++i) {
      os << " " << what[0] << i << "=rank " << ks[i].peer << " ch " << ks[i].channel;
      if (ks[i].route != 0) os << " route " << ks[i].route;
      if (i + 1 < ks.size()) os << ",";
    }
    os << "\n";
  };
  keys("sends", prog.sendKeys);
  keys("recvs", prog.recvKeys);
  for (size_t p = 0; p < prog.phases.size(); ++p) {
    os << "phase " << p << "\n";
    for (uint32_t l = prog.phases[p].begin; l < prog.phases[p].end; ++l) {
      os << "  lane " << l - prog.phases[p].begin << "\n";
      for (uint32_t i = prog.lanes[l].begin; i < prog.lanes[l].end; ++i) {
        os << "    " << i - prog.lanes[l].begin << ": ";
        describeStep(os, prog, prog.steps[i]);
        os << "\n";
      }
    }
  }
  return os.str();
}

}  // namespace grove::exec::dev

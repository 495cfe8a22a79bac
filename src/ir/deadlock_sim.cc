// Symbolic execution of all ranks' programs (byte counts only) to find
// deadlocks; see validate.h. The model follows the executors where they
// are strictest (the device interpreter's fan-out):
//
//   - a rank runs its phases in order; a phase ends when all its lanes end;
//   - in each pass, every lane of the current phase moves what it can;
//   - a step streams: it moves min(bytes left, bytes its incoming link holds,
//     free space of its outgoing link), rounded down to whole elements;
//   - every step starts at a 16-byte-aligned position of each stream it
//     touches (the padding occupies link space until the receiver skips it);
//   - a fan-out step writes the same bytes to each of its outgoing links, so
//     it moves no more than the fullest of them has room for (the host
//     executor lets each destination go at its own pace where the bytes
//     stay in a buffer, so what passes here runs there too);
//   - a fan-in step consumes the same bytes from each of its incoming links,
//     so it moves no more than the emptiest of them holds;
//   - local steps (copy, reduce) and empty steps finish at once.
//
// If a whole pass over all ranks moves nothing while some rank is
// unfinished, the programs deadlock for this link capacity.
#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "base/error.h"
#include "ir/step_traits.h"
#include "ir/validate.h"

namespace grove::plan {

namespace {

struct LinkState {
  int src = 0, dst = 0, channel = 0;
  uint64_t written = 0;   ///< stream position the sender reached
  uint64_t consumed = 0;  ///< stream position the receiver released
};

constexpr int kMaxSends = kMaxMoreSendPeers + 1;
constexpr int kMaxRecvs = kMaxMoreRecvPeers + 1;

struct LaneState {
  size_t step = 0;
  uint64_t done = 0;
  std::array<uint64_t, kMaxSends> sendStart{};
  std::array<uint64_t, kMaxRecvs> recvStart{};
  bool started = false;
};

/// Link indices of one step (-1: none).
struct StepLinks {
  std::array<int, kMaxSends> send{-1, -1, -1, -1};  ///< one per destination, used first
  int nSend = 0;
  std::array<int, kMaxRecvs> recv{-1, -1, -1, -1};  ///< one per source, used first
  int nRecv = 0;
};

class Simulator {
 public:
  Simulator(const std::vector<Program>& progs, const SimOptions& opt) : progs_(progs), opt_(opt) {
    std::map<std::tuple<int, int, int>, int> ids;
    auto linkOf = [&](int src, int dst, int ch) {
      auto [it, added] = ids.try_emplace({src, dst, ch}, static_cast<int>(links_.size()));
      if (added) links_.push_back(LinkState{src, dst, ch, 0, 0});
      return it->second;
    };
    stepLinks_.resize(progs.size());
    for (size_t r = 0; r < progs.size(); ++r) {
      for (const Phase& ph : progs[r].phases) {
        auto& perLane = stepLinks_[r].emplace_back();
        for (const Lane& lane : ph.lanes) {
          auto& perStep = perLane.emplace_back();
          for (const Step& s : lane.steps) {
            StepLinks sl;
            forEachSendPeer(s, [&](int peer) {
              sl.send[sl.nSend++] = linkOf(static_cast<int>(r), peer, s.channel);
            });
            forEachRecvPeer(s, [&](int peer) {
              sl.recv[sl.nRecv++] = linkOf(peer, static_cast<int>(r), s.channel);
            });
            perStep.push_back(sl);
          }
        }
      }
    }
    phase_.assign(progs.size(), 0);
    lanes_.resize(progs.size());
    for (size_t r = 0; r < progs.size(); ++r) resetLanes(r);
  }

  SimResult run() {
    SimResult res;
    while (true) {
      bool progress = false, unfinished = false;
      for (size_t r = 0; r < progs_.size(); ++r) {
        if (phase_[r] >= progs_[r].phases.size()) continue;
        progress |= passRank(r);
        unfinished |= phase_[r] < progs_[r].phases.size();
      }
      ++res.passes;
      if (!unfinished) break;
      if (!progress) {
        res.problem = "deadlock with link capacity " + std::to_string(opt_.linkCapacity) +
                      " B after " + std::to_string(res.passes) + " passes:\n" + blockedText();
        return res;
      }
      if (opt_.maxPasses != 0 && res.passes >= opt_.maxPasses) {
        res.problem = "gave up after " + std::to_string(res.passes) + " passes";
        return res;
      }
    }
    for (const LinkState& l : links_)
      if (l.written > l.consumed)
        res.problem += "link " + std::to_string(l.src) + "->" + std::to_string(l.dst) +
                       " channel " + std::to_string(l.channel) + ": " +
                       std::to_string(l.written - l.consumed) + " B sent but never received\n";
    res.completed = res.problem.empty();
    return res;
  }

 private:
  void resetLanes(size_t r) {
    const size_t ph = phase_[r];
    lanes_[r].assign(ph < progs_[r].phases.size() ? progs_[r].phases[ph].lanes.size() : 0,
                     LaneState{});
  }

  /// One pass over rank r's current phase; true if anything moved.
  bool passRank(size_t r) {
    const Phase& phase = progs_[r].phases[phase_[r]];
    bool moved = false, allDone = true;
    for (size_t l = 0; l < phase.lanes.size(); ++l) {
      moved |= advanceLane(r, l);
      allDone &= lanes_[r][l].step >= phase.lanes[l].steps.size();
    }
    if (allDone) {
      ++phase_[r];
      resetLanes(r);
      moved = true;
    }
    return moved;
  }

  /// Moves lane l of rank r as far as it can go now; true if anything moved.
  bool advanceLane(size_t r, size_t l) {
    const Lane& lane = progs_[r].phases[phase_[r]].lanes[l];
    LaneState& ls = lanes_[r][l];
    bool moved = false;
    while (ls.step < lane.steps.size()) {
      const Step& s = lane.steps[ls.step];
      const StepLinks& sl = stepLinks_[r][phase_[r]][l][ls.step];
      if (stepIsLocal(s.kind) || s.bytes == 0) {
        nextStep(ls);
        moved = true;
        continue;
      }
      if (!ls.started) {
        for (int i = 0; i < sl.nSend; ++i)
          ls.sendStart[i] = wireAlignUp(links_[sl.send[i]].written);
        for (int i = 0; i < sl.nRecv; ++i)
          ls.recvStart[i] = wireAlignUp(links_[sl.recv[i]].consumed);
        ls.started = true;
      }
      const uint64_t remaining = s.bytes - ls.done;
      uint64_t can = remaining;
      for (int i = 0; i < sl.nRecv; ++i) {
        const uint64_t pos = ls.recvStart[i] + ls.done, w = links_[sl.recv[i]].written;
        can = std::min(can, w > pos ? w - pos : 0);
      }
      for (int i = 0; i < sl.nSend; ++i) {
        const uint64_t used = ls.sendStart[i] + ls.done - links_[sl.send[i]].consumed;
        can = std::min(can, opt_.linkCapacity > used ? opt_.linkCapacity - used : 0);
      }
      if (can < remaining) can -= can % opt_.elemSize;
      if (can == 0) break;
      for (int i = 0; i < sl.nRecv; ++i)
        links_[sl.recv[i]].consumed = ls.recvStart[i] + ls.done + can;
      for (int i = 0; i < sl.nSend; ++i)
        links_[sl.send[i]].written = ls.sendStart[i] + ls.done + can;
      ls.done += can;
      moved = true;
      if (ls.done < s.bytes) break;
      nextStep(ls);
    }
    return moved;
  }

  static void nextStep(LaneState& ls) {
    ++ls.step;
    ls.done = 0;
    ls.started = false;
  }

  std::string linkText(int id) const {
    const LinkState& k = links_[id];
    return std::to_string(k.src) + "->" + std::to_string(k.dst) + " ch" +
           std::to_string(k.channel) + " (holds " +
           std::to_string(k.written - std::min(k.written, k.consumed)) + " B)";
  }

  std::string blockedText() const {
    std::string out;
    int shown = 0;
    for (size_t r = 0; r < progs_.size() && shown < 16; ++r) {
      if (phase_[r] >= progs_[r].phases.size()) continue;
      const Phase& phase = progs_[r].phases[phase_[r]];
      for (size_t l = 0; l < phase.lanes.size() && shown < 16; ++l) {
        const LaneState& ls = lanes_[r][l];
        if (ls.step >= phase.lanes[l].steps.size()) continue;
        const Step& s = phase.lanes[l].steps[ls.step];
        const StepLinks& sl = stepLinks_[r][phase_[r]][l][ls.step];
        out += "  rank " + std::to_string(r) + " phase " + std::to_string(phase_[r]) + " lane " +
               std::to_string(l) + " step " + std::to_string(ls.step) + " " + describe(s) + ": " +
               std::to_string(ls.done) + "/" + std::to_string(s.bytes) + " B";
        for (int i = 0; i < sl.nRecv; ++i) out += "; in " + linkText(sl.recv[i]);
        for (int i = 0; i < sl.nSend; ++i) out += "; out " + linkText(sl.send[i]);
        out += "\n";
        ++shown;
      }
    }
    return out;
  }

  const std::vector<Program>& progs_;
  const SimOptions& opt_;
  std::vector<LinkState> links_;
  std::vector<std::vector<std::vector<std::vector<StepLinks>>>>
      stepLinks_;  // [rank][phase][lane][step]
  std::vector<size_t> phase_;
  std::vector<std::vector<LaneState>> lanes_;
};

}  // namespace

SimResult simulatePrograms(const std::vector<Program>& perRank, const SimOptions& options) {
  if (options.linkCapacity == 0 || options.linkCapacity % kWireAlign != 0)
    throwInvalidArgument("simulatePrograms: link capacity must be a positive multiple of 16");
  if (options.elemSize == 0) throwInvalidArgument("simulatePrograms: element size 0");
  return Simulator(perRank, options).run();
}

void checkDeadlockFree(const std::vector<Program>& perRank, const SimOptions& options) {
  SimResult r = simulatePrograms(perRank, options);
  if (!r.completed) throwInternalError("simulatePrograms: " + r.problem);
}

}  // namespace grove::plan

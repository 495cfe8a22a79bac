// A tiny reference interpreter of schedule programs for the algorithms unit
// tests: it executes all ranks' programs on real bytes, each step atomically
// once its whole incoming message is there (links are unbounded FIFOs of
// whole steps; a fan-out step queues its result on every destination's
// link; a fan-in step waits for a message on every source link and folds
// them in order, src op r0 op r1 ...), with elements treated as little-endian unsigned integers of
// the element size and the op sum or avg (avg divides on `final` steps).
// It is independent of the host executor, so the builders are checked on
// their own; the executor harness checks them again end to end.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "ir/schedule.h"
#include "ir/step_traits.h"

namespace grove::plan::testing {

/// One rank's memory: input and output may alias (in-place calls).
struct RankMemory {
  std::vector<uint8_t> arenaIn, arenaOut;  ///< arenaIn unused when in == out arena
  uint8_t* in = nullptr;
  uint8_t* out = nullptr;
  std::vector<uint8_t> scratch;
  std::vector<std::vector<uint8_t>> extra;
};

/// Runs the programs; throws std::runtime_error on a stuck or inconsistent run.
class Interpreter {
 public:
  Interpreter(const std::vector<Program>& progs, std::vector<RankMemory>& mem, uint64_t es,
              bool avg)
      : progs_(progs), mem_(mem), es_(es), avg_(avg), n_(static_cast<int>(progs.size())) {}

  void run() {
    std::vector<size_t> phase(n_, 0);
    std::vector<std::vector<size_t>> pos(n_);
    for (int r = 0; r < n_; ++r) {
      mem_[r].scratch.assign(progs_[r].scratchBytes, 0xEE);
      if (!progs_[r].phases.empty()) pos[r].assign(progs_[r].phases[0].lanes.size(), 0);
    }
    while (true) {
      bool progress = false, unfinished = false;
      for (int r = 0; r < n_; ++r) {
        const Program& p = progs_[r];
        if (phase[r] >= p.phases.size()) continue;
        const Phase& ph = p.phases[phase[r]];
        bool allDone = true;
        for (size_t l = 0; l < ph.lanes.size(); ++l) {
          while (pos[r][l] < ph.lanes[l].steps.size() && tryStep(r, ph.lanes[l].steps[pos[r][l]])) {
            ++pos[r][l];
            progress = true;
          }
          allDone &= pos[r][l] >= ph.lanes[l].steps.size();
        }
        if (allDone) {
          ++phase[r];
          pos[r].assign(phase[r] < p.phases.size() ? p.phases[phase[r]].lanes.size() : 0, 0);
          progress = true;
        }
        unfinished |= phase[r] < p.phases.size();
      }
      if (!unfinished) break;
      if (!progress) throw std::runtime_error("interpreter: programs are stuck");
    }
    for (const auto& [key, q] : queues_)
      if (!q.empty()) throw std::runtime_error("interpreter: unreceived message");
  }

 private:
  using Key = std::tuple<int, int, int>;

  uint8_t* addr(int r, const BufRef& ref) {
    RankMemory& m = mem_[r];
    switch (ref.buf) {
      case Buf::kInput: return m.in + ref.offset;
      case Buf::kOutput: return m.out + ref.offset;
      case Buf::kScratch: return m.scratch.data() + ref.offset;
      case Buf::kExtra: return m.extra.at(ref.index).data() + ref.offset;
    }
    return nullptr;
  }

  uint64_t load(const uint8_t* p) const {
    uint64_t v = 0;
    std::memcpy(&v, p, es_);
    return v;
  }
  void store(uint8_t* p, uint64_t v) const { std::memcpy(p, &v, es_); }
  uint64_t combine(uint64_t a, uint64_t b, bool final) const {
    uint64_t mask = es_ == 8 ? ~uint64_t{0} : ((uint64_t{1} << (8 * es_)) - 1);
    uint64_t v = (a + b) & mask;
    return (avg_ && final) ? v / static_cast<uint64_t>(n_) : v;
  }

  bool tryStep(int r, const Step& s) {
    std::vector<std::vector<uint8_t>> ins;  // one message per source, recvPeer first
    bool ready = true;
    forEachRecvPeer(s, [&](int peer) {
      ready = ready && !queues_[Key{peer, r, s.channel}].empty();
    });
    if (!ready) return false;
    forEachRecvPeer(s, [&](int peer) {
      auto& q = queues_[Key{peer, r, s.channel}];
      ins.push_back(std::move(q.front()));
      q.pop_front();
      if (ins.back().size() != s.bytes) throw std::runtime_error("interpreter: size mismatch");
    });
    const std::vector<uint8_t> incoming = ins.empty() ? std::vector<uint8_t>{} : ins[0];
    std::vector<uint8_t> result(s.bytes);
    const uint8_t* src = stepReadsSrc(s.kind) ? addr(r, s.src) : nullptr;
    uint8_t* dst = stepWritesDst(s.kind) ? addr(r, s.dst) : nullptr;
    switch (s.kind) {
      case StepKind::kSend:
      case StepKind::kCopy: std::memcpy(result.data(), src, s.bytes); break;
      case StepKind::kRecv:
      case StepKind::kRecvCopySend: result = incoming; break;
      case StepKind::kReduce:
        for (uint64_t i = 0; i < s.bytes; i += es_)
          store(result.data() + i, combine(load(dst + i), load(src + i), s.final));
        break;
      default:  // the recv-reduce kinds: fold the sources in order, final at the last
        for (uint64_t i = 0; i < s.bytes; i += es_) {
          uint64_t v = load(src + i);
          for (size_t k = 0; k < ins.size(); ++k)
            v = combine(v, load(ins[k].data() + i), s.final && k + 1 == ins.size());
          store(result.data() + i, v);
        }
    }
    if (dst != nullptr) std::memmove(dst, result.data(), s.bytes);
    forEachSendPeer(s, [&](int peer) { queues_[Key{r, peer, s.channel}].push_back(result); });
    return true;
  }

  const std::vector<Program>& progs_;
  std::vector<RankMemory>& mem_;
  uint64_t es_;
  bool avg_;
  int n_;
  std::map<Key, std::deque<std::vector<uint8_t>>> queues_;
};

}  // namespace grove::plan::testing

// Simulations remembered by what they simulate; see sim_memo.h.
//
// How it works: the programs are written out field by field (every phase,
// lane and step with its kind, peers, channel, buffers and bytes; the
// planned routes; the scratch size; no padding bytes) with the simulator's
// knobs, and the text is hashed twice with SipHash-2-4 under two fixed keys:
// 128 bits name a simulation, so two different ones share a name with
// probability about 2^-128 per pair. Writing and hashing cost about a
// hundredth of the simulation. A prediction is asked for again where
// callers work out the same call by different roads: the size table's line
// above 256 MiB simulates the 64 and 256 MiB calls the table has just
// predicted (a tree plan's set for the larger size is often the same set),
// and grove-plan predicts the selected call after the table predicted it.
#include "algorithms/cost/sim_memo.h"

#include <cstring>
#include <string>

#include "base/siphash.h"

namespace grove::plan {

namespace {

class Writer {
 public:
  template <typename T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    text_.append(b, sizeof(T));
  }
  void put(const BufRef& r) {
    put(static_cast<uint8_t>(r.buf));
    put(r.index);
    put(r.offset);
  }
  void put(const Step& s) {
    put(static_cast<uint8_t>(s.kind));
    put(static_cast<uint8_t>(s.final));
    put(s.sendPeer);
    put(s.recvPeer);
    for (int32_t p : s.moreSendPeers) put(p);
    for (int32_t p : s.moreRecvPeers) put(p);
    put(s.channel);
    put(s.src);
    put(s.dst);
    put(s.bytes);
  }
  void put(const Program& prog) {
    put(static_cast<uint64_t>(prog.phases.size()));
    for (const Phase& ph : prog.phases) {
      put(static_cast<uint64_t>(ph.lanes.size()));
      for (const Lane& lane : ph.lanes) {
        put(static_cast<uint64_t>(lane.steps.size()));
        for (const Step& s : lane.steps) put(s);
      }
    }
    put(prog.scratchBytes);
    put(static_cast<uint64_t>(prog.routes.size()));
    for (const LinkRoute& r : prog.routes) {
      put(r.peer);
      put(r.channel);
      put(static_cast<uint8_t>(r.send));
      put(static_cast<uint64_t>(r.links.size()));
      for (int l : r.links) put(l);
    }
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

std::pair<uint64_t, uint64_t> keyOf(const std::vector<Program>& programs, const SimParams& p) {
  Writer w;
  w.put(p.stepOverheadUs);
  w.put(p.localGBps);
  w.put(p.mergeShare);
  w.put(static_cast<uint64_t>(programs.size()));
  for (const Program& prog : programs) w.put(prog);
  const std::string& t = w.text();
  constexpr SipKey kFirst{0x67726f7665736d31ull, 0x73696d756c617465ull};
  constexpr SipKey kSecond{0x6d656d6f2d6b6579ull, 0x7365636f6e642121ull};
  return {sipHash24(kFirst, t.data(), t.size()), sipHash24(kSecond, t.data(), t.size())};
}

}  // namespace

FlowSimResult SimMemo::simulate(const std::vector<Program>& programs, const SimParams& p) {
  const std::pair<uint64_t, uint64_t> key = keyOf(programs, p);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = seen_.find(key);
    if (it != seen_.end()) {
      ++hits_;
      return it->second;
    }
  }
  FlowSimResult r = plan::simulate(g_, programs, p);
  std::lock_guard<std::mutex> lock(mu_);
  ++misses_;
  return seen_.emplace(key, std::move(r)).first->second;
}

int SimMemo::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int SimMemo::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace grove::plan

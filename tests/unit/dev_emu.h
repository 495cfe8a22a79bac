// The device-emulation test harness: lowers every rank's programs, connects
// them over DevRings in host memory (one ring per directed (from, to,
// channel, route) stream), runs each rank's launch with runEmulated on a
// thread of its own, and compares every byte of every rank's buffers with
// the host executor's result for the same programs over loopback links.
// A rank's launch runs in the interpreter (runEmulated) or as a stream tape
// (exec/device/stream_tape.h, runTapeEmulated), as `gRunner` says.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <initializer_list>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithm_combos.h"
#include "algorithms/builders/builders.h"
#include "base/dtype.h"
#include "exec/device/emulate.h"
#include "exec/device/stream_emulate.h"
#include "exec/device/stream_tape.h"
#include "exec_check.h"
#include "unit/harness/thread_ranks.h"

namespace grove::exec::dev::testing {

using plan::testing::BuildFn;
using plan::testing::CallRun;
using plan::testing::Memory;

/// Every ring of one emulated job, by (from, to, channel, route).
class EmuFabric {
 public:
  explicit EmuFabric(uint64_t capacity) : capacity_(capacity) {}

  /// The ring carrying from -> to on (channel, route), made on first use.
  DevRing ring(int from, int to, int channel, uint32_t route) {
    const auto key = std::make_tuple(from, to, channel, route);
    auto it = rings_.find(key);
    if (it == rings_.end()) it = rings_.emplace(key, arena_.add(capacity_)).first;
    return it->second;
  }

 private:
  uint64_t capacity_;
  HostRingArena arena_;
  std::map<std::tuple<int, int, int, uint32_t>, DevRing> rings_;
};

/// One rank's lowered program bound to its rings and buffers.
struct EmuCall {
  DevProgram program;
  std::vector<DevRing> sends, recvs;
  DevCall call;
};

/// Lowers `p` for `rank` (with `lower`), binds its rings in `fabric` and its buffers.
inline void bindCall(EmuCall& c, const plan::Program& p, int rank, EmuFabric& fabric,
                     const DevReduce& reduce, const std::vector<uint8_t*>& bufs,
                     const LowerOptions& lower = {}) {
  c.program = lowerProgram(p, {}, lower);
  for (const transport::LinkKey& k : c.program.sendKeys)
    c.sends.push_back(fabric.ring(rank, k.peer, k.channel, k.route));
  for (const transport::LinkKey& k : c.program.recvKeys)
    c.recvs.push_back(fabric.ring(k.peer, rank, k.channel, k.route));
  DevProgramView& v = c.call.program;
  v.phases = c.program.phases.data();
  v.lanes = c.program.lanes.data();
  v.steps = c.program.steps.data();
  v.sends = c.sends.data();
  v.recvs = c.recvs.data();
  v.nPhases = static_cast<uint32_t>(c.program.phases.size());
  v.maxLanes = c.program.maxLanes;
  c.call.reduce = reduce;
  for (size_t i = 0; i < bufs.size() && i < static_cast<size_t>(kMaxSlots); ++i)
    c.call.bufs[i] = bufs[i];
}

/// How the harness runs a rank's launch.
struct Runner {
  enum Kind { kInterpreter, kTape, kMixed } kind = kInterpreter;  ///< kMixed: odd ranks tapes
  uint64_t pieceBytes = kTapePieceBytes;                          ///< tape pieces at most
  bool tape(size_t rank) const { return kind == kTape || (kind == kMixed && rank % 2 == 1); }
};
/// The runner of the tests in this process (the stream tape tests set it).
inline Runner gRunner;

/// Runs one rank's launch as `gRunner` says for `rank`: a stream tape (a
/// fresh builder) or the interpreter.
inline void runLaunch(size_t rank, const std::vector<DevCall>& launch, DevControl& ctl) {
  if (gRunner.tape(rank)) {
    TapeBuilder builder(gRunner.pieceBytes);
    LaunchTape tape;
    builder.build(launch.data(), launch.size(), tape);
    runTapeEmulated(tape, ctl);
  } else {
    runEmulated(launch.data(), launch.size(), ctl);
  }
}

/// Runs calls[r] (rank r's launch) on one thread per rank; returns each
/// rank's DevControl (deadline timeoutNs).
inline std::vector<DevControl> runRanks(std::vector<std::vector<EmuCall>>& calls,
                                        uint64_t timeoutNs) {
  std::vector<DevControl> ctl(calls.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < calls.size(); ++r) {
    ctl[r].timeoutNs = timeoutNs;
    threads.emplace_back([&calls, &ctl, r] {
      std::vector<DevCall> launch;
      for (EmuCall& c : calls[r]) launch.push_back(c.call);
      runLaunch(r, launch, ctl[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  return ctl;
}

/// p rebased from memory `from` to the same offset in `to`.
inline uint8_t* rebase(const uint8_t* p, const Memory& from, Memory& to) {
  if (p == nullptr) return nullptr;
  if (!from.a.empty() && p >= from.a.data() && p <= from.a.data() + from.a.size())
    return to.a.data() + (p - from.a.data());
  return to.b.data() + (p - from.b.data());
}

/// Overwrites rank r's input with pseudo-random values (non-exact for the
/// float types, so the order of every rounding shows in the bits).
inline void randomInput(const CallRun& x, int r, Memory& m) {
  const uint64_t es = dtypeSize(x.dtype);
  const uint64_t n = plan::bufferSizesFor(plan::testing::argsOf(x, r)).input / es;
  std::mt19937 rng(1234u + static_cast<unsigned>(r) * 77u + static_cast<unsigned>(x.count));
  std::uniform_real_distribution<double> real(-2.0, 2.0);
  std::uniform_int_distribution<int> small(-50, 50);
  for (uint64_t i = 0; i < n; ++i) {
    const double v = dtypeIsFloat(x.dtype) ? real(rng) : small(rng);
    plan::testing::setElem(x.dtype, m.in, i, v);
  }
}

/// Index of the first differing byte, or -1.
inline long firstDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<long>(i);
  return -1;
}

/// Runs a group of calls (xs[i] built by builds[i]; every rank runs them in
/// order over the same links) with the host executor (loopback links of
/// `capacity`) and with the device emulation (one launch per rank, rings of
/// `capacity`, programs lowered with `lower`), and expects every byte of
/// every rank's buffers to agree.
inline void compareGroup(const std::vector<CallRun>& xs, const std::vector<BuildFn>& builds,
                         uint64_t capacity, const LowerOptions& lower = {}) {
  std::string text = "ring " + std::to_string(capacity);
  for (const CallRun& x : xs) text += "; " + plan::testing::runText(x);
  SCOPED_TRACE(text);
  const int n = xs[0].nranks;
  const size_t k = xs.size();
  std::vector<std::vector<plan::Program>> progs(k);  // [call][rank]
  std::vector<std::vector<Memory>> host(k, std::vector<Memory>(n)), dev = host;
  for (size_t c = 0; c < k; ++c)
    for (int r = 0; r < n; ++r) {
      progs[c].push_back(builds[c](plan::testing::argsOf(xs[c], r)));
      Memory& h = host[c][r];
      plan::testing::layout(xs[c], r, h);
      randomInput(xs[c], r, h);
      h.scratch.assign(progs[c][r].scratchBytes, 0);
      Memory& d = dev[c][r];
      d.a = h.a;
      d.b = h.b;
      d.scratch = h.scratch;
      d.in = rebase(h.in, h, d);
      d.out = rebase(h.out, h, d);
    }
  harness::ThreadRanksOptions options;
  options.bufferBytes = capacity;
  options.timeoutSec = 30.0;
  ASSERT_NO_THROW(harness::runOnThreadRanks(n, options, [&](harness::ThreadRank& tr) {
    const int r = tr.rank();
    for (size_t c = 0; c < k; ++c) {
      Memory& h = host[c][r];
      tr.run(progs[c][r], exec::Buffers{h.in, h.out, h.scratch.data(), {}},
             exec::ReduceSpec{xs[c].dtype, xs[c].op, n});
    }
  }));
  EmuFabric fabric(capacity);
  std::vector<std::vector<EmuCall>> calls(n, std::vector<EmuCall>(k));
  for (int r = 0; r < n; ++r)
    for (size_t c = 0; c < k; ++c) {
      Memory& d = dev[c][r];
      bindCall(calls[r][c], progs[c][r], r, fabric, DevReduce{xs[c].dtype, xs[c].op, n},
               {d.in, d.out, d.scratch.empty() ? nullptr : d.scratch.data()}, lower);
    }
  const std::vector<DevControl> ctl = runRanks(calls, 30'000'000'000ull);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(ctl[r].status, kDevOk) << "rank " << r << " failed in call " << ctl[r].failedCall
                                     << " phase " << ctl[r].failedPhase << " lane "
                                     << ctl[r].failedLane << " step " << ctl[r].failedStep << "\n"
                                     << describe(calls[r][ctl[r].failedCall].program);
    for (size_t c = 0; c < k; ++c) {
      ASSERT_EQ(firstDiff(dev[c][r].a, host[c][r].a), -1)
          << "call " << c << " rank " << r << " buffer a";
      ASSERT_EQ(firstDiff(dev[c][r].b, host[c][r].b), -1)
          << "call " << c << " rank " << r << " buffer b";
    }
  }
}

/// A builder of `algo` with params `p` (and topology plans, for the planned algorithms).
inline BuildFn builder(plan::Algo algo, const plan::PlanParams& p,
                       plan::TopoPlans* plans = nullptr) {
  return [algo, p, plans](const plan::CollArgs& a) { return plan::build(algo, a, p, plans); };
}

/// Params with `channels` channels and 1 KiB chunks (rings of 4 KiB wrap often).
inline plan::PlanParams smallChunks(int channels) {
  plan::PlanParams p;
  p.nChannels = channels;
  p.chunkBytes = 1024;
  return p;
}

/// One phase, one lane per entry of `lanes`.
inline plan::Program program(std::vector<std::vector<plan::Step>> lanes) {
  plan::Program p;
  p.phases.resize(1);
  for (auto& steps : lanes) p.phases[0].lanes.push_back(plan::Lane{std::move(steps)});
  return p;
}

/// Rank 0's launch of `progs` (one call each) over `fabric`: 16 KiB of
/// input (every byte 7) and of output (zeros), run as gRunner says.
struct RankLaunch {
  std::vector<uint8_t> input = std::vector<uint8_t>(1 << 14, 7);
  std::vector<uint8_t> output = std::vector<uint8_t>(1 << 14, 0);
  std::vector<EmuCall> calls;
  DevControl ctl;

  RankLaunch(const std::vector<plan::Program>& progs, EmuFabric& fabric, uint64_t timeoutNs,
             int32_t dtype = groveFloat32) {
    calls.resize(progs.size());
    for (size_t c = 0; c < progs.size(); ++c)
      bindCall(calls[c], progs[c], 0, fabric, DevReduce{dtype, groveSum, 2},
               {input.data(), output.data(), nullptr});
    ctl.timeoutNs = timeoutNs;
  }
  /// The launch's calls.
  std::vector<DevCall> devCalls() const {
    std::vector<DevCall> launch;
    for (const EmuCall& c : calls) launch.push_back(c.call);
    return launch;
  }
  void run() { runLaunch(0, devCalls(), ctl); }
  void expectFailed(uint32_t status, uint32_t call, uint32_t lane, uint32_t stepIndex) const {
    EXPECT_EQ(ctl.status, status);
    EXPECT_EQ(ctl.failedCall, call);
    EXPECT_EQ(ctl.failedPhase, 0u);
    EXPECT_EQ(ctl.failedLane, lane);
    EXPECT_EQ(ctl.failedStep, stepIndex);
  }
};

/// compareGroup of one call.
inline void compareCall(const CallRun& x, const BuildFn& build, uint64_t capacity,
                        const LowerOptions& lower = {}) {
  compareGroup({x}, {build}, capacity, lower);
}

/// Every (collective, algorithm) pair of the builders on `ranks`, 0, 1, 7
/// and 1000 elements, over 4 KiB rings; types, ops, placement, roots and
/// channel counts rotate.
inline void compareEveryCollective(std::initializer_list<int> ranks) {
  const groveDataType_t types[] = {groveFloat32, groveInt32, groveFloat16, groveBfloat16,
                                   groveFloat64};
  const groveRedOp_t ops[] = {groveSum, groveProd, groveMax, groveMin, groveAvg};
  int v = 0;
  for (const plan::testing::Combo& combo : plan::testing::kCombos)
    for (int n : ranks)
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1000}}) {
        ++v;
        const CallRun x{combo.coll,
                        n,
                        count,
                        types[v % 5],
                        ops[(v / 5) % 5],
                        combo.coll != plan::Coll::kAlltoAll && v % 2 == 0,
                        v % n};
        compareCall(x, builder(combo.algo, smallChunks(1 + v % 2)), 4096);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

/// Long messages: 1 MiB + 5 and 64 KiB + 3 elements over rings of 4 KiB
/// (wrapping hundreds of times) and 1 MiB, rings and direct, five collectives.
inline void compareLargeMessages() {
  using plan::Coll;
  const uint64_t kMiB5 = (1 << 20) + 5, k64K3 = (1 << 16) + 3;
  const uint64_t kSmall = 4096, kDefault = 1 << 20;
  compareCall({Coll::kAllReduce, 4, kMiB5, groveFloat32, groveSum, false, 0},
              builder(plan::Algo::kRing, plan::PlanParams{}), kDefault);
  compareCall({Coll::kAllReduce, 2, kMiB5, groveBfloat16, groveAvg, true, 0},
              builder(plan::Algo::kRing, smallChunks(2)), kSmall);
  compareCall({Coll::kBroadcast, 5, k64K3, groveFloat64, groveSum, false, 3},
              builder(plan::Algo::kRing, smallChunks(1)), kSmall);
  compareCall({Coll::kAllGather, 8, k64K3, groveInt32, groveSum, true, 0},
              builder(plan::Algo::kRing, smallChunks(1)), kSmall);
  compareCall({Coll::kReduceScatter, 3, k64K3, groveFloat16, groveProd, false, 0},
              builder(plan::Algo::kRing, plan::PlanParams{}), kDefault);
  compareCall({Coll::kAlltoAll, 4, 16387, groveFloat32, groveSum, false, 0},
              builder(plan::Algo::kDirect, plan::PlanParams{}), kDefault);
  compareCall({Coll::kReduce, 5, k64K3, groveFloat16, groveMax, true, 2},
              builder(plan::Algo::kRing, smallChunks(2)), kSmall);
}

}  // namespace grove::exec::dev::testing

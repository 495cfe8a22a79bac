// The device interpreter's failures in the host emulation: abort while a
// lane waits, a deadline, closed rings (bytes committed before the close are
// still taken), a failure that stops the phase's other lanes, a step the
// interpreter cannot run, invalid calls and rings. Then host ranks (the host
// executor over ByteRings) and emulated device ranks on the same ring
// memory, in one job: the wire rule makes their stream positions agree.
#include <gtest/gtest.h>

#include "ir_steps.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>

#include "algorithms/select/selector.h"
#include "base/error.h"
#include "dev_emu.h"
#include "transports/byte_ring.h"

namespace grove::exec::dev {
namespace {

using plan::Buf;
using plan::BufRef;
using plan::Step;
using plan::StepKind;
using testing::EmuCall;
using testing::EmuFabric;
using testing::program;
using Launch = testing::RankLaunch;

constexpr uint64_t kRing = 4096;
constexpr uint64_t kLongNs = 60'000'000'000ull;

using plan::testing::extra;
using plan::testing::in;
using plan::testing::out;
using plan::testing::scratch;
using plan::testing::step;

/// Rank 0 alone: a local copy, then a receive of `bytes` from rank 1.
plan::Program copyThenRecv(uint64_t bytes) {
  return program({{step(StepKind::kCopy, -1, -1, in(0), out(0), 16),
                   step(StepKind::kRecv, -1, 1, {}, out(16), bytes)}});
}

TEST(DevEmulationFailures, AbortWhileALaneWaits) {
  EmuFabric fabric(kRing);
  const plan::Program first = program({{step(StepKind::kCopy, -1, -1, in(0), out(0), 64)}});
  Launch l({first, copyThenRecv(64)}, fabric, kLongNs);
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::atomic_ref<uint32_t>(l.ctl.abortFlag).store(1);
  });
  l.run();  // without the abort it would fail only after a minute, as timed out
  raiser.join();
  l.expectFailed(kDevAborted, 1, 0, 1);
  EXPECT_EQ(l.output[0], 7);  // the steps before the wait ran
}

TEST(DevEmulationFailures, PeerThatNeverRunsTimesOut) {
  EmuFabric fabric(kRing);
  Launch l({copyThenRecv(64)}, fabric, 50'000'000ull);
  l.run();
  l.expectFailed(kDevTimedOut, 0, 0, 1);
}

TEST(DevEmulationFailures, ClosedRingAfterItsLastBytes) {
  EmuFabric fabric(kRing);
  const DevRing ring = fabric.ring(1, 0, 0, 0);
  for (int i = 0; i < 64; ++i) ring.data[i] = static_cast<uint8_t>(100 + i);
  *ring.head = 64;  // the peer committed 64 bytes, then went away
  *ring.closed = 1;
  Launch l({program({{step(StepKind::kRecv, -1, 1, {}, out(0), 64),
                      step(StepKind::kRecv, -1, 1, {}, out(64), 64)}})},
           fabric, kLongNs);
  l.run();
  l.expectFailed(kDevPeerClosed, 0, 0, 1);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(l.output[i], 100 + i) << i;
  EXPECT_EQ(*ring.tail, 64u);
}

TEST(DevEmulationFailures, SenderOnAClosedFullRing) {
  EmuFabric fabric(kRing);
  const DevRing ring = fabric.ring(0, 1, 0, 0);
  *ring.closed = 1;
  Launch l({program({{step(StepKind::kSend, 1, -1, in(0), {}, 3 * kRing)}})}, fabric, kLongNs);
  l.run();
  l.expectFailed(kDevPeerClosed, 0, 0, 0);
  EXPECT_EQ(*ring.head, kRing);  // what fitted was committed
}

// Lane 0's ring is closed; lane 1 waits on a peer that never comes (no
// deadline for a minute): lane 0's failure stops it.
TEST(DevEmulationFailures, AFailedLaneStopsTheOthers) {
  EmuFabric fabric(kRing);
  *fabric.ring(1, 0, 0, 0).closed = 1;
  Launch l({program({{step(StepKind::kRecv, -1, 1, {}, out(0), 64)},
                     {step(StepKind::kRecv, -1, 2, {}, out(64), 64)}}),
            copyThenRecv(16)},
           fabric, kLongNs);
  l.run();
  l.expectFailed(kDevPeerClosed, 0, 0, 0);
  EXPECT_EQ(l.output[0], 0);  // the second call never started
}

// A reduction of part of an element: the lowering cannot know the type; the
// interpreter refuses the step.
TEST(DevEmulationFailures, PartialElementIsABadStep) {
  EmuFabric fabric(kRing);
  Launch l({program({{step(StepKind::kReduce, -1, -1, in(0), out(0), 6)}})}, fabric, kLongNs);
  l.run();
  l.expectFailed(kDevBadStep, 0, 0, 0);
  Launch bytes({program({{step(StepKind::kCopy, -1, -1, in(0), out(0), 6)}})}, fabric, kLongNs);
  bytes.run();  // a byte move of any size is fine
  EXPECT_EQ(bytes.ctl.status, kDevOk);
  EXPECT_EQ(bytes.output[5], 7);
  EXPECT_EQ(bytes.output[6], 0);
}

TEST(DevEmulationFailures, InvalidCallsAndRings) {
  EmuFabric fabric(kRing);
  Launch l({copyThenRecv(16)}, fabric, kLongNs, 42);
  EXPECT_THROW(l.run(), Error);
  HostRingArena arena;
  EXPECT_THROW(arena.add(100), Error);
  EXPECT_THROW(arena.add(0), Error);
  EXPECT_EQ(arena.add(128).capacity, 128u);
}

// kCopy whose source and destination overlap (either direction, distances
// smaller and larger than the copy) behaves as memmove.
TEST(DevEmulationSemantics, OverlappingCopyIsMemmove) {
  EmuFabric fabric(kRing);
  for (uint64_t shift : {1u, 8u, 300u, 999u})
    for (bool down : {true, false}) {
      SCOPED_TRACE("shift " + std::to_string(shift) + (down ? " down" : " up"));
      std::vector<uint8_t> mem(4096), want;
      for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<uint8_t>(i * 7 + i / 256);
      want = mem;
      uint8_t* src = mem.data() + (down ? shift : 0);
      uint8_t* dst = mem.data() + (down ? 0 : shift);
      std::memmove(want.data() + (dst - mem.data()), want.data() + (src - mem.data()), 1000);
      EmuCall c;
      testing::bindCall(c, program({{step(StepKind::kCopy, -1, -1, in(0), out(0), 1000)}}), 0,
                        fabric, DevReduce{groveFloat32, groveSum, 1}, {src, dst, nullptr});
      DevControl ctl;
      runEmulated(&c.call, 1, ctl);
      ASSERT_EQ(ctl.status, kDevOk);
      ASSERT_EQ(mem, want);
    }
}

// ---------------------------------------------------------------- host <-> device

static_assert(offsetof(transport::RingControl, head) == transport::kRingHeadOffset);
static_assert(offsetof(transport::RingControl, tail) == transport::kRingTailOffset);
static_assert(offsetof(transport::RingControl, closed) == transport::kRingClosedOffset);

transport::ByteRing byteRing(const DevRing& r) {
  return transport::ByteRing(reinterpret_cast<transport::RingControl*>(r.head), r.data, r.capacity);
}

/// The host executor's halves over a DevRing's memory.
class RingSend : public transport::SendHalf {
 public:
  explicit RingSend(const DevRing& r) : ring_(byteRing(r)) {}
  size_t reserve(void** ptr) override { return ring_.reserve(ptr); }
  void commit(size_t n) override { ring_.commit(n); }

 private:
  transport::ByteRing ring_;
};
class RingRecv : public transport::RecvHalf {
 public:
  explicit RingRecv(const DevRing& r) : ring_(byteRing(r)) {}
  size_t peek(const void** ptr) override { return ring_.peek(ptr); }
  void consume(size_t n) override { ring_.consume(n); }

 private:
  transport::ByteRing ring_;
};

// Ranks 0 and 2 run the host executor, rank 1 the device emulation, over
// the same rings, three calls in a row (odd sizes: every call after the
// first starts with padding); every output element checked exactly.
TEST(DevEmulationInterop, HostAndDeviceRanksShareRings) {
  using plan::testing::CallRun;
  const int n = 3;
  const std::vector<CallRun> xs = {
      {plan::Coll::kAllReduce, n, 7, groveFloat16, groveSum, false, 0},
      {plan::Coll::kAllGather, n, 1001, groveFloat32, groveSum, true, 0},
      {plan::Coll::kReduce, n, 3001, groveInt32, groveMax, false, 1}};
  plan::PlanParams params;
  params.chunkBytes = 1024;
  EmuFabric fabric(kRing);
  std::vector<std::vector<plan::Program>> progs(xs.size());
  std::vector<std::vector<plan::testing::Memory>> mem(xs.size(),
                                                      std::vector<plan::testing::Memory>(n));
  for (size_t c = 0; c < xs.size(); ++c)
    for (int r = 0; r < n; ++r) {
      progs[c].push_back(plan::build(plan::Algo::kRing, plan::testing::argsOf(xs[c], r), params));
      plan::testing::layout(xs[c], r, mem[c][r]);
      mem[c][r].scratch.assign(progs[c][r].scratchBytes, 0);
    }
  std::vector<std::vector<EmuCall>> calls(1, std::vector<EmuCall>(xs.size()));
  for (size_t c = 0; c < xs.size(); ++c) {
    plan::testing::Memory& m = mem[c][1];
    testing::bindCall(calls[0][c], progs[c][1], 1, fabric, DevReduce{xs[c].dtype, xs[c].op, n},
                      {m.in, m.out, m.scratch.empty() ? nullptr : m.scratch.data()});
  }
  std::vector<MapLinkTable> tables(n);
  for (int r : {0, 2})
    for (const auto& ps : progs) {
      std::vector<transport::LinkKey> sends, recvs;
      collectLinks(ps[r], sends, recvs);
      for (const auto& k : sends)
        if (!tables[r].hasSend(k))
          tables[r].addSend(k, std::make_unique<RingSend>(fabric.ring(r, k.peer, k.channel, 0)));
      for (const auto& k : recvs)
        if (!tables[r].hasRecv(k))
          tables[r].addRecv(k, std::make_unique<RingRecv>(fabric.ring(k.peer, r, k.channel, 0)));
    }
  AbortSignal abort;
  const WaitContext wait = WaitContext::of(abort, 30.0);
  DevControl ctl;
  ctl.timeoutNs = 30'000'000'000ull;
  std::vector<std::thread> threads;
  std::atomic<int> hostErrors{0};
  for (int r : {0, 2})
    threads.emplace_back([&, r] {
      try {
        for (size_t c = 0; c < xs.size(); ++c) {
          plan::testing::Memory& m = mem[c][r];
          runProgram(progs[c][r], Buffers{m.in, m.out, m.scratch.data(), {}},
                     ReduceSpec{xs[c].dtype, xs[c].op, n}, tables[r], wait);
        }
      } catch (const Error& e) {
        ADD_FAILURE() << "host rank " << r << ": " << e.what();
        ++hostErrors;
        abort.raise(e.what());
      }
    });
  threads.emplace_back([&] {
    std::vector<DevCall> launch;
    for (EmuCall& c : calls[0]) launch.push_back(c.call);
    runEmulated(launch.data(), launch.size(), ctl);
    if (ctl.status != kDevOk) abort.raise("device rank failed");
  });
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(ctl.status, kDevOk) << "call " << ctl.failedCall << " step " << ctl.failedStep;
  ASSERT_EQ(hostErrors.load(), 0);
  for (size_t c = 0; c < xs.size(); ++c)
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(plan::testing::runText(xs[c]) + " rank " + std::to_string(r));
      const uint64_t elems =
          plan::bufferSizesFor(plan::testing::argsOf(xs[c], r)).output / dtypeSize(xs[c].dtype);
      for (uint64_t i = 0; i < elems; ++i)
        ASSERT_EQ(plan::testing::getElem(xs[c].dtype, mem[c][r].out, i),
                  plan::testing::expectedAt(xs[c], r, i))
            << "element " << i;
    }
}

}  // namespace
}  // namespace grove::exec::dev

// Stream tapes (exec/device/stream_tape.h) run by their host emulation
// (stream_emulate.h) against the host executor, byte for byte: every
// collective the builders make, 2..5 and 8 ranks, rings that wrap many
// times, long messages, groups of calls, and ranks that run tapes beside
// ranks that run the interpreter on the same rings. Then the tapes' shape
// (pieces within half a ring and never across its wrap, counters carried
// between launches, waits already passed not repeated), the failures
// (abort, timeout, closed ring, a step the interpreter refuses), and the
// engine choice (core/engine_choice.h).
#include <gtest/gtest.h>

#include "ir_steps.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "algorithm_combos.h"
#include "algorithms/builders/builders.h"
#include "base/error.h"
#include "core/engine_choice.h"
#include "dev_emu.h"

namespace grove::exec::dev {
namespace {

using plan::Coll;
using plan::StepKind;
using plan::testing::in;
using plan::testing::out;
using plan::testing::step;
using testing::compareCall;
using testing::EmuCall;
using testing::EmuFabric;
using testing::Runner;

constexpr uint64_t kSmallRing = 4096;
constexpr uint64_t kLongNs = 60'000'000'000ull;

using testing::builder;
using testing::program;
using testing::smallChunks;
using Launch = testing::RankLaunch;

// Sets the harness's runner for one test.
struct UseRunner {
  explicit UseRunner(Runner r) { testing::gRunner = r; }
  ~UseRunner() { testing::gRunner = Runner{}; }
};

void everyCollective(Runner::Kind kind, std::initializer_list<int> ranks) {
  UseRunner use({kind, 1536});  // pieces shorter than half the small ring, too
  testing::compareEveryCollective(ranks);
}

TEST(StreamTape, EveryCollectiveSmallRings) { everyCollective(Runner::kTape, {2, 3, 4, 5, 8}); }

// Odd ranks run tapes, even ranks the interpreter, on the same rings: the
// two size their pieces differently and still agree on every position.
TEST(StreamTape, BesideTheInterpreter) { everyCollective(Runner::kMixed, {2, 3, 4}); }

TEST(StreamTape, LargeMessages) {
  for (Runner::Kind kind : {Runner::kTape, Runner::kMixed}) {
    UseRunner use({kind, kTapePieceBytes});
    testing::compareLargeMessages();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Several calls in one launch share rings: the counters run on from call to call.
TEST(StreamTape, GroupOfCallsSharesRings) {
  UseRunner use({Runner::kTape, kTapePieceBytes});
  const plan::testing::CallRun a{Coll::kAllReduce, 3, 7, groveFloat16, groveSum, false, 0};
  const plan::testing::CallRun b{Coll::kAllGather, 3, 1001, groveFloat32, groveSum, true, 0};
  const plan::testing::CallRun c{Coll::kBroadcast, 3, 333, groveInt32, groveSum, false, 2};
  testing::compareGroup(
      {c, a, b},
      {builder(plan::Algo::kDirect, smallChunks(2)), builder(plan::Algo::kDirect, smallChunks(2)),
       builder(plan::Algo::kRing, smallChunks(2))},
      kSmallRing);
}

// Builds l's launch with b.
void buildInto(TapeBuilder& b, const Launch& l, LaunchTape& tape) {
  const std::vector<DevCall> calls = l.devCalls();
  b.build(calls.data(), calls.size(), tape);
}

// A send of 10001 bytes into a 4 KiB ring, twice: pieces at most 2 KiB, none
// across the wrap; the second launch's counters start where the first's
// ended; each room wait is emitted once per value.
TEST(StreamTapeShape, PiecesCountersAndWaits) {
  EmuFabric fabric(kSmallRing);
  const DevRing ring = fabric.ring(0, 1, 0, 0);
  Launch l({program({{step(StepKind::kSend, 1, -1, in(0), {}, 10001)}})}, fabric, kLongNs);
  TapeBuilder b;
  LaunchTape tape;
  uint64_t head = 0;
  for (int round = 0; round < 2; ++round) {
    const std::vector<DevCall> lc = l.devCalls();
    b.build(lc.data(), lc.size(), tape);
    ASSERT_EQ(tape.phases.size(), 1u);
    ASSERT_EQ(tape.phases[0].size(), 1u);
    uint64_t lastWait = 0;
    for (const TapeOp& op : tape.phases[0][0].ops) {
      switch (op.kind) {
        case TapeOpKind::kCopy: {
          EXPECT_LE(op.bytes, kSmallRing / 2);
          const auto at = static_cast<uint64_t>(static_cast<uint8_t*>(op.dst) - ring.data);
          EXPECT_EQ(at, head % kSmallRing);
          EXPECT_LE(at + op.bytes, kSmallRing) << "a piece across the wrap";
          break;
        }
        case TapeOpKind::kZero: EXPECT_EQ(op.bytes, plan::wirePad(head)); break;
        case TapeOpKind::kPost:
          EXPECT_EQ(op.word, ring.head);
          EXPECT_GT(op.value, head);
          head = op.value;
          break;
        case TapeOpKind::kWait:
          EXPECT_EQ(op.word, ring.tail);
          EXPECT_GT(op.value, lastWait) << "a wait repeated";
          lastWait = op.value;
          break;
        case TapeOpKind::kReduce: ADD_FAILURE() << "a send reduces nothing"; break;
      }
    }
  }
  EXPECT_EQ(head, 10001u + plan::wirePad(10001) + 10001u);  // the second send starts aligned
  const auto awaited = b.awaitedValues();
  ASSERT_EQ(awaited.size(), 1u);
  EXPECT_EQ(awaited[0].first, ring.tail);
  EXPECT_EQ(awaited[0].second, head - kSmallRing);
}

TEST(StreamTapeFailures, AbortWhileALaneWaits) {
  EmuFabric fabric(kSmallRing);
  Launch l({program({{step(StepKind::kCopy, -1, -1, in(0), out(0), 16),
                      step(StepKind::kRecv, -1, 1, {}, out(16), 64)}})},
           fabric, kLongNs);
  UseRunner use({Runner::kTape, kTapePieceBytes});
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::atomic_ref<uint32_t>(l.ctl.abortFlag).store(1);
  });
  l.run();
  raiser.join();
  EXPECT_EQ(l.ctl.status, kDevAborted);
  EXPECT_EQ(l.ctl.failedStep, 1u);
  EXPECT_EQ(l.output[0], 7);  // the copy before the wait ran
}

TEST(StreamTapeFailures, PeerThatNeverRunsTimesOut) {
  EmuFabric fabric(kSmallRing);
  Launch l({program({{step(StepKind::kRecv, -1, 1, {}, out(0), 64)}})}, fabric, 50'000'000ull);
  UseRunner use({Runner::kTape, kTapePieceBytes});
  l.run();
  EXPECT_EQ(l.ctl.status, kDevTimedOut);
}

TEST(StreamTapeFailures, ClosedRingAfterItsLastBytes) {
  EmuFabric fabric(kSmallRing);
  const DevRing ring = fabric.ring(1, 0, 0, 0);
  for (int i = 0; i < 64; ++i) ring.data[i] = static_cast<uint8_t>(100 + i);
  *ring.head = 64;  // the peer committed 64 bytes, then went away
  *ring.closed = 1;
  Launch l({program({{step(StepKind::kRecv, -1, 1, {}, out(0), 64),
                      step(StepKind::kRecv, -1, 1, {}, out(64), 64)}})},
           fabric, kLongNs);
  UseRunner use({Runner::kTape, kTapePieceBytes});
  l.run();
  EXPECT_EQ(l.ctl.status, kDevPeerClosed);
  EXPECT_EQ(l.ctl.failedStep, 1u);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(l.output[i], 100 + i) << i;
  EXPECT_EQ(*ring.tail, 64u);
}

// A step the interpreter refuses, or a reduce the GPU's kernel cannot run,
// throws before any counter moves: the next launch starts from the same
// positions.
TEST(StreamTapeFailures, RefusedStepMovesNoCounter) {
  EmuFabric fabric(kSmallRing);
  const DevRing ring = fabric.ring(0, 1, 0, 0);
  Launch bad({program({{step(StepKind::kSend, 1, -1, in(0), {}, 40)}}),
              program({{step(StepKind::kReduce, -1, -1, in(0), out(0), 6)}})},
             fabric, kLongNs);
  TapeBuilder b;
  LaunchTape tape;
  try {
    buildInto(b, bad, tape);
    ADD_FAILURE() << "a partial-element reduce was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInternalError);
  }
  Launch good({program({{step(StepKind::kSend, 1, -1, in(0), {}, 40)}})}, fabric, kLongNs);
  buildInto(b, good, tape);
  runTapeEmulated(tape, good.ctl);
  EXPECT_EQ(good.ctl.status, kDevOk);
  EXPECT_EQ(*ring.head, 40u);
  Launch badType({program({{step(StepKind::kCopy, -1, -1, in(0), out(0), 8)}})}, fabric, kLongNs,
                 42);
  EXPECT_THROW(buildInto(b, badType, tape), Error);
  // A reduce on a buffer not aligned to its elements (the GPU's reduce
  // kernel loads whole elements): a clear error, no counter moved.
  Launch odd({program({{step(StepKind::kSend, 1, -1, in(0), {}, 40)},
                       {step(StepKind::kReduce, -1, -1, in(0), out(0), 8)}})},
             fabric, kLongNs);
  odd.calls[0].call.bufs[kSlotOutput] = odd.output.data() + 1;
  try {
    buildInto(b, odd, tape);
    ADD_FAILURE() << "a misaligned reduce was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("aligned"), std::string::npos) << e.what();
  }
  buildInto(b, good, tape);
  runTapeEmulated(tape, good.ctl);
  EXPECT_EQ(good.ctl.status, kDevOk);
  EXPECT_EQ(*ring.head, 40u + plan::wirePad(40) + 40u);  // the refused launch moved nothing
}

// ------------------------------------------------------------------ engine choice

transport::DevicePeer peer(int rank, int pid, const char* bus, int32_t flags, uint64_t host = 1) {
  transport::DevicePeer p;
  p.rank = rank;
  p.pid = pid;
  p.hostHash = host;
  std::strncpy(p.pciBusId, bus, sizeof(p.pciBusId) - 1);
  p.flags = flags;
  return p;
}

TEST(EngineChoice, AutoTakesStreamsOnlyWhereProcessesShareAGpuWithoutMps) {
  using core::chooseDeviceEngine;
  using core::DeviceEngineKind;
  const int32_t ops = transport::kDevicePeerStreamOps, mps = transport::kDevicePeerMps;
  // One process per GPU: the kernel, nothing to say.
  auto c = chooseDeviceEngine("auto", {peer(0, 10, "0:1", ops), peer(1, 11, "0:2", ops)});
  EXPECT_EQ(c.kind, DeviceEngineKind::kKernel);
  EXPECT_TRUE(c.advice.empty());
  // Threads of one process on one GPU share a context: the kernel.
  c = chooseDeviceEngine("auto", {peer(0, 10, "0:1", ops), peer(1, 10, "0:1", ops)});
  EXPECT_EQ(c.kind, DeviceEngineKind::kKernel);
  // The same bus id on two hosts is two GPUs.
  c = chooseDeviceEngine("auto", {peer(0, 10, "0:1", ops, 1), peer(1, 11, "0:1", ops, 2)});
  EXPECT_EQ(c.kind, DeviceEngineKind::kKernel);
  // Two processes on one GPU without MPS: streams, and the advice names them.
  c = chooseDeviceEngine(
      "auto", {peer(0, 10, "0:1", ops), peer(1, 11, "0:1", ops), peer(2, 12, "0:2", ops)});
  EXPECT_EQ(c.kind, DeviceEngineKind::kStream);
  EXPECT_NE(c.advice.find("ranks 0, 1 share GPU 0:1"), std::string::npos) << c.advice;
  EXPECT_NE(c.advice.find("nvidia-cuda-mps-control -d"), std::string::npos) << c.advice;
  // Under MPS: the kernel.
  c = chooseDeviceEngine("auto", {peer(0, 10, "0:1", ops | mps), peer(1, 11, "0:1", ops | mps)});
  EXPECT_EQ(c.kind, DeviceEngineKind::kKernel);
  EXPECT_TRUE(c.advice.empty());
  // A device without 64-bit stream waits anywhere: the kernel, with advice.
  c = chooseDeviceEngine("auto", {peer(0, 10, "0:1", ops), peer(1, 11, "0:1", 0)});
  EXPECT_EQ(c.kind, DeviceEngineKind::kKernel);
  EXPECT_FALSE(c.advice.empty());
  // Forced: as told, with a warning when the kernel will be slow.
  c = chooseDeviceEngine("kernel", {peer(0, 10, "0:1", ops), peer(1, 11, "0:1", ops)});
  EXPECT_EQ(c.kind, DeviceEngineKind::kKernel);
  EXPECT_FALSE(c.advice.empty());
  c = chooseDeviceEngine("stream", {peer(0, 10, "", ops), peer(1, 11, "", ops)});
  EXPECT_EQ(c.kind, DeviceEngineKind::kStream);
  EXPECT_TRUE(c.advice.empty());
  // Forced where a device cannot: every rank refuses alike.
  EXPECT_THROW(chooseDeviceEngine("stream", {peer(0, 10, "0:1", ops), peer(1, 11, "0:1", 0)}),
               Error);
  // The emulation has no bus id: auto keeps the kernel.
  c = chooseDeviceEngine("auto", {peer(0, 10, "", ops), peer(1, 11, "", ops)});
  EXPECT_EQ(c.kind, DeviceEngineKind::kKernel);
}

}  // namespace
}  // namespace grove::exec::dev

// Running stream tapes on host threads (see stream_emulate.h).
#include "exec/device/stream_emulate.h"

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "base/config.h"
#include "exec/device/emulate.h"

namespace grove::exec::dev {
namespace {

uint32_t loadStatus(DevControl& ctl) {
  return std::atomic_ref<uint32_t>(ctl.status).load(std::memory_order_acquire);
}

// Waits until *op.word >= op.value; returns a DevStatus.
uint32_t waitFor(HostCtx& ctx, const TapeOp& op, DevControl& ctl) {
  uint32_t spins = 0;
  uint64_t start = 0;
  bool closedSeen = false;
  for (;;) {
    if (static_cast<int64_t>(ctx.loadAcquire(op.word) - op.value) >= 0) return kDevOk;
    if (ctx.loadFlag(&ctl.abortFlag) != 0) return kDevAborted;
    const uint32_t other = ctx.loadFlag(&ctl.status);
    if (other != kDevOk) return other;
    const bool closed = op.closed != nullptr && ctx.loadFlag(op.closed) != 0;
    if (closed && closedSeen) return kDevPeerClosed;  // still blocked after a re-poll
    closedSeen = closed;
    const uint64_t now = ctx.nowNs();
    if (spins == 0) {
      start = now;
    } else if (ctl.timeoutNs > 0 && now - start > ctl.timeoutNs) {
      return kDevTimedOut;
    }
    ctx.pause(spins);
    ++spins;
  }
}

void runLaneOps(const TapeLane& lane, DevControl& ctl) {
  HostCtx ctx;
  for (const TapeOp& op : lane.ops) {
    uint32_t status = kDevOk;
    switch (op.kind) {
      case TapeOpKind::kWait: status = waitFor(ctx, op, ctl); break;
      case TapeOpKind::kPost:
        ctx.fenceRelease();
        ctx.storeRelease(op.word, op.value);
        break;
      case TapeOpKind::kCopy: ctx.copy(op.dst, op.src[0], op.bytes); break;
      case TapeOpKind::kZero: std::memset(op.dst, 0, op.bytes); break;
      case TapeOpKind::kReduce:
        ctx.reduce(op.reduce, op.dst, op.dst2, op.src, op.nsrc, op.bytes, op.final != 0);
        break;
    }
    if (status != kDevOk) {
      if (ctx.claimStatus(&ctl.status, status)) {
        ctl.failedCall = lane.call;
        ctl.failedPhase = lane.phase;
        ctl.failedLane = lane.lane;
        ctl.failedStep = op.step;
      }
      return;
    }
  }
}

}  // namespace

void runTapeEmulated(const LaunchTape& tape, DevControl& ctl) {
  if (ctl.timeoutNs == 0)
    ctl.timeoutNs = static_cast<uint64_t>(config::getDouble("GROVE_TIMEOUT") * 1e9);
  for (const std::vector<TapeLane>& phase : tape.phases) {
    if (loadStatus(ctl) != kDevOk) return;
    if (phase.empty()) continue;
    std::vector<std::thread> threads;
    threads.reserve(phase.size() - 1);
    for (size_t l = 1; l < phase.size(); ++l)
      threads.emplace_back([&phase, l, &ctl] { runLaneOps(phase[l], ctl); });
    runLaneOps(phase[0], ctl);
    for (std::thread& t : threads) t.join();
  }
}

}  // namespace grove::exec::dev

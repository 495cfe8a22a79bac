// The device interpreter: runs one lane of one phase of a lowered program
// (dev_program.h) with a team of threads (a GPU thread block, or one CPU
// thread in the host emulation), over DevRings (transports/device_ring.h).
//
// How it works: the lane's steps run in order. A local step (copy, reduce)
// is one team-wide copy or reduce; a copy whose source and destination
// overlap goes in pieces no longer than their distance, front to back when
// the destination lies below the source and back to front otherwise, with a
// team barrier between pieces (memmove semantics). A step that touches rings
// first applies the wire rule of ir/schedule.h: thread 0 brings every
// touched stream to a 16-byte boundary -- the sender writes zero pad bytes
// and raises head, the receiver raises tail past the same bytes -- waiting
// for room or data as needed, exactly as the host executor pads, so host and
// device programs agree on every stream position. Then it streams in pieces:
//
//   1. thread 0 computes the piece: what is left of the step, at most
//      kDevPieceBytes, at most the contiguous readable bytes of every source
//      ring and the contiguous free bytes of every destination ring, rounded
//      down to the step's granularity (the element size; 1 for a byte move
//      whose size is not a multiple of it). It keeps the other side's counter
//      of each ring cached and re-reads it (acquire) only when the cached
//      view is smaller than the piece it wants, so a streaming step costs one
//      remote read per piece at most. When nothing can move it waits (below).
//   2. the team learns the piece (ctx.share) and moves it straight between
//      the user's buffers and the rings: copies for sends and receives, a
//      fold src op r0 op r1 ... for the reducing receives (`final` applied
//      once, after the last source). A fan-out step produces into every
//      destination: pure moves copy from the local operand (or the local
//      receive ring) into each; kRecvReduceSend reduces into destinations
//      two at a time (the sources are unchanged, so every copy gets the same
//      bits); kRecvReduceCopySend reduces into dst and the first
//      destination, then copies dst into the others after a barrier.
//   3. every thread fences its stores (ctx.fenceRelease), the team meets
//      (ctx.sync), and thread 0 publishes: head += piece on every send ring,
//      tail += piece on every receive ring (release stores).
//
// Each thread keeps the lane's own counters (send heads, receive tails) in
// registers within a step and re-reads them at the step's start (another
// lane, phase or launch may have moved them since).
//
// Waiting: thread 0 polls with ctx.pause(consecutive empty polls). Every
// empty poll checks ctl->abortFlag (kDevAborted), ctl->status (another lane
// failed: that status), the `closed` word of each ring it is blocked on
// (kDevPeerClosed, once the ring still blocks on the poll after the word was
// seen set, so bytes committed just before a close are still taken) and the
// deadline (ctl->timeoutNs > 0 and longer than that since this wait began:
// kDevTimedOut). The first failure is claimed in ctl->status; only the
// claimer records the failed call, phase, lane and step (the step's index
// within the lane's lowered steps). Every thread returns the same status.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exec/device/dev_context.h"
#include "exec/device/dev_program.h"
#include "ir/wire.h"

namespace grove::exec::dev {

/// Most bytes one piece of a streaming step moves.
inline constexpr uint64_t kDevPieceBytes = 256 << 10;

/// Bytes of one element of a groveDataType_t (0 for an invalid type).
GROVE_HD_INLINE uint32_t devDtypeSize(int32_t dtype) {
  switch (dtype) {
    case 0:
    case 1: return 1;  // int8, uint8
    case 6:
    case 9: return 2;  // float16, bfloat16
    case 2:
    case 3:
    case 7: return 4;  // int32, uint32, float32
    case 4:
    case 5:
    case 8: return 8;  // int64, uint64, float64
    default: return 0;
  }
}

namespace lane_detail {

/// Marks a shared value as a failure status rather than a piece size.
inline constexpr uint64_t kFailBit = 1ull << 63;

/// Where a lane runs and how it reports failure.
struct LaneEnv {
  DevControl* ctl;     ///< may be null: no abort, status or deadline checks
  uint64_t timeoutNs;  ///< ctl->timeoutNs, read once
};

/// The rings of one step and this lane's view of their counters.
struct StepRings {
  const DevRing* send[kMaxStepLinks];
  const DevRing* recv[kMaxStepLinks];
  uint64_t head[kMaxStepLinks];      ///< own head of each send ring (every thread)
  uint64_t tail[kMaxStepLinks];      ///< own tail of each receive ring (every thread)
  uint64_t tailSeen[kMaxStepLinks];  ///< thread 0: cached consumer tail of each send ring
  uint64_t headSeen[kMaxStepLinks];  ///< thread 0: cached producer head of each receive ring
  uint32_t nSend;
  uint32_t nRecv;
};

/// Thread 0's state within one wait.
struct WaitState {
  uint32_t spins = 0;       ///< consecutive empty polls
  uint64_t start = 0;       ///< when this wait began (ctx.nowNs)
  uint32_t closedSeen = 0;  ///< blocked rings whose `closed` word was seen set (bit mask)
};

/// Bit of blocked-ring masks: send ring k is bit k, receive ring k bit 4 + k.
GROVE_HD_INLINE uint32_t sendBit(uint32_t k) { return 1u << k; }
GROVE_HD_INLINE uint32_t recvBit(uint32_t k) { return 1u << (kMaxStepLinks + k); }

GROVE_HD_INLINE uint64_t minU64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/// Thread 0, after an empty poll blocked on the rings in `blocked`: checks
/// abort, other lanes' failures, closed rings and the deadline, then backs
/// off. Returns a DevStatus (kDevOk: poll again).
template <class Ctx>
GROVE_HD uint32_t afterEmptyPoll(Ctx& ctx, const LaneEnv& env, const StepRings& rs,
                                 uint32_t blocked, WaitState& w) {
  if (env.ctl != nullptr) {
    if (ctx.loadFlag(&env.ctl->abortFlag) != 0) return kDevAborted;
    const uint32_t other = ctx.loadFlag(&env.ctl->status);
    if (other != 0) return other;
  }
  uint32_t closed = 0;
  for (uint32_t k = 0; k < rs.nSend; ++k)
    if ((blocked & sendBit(k)) != 0 && ctx.loadFlag(rs.send[k]->closed) != 0) closed |= sendBit(k);
  for (uint32_t k = 0; k < rs.nRecv; ++k)
    if ((blocked & recvBit(k)) != 0 && ctx.loadFlag(rs.recv[k]->closed) != 0) closed |= recvBit(k);
  if ((closed & w.closedSeen) != 0) return kDevPeerClosed;  // still blocked after a re-poll
  w.closedSeen = closed;
  const uint64_t now = ctx.nowNs();
  if (w.spins == 0) {
    w.start = now;
  } else if (env.timeoutNs > 0 && now - w.start > env.timeoutNs) {
    return kDevTimedOut;
  }
  ctx.pause(w.spins);
  ++w.spins;
  return kDevOk;
}

/// Free bytes of send ring k as thread 0 sees them, re-reading the
/// consumer's tail when the cached view shows fewer than `want`.
template <class Ctx>
GROVE_HD uint64_t sendFree(Ctx& ctx, StepRings& rs, uint32_t k, uint64_t want) {
  const uint64_t cap = rs.send[k]->capacity;
  uint64_t free = cap - (rs.head[k] - rs.tailSeen[k]);
  if (free < want) {
    rs.tailSeen[k] = ctx.loadAcquire(rs.send[k]->tail);
    free = cap - (rs.head[k] - rs.tailSeen[k]);
  }
  return free;
}

/// Readable bytes of receive ring k as thread 0 sees them, re-reading the
/// producer's head when the cached view shows fewer than `want`.
template <class Ctx>
GROVE_HD uint64_t recvAvail(Ctx& ctx, StepRings& rs, uint32_t k, uint64_t want) {
  uint64_t avail = rs.headSeen[k] - rs.tail[k];
  if (avail < want) {
    rs.headSeen[k] = ctx.loadAcquire(rs.recv[k]->head);
    avail = rs.headSeen[k] - rs.tail[k];
  }
  return avail;
}

/// Thread 0: one pass of the wire rule over every stream of the step (pads
/// what room and data allow). Sets *blocked to the streams not yet aligned;
/// returns true if any counter moved.
template <class Ctx>
GROVE_HD bool alignPass(Ctx& ctx, StepRings& rs, uint32_t* blocked) {
  bool moved = false;
  *blocked = 0;
  for (uint32_t k = 0; k < rs.nSend; ++k) {
    const uint64_t pad = (plan::kWireAlign - rs.head[k] % plan::kWireAlign) % plan::kWireAlign;
    if (pad == 0) continue;
    const uint64_t n = minU64(pad, sendFree(ctx, rs, k, pad));  // never wraps: capacity % 64 == 0
    if (n > 0) {
      uint8_t* p = rs.send[k]->data + rs.head[k] % rs.send[k]->capacity;
      for (uint64_t j = 0; j < n; ++j) p[j] = 0;
      rs.head[k] += n;
      ctx.storeRelease(rs.send[k]->head, rs.head[k]);
      moved = true;
    }
    if (rs.head[k] % plan::kWireAlign != 0) *blocked |= sendBit(k);
  }
  for (uint32_t k = 0; k < rs.nRecv; ++k) {
    const uint64_t pad = (plan::kWireAlign - rs.tail[k] % plan::kWireAlign) % plan::kWireAlign;
    if (pad == 0) continue;
    const uint64_t n = minU64(pad, recvAvail(ctx, rs, k, pad));
    if (n > 0) {
      rs.tail[k] += n;
      ctx.storeRelease(rs.recv[k]->tail, rs.tail[k]);
      moved = true;
    }
    if (rs.tail[k] % plan::kWireAlign != 0) *blocked |= recvBit(k);
  }
  return moved;
}

/// Thread 0: applies the wire rule, waiting as needed. Returns a DevStatus.
template <class Ctx>
GROVE_HD uint32_t alignStreams(Ctx& ctx, const LaneEnv& env, StepRings& rs) {
  WaitState w;
  for (;;) {
    uint32_t blocked = 0;
    const bool moved = alignPass(ctx, rs, &blocked);
    if (blocked == 0) return kDevOk;
    if (moved) {
      w = WaitState{};
      continue;
    }
    const uint32_t s = afterEmptyPoll(ctx, env, rs, blocked, w);
    if (s != kDevOk) return s;
  }
}

/// Thread 0: waits until a piece of at least `gran` bytes can move and
/// returns its size (<= want, a multiple of gran), or kFailBit | status.
/// `want` is already bounded by the step's rest, kDevPieceBytes and the
/// contiguous span of every ring.
template <class Ctx>
GROVE_HD uint64_t pollPiece(Ctx& ctx, const LaneEnv& env, StepRings& rs, uint64_t want,
                            uint32_t gran) {
  WaitState w;
  for (;;) {
    uint64_t n = want;
    uint32_t blocked = 0;
    for (uint32_t k = 0; k < rs.nRecv; ++k) {
      const uint64_t avail = recvAvail(ctx, rs, k, want);
      if (avail < gran) blocked |= recvBit(k);
      n = minU64(n, avail);
    }
    for (uint32_t k = 0; k < rs.nSend; ++k) {
      const uint64_t free = sendFree(ctx, rs, k, want);
      if (free < gran) blocked |= sendBit(k);
      n = minU64(n, free);
    }
    n -= n % gran;
    if (n > 0) return n;
    const uint32_t s = afterEmptyPoll(ctx, env, rs, blocked, w);
    if (s != kDevOk) return kFailBit | s;
  }
}

/// Every thread: reads the lane's own counters (after a team barrier).
template <class Ctx>
GROVE_HD void loadOwnCounters(Ctx& ctx, StepRings& rs) {
  for (uint32_t k = 0; k < rs.nSend; ++k) rs.head[k] = ctx.loadAcquire(rs.send[k]->head);
  for (uint32_t k = 0; k < rs.nRecv; ++k) rs.tail[k] = ctx.loadAcquire(rs.recv[k]->tail);
}

/// The bytes of the piece at the current positions: out[k] in send ring k,
/// in[k] in receive ring k.
struct PiecePtrs {
  uint8_t* out[kMaxStepLinks];
  const void* in[1 + kMaxStepLinks];  ///< in[0] = the local operand (reductions), then the rings
};

/// The team moves one piece of a ring step (n bytes at src/dst, which
/// already include the step's progress).
template <class Ctx>
GROVE_HD void movePiece(Ctx& ctx, const DevCall& call, const DevStep& s, const StepRings& rs,
                        const uint8_t* src, uint8_t* dst, uint64_t n, uint32_t esz) {
  PiecePtrs p;
  for (uint32_t k = 0; k < rs.nSend; ++k)
    p.out[k] = rs.send[k]->data + rs.head[k] % rs.send[k]->capacity;
  p.in[0] = src;
  for (uint32_t k = 0; k < rs.nRecv; ++k)
    p.in[1 + k] = rs.recv[k]->data + rs.tail[k] % rs.recv[k]->capacity;
  const int nsrc = 1 + static_cast<int>(rs.nRecv);
  const uint64_t count = n / esz;
  switch (static_cast<plan::StepKind>(s.kind)) {
    case plan::StepKind::kSend:
      for (uint32_t k = 0; k < rs.nSend; ++k) ctx.copy(p.out[k], src, n);
      break;
    case plan::StepKind::kRecv: ctx.copy(dst, p.in[1], n); break;
    case plan::StepKind::kRecvCopySend:
      ctx.copy(dst, p.in[1], n);
      for (uint32_t k = 0; k < rs.nSend; ++k) ctx.copy(p.out[k], p.in[1], n);
      break;
    case plan::StepKind::kRecvReduce:
      ctx.reduce(call.reduce, dst, nullptr, p.in, nsrc, count, s.final != 0);
      break;
    case plan::StepKind::kRecvReduceSend:
      for (uint32_t k = 0; k < rs.nSend; k += 2)
        ctx.reduce(call.reduce, p.out[k], k + 1 < rs.nSend ? p.out[k + 1] : nullptr, p.in, nsrc,
                   count, s.final != 0);
      break;
    case plan::StepKind::kRecvReduceCopySend:
      ctx.reduce(call.reduce, dst, p.out[0], p.in, nsrc, count, s.final != 0);
      if (rs.nSend > 1) {
        ctx.sync();  // dst is read by other threads than wrote it
        for (uint32_t k = 1; k < rs.nSend; ++k) ctx.copy(p.out[k], dst, n);
      }
      break;
    default: break;  // local kinds never get here (checked by the caller)
  }
}

/// The team runs a local step (kCopy, kReduce).
template <class Ctx>
GROVE_HD void runLocal(Ctx& ctx, const DevCall& call, const DevStep& s, const uint8_t* src,
                       uint8_t* dst, uint32_t esz) {
  const uint64_t bytes = s.bytes;
  if (static_cast<plan::StepKind>(s.kind) == plan::StepKind::kReduce) {
    const void* srcs[2] = {dst, src};  // dst = dst op src
    ctx.reduce(call.reduce, dst, nullptr, srcs, 2, bytes / esz, s.final != 0);
    return;
  }
  if (dst == src) return;
  const bool overlap = src < dst + bytes && dst < src + bytes;
  if (!overlap) {
    ctx.copy(dst, src, bytes);
    return;
  }
  if (dst < src) {  // front to back, pieces no longer than the distance
    const uint64_t dist = static_cast<uint64_t>(src - dst);
    for (uint64_t off = 0; off < bytes; off += dist) {
      ctx.copy(dst + off, src + off, minU64(dist, bytes - off));
      ctx.sync();
    }
  } else {  // back to front
    const uint64_t dist = static_cast<uint64_t>(dst - src);
    for (uint64_t end = bytes; end > 0;) {
      const uint64_t piece = minU64(dist, end);
      end -= piece;
      ctx.copy(dst + end, src + end, piece);
      ctx.sync();
    }
  }
}

/// Checks a step against the kinds' rules (a lowering bug otherwise) and
/// resolves its operands. Returns false for a step the interpreter cannot run.
GROVE_HD_INLINE bool resolveStep(const DevCall& call, const DevStep& s, uint32_t esz,
                                 const uint8_t** src, uint8_t** dst, StepRings* rs) {
  using plan::StepKind;
  if (esz == 0 || s.kind > static_cast<uint8_t>(StepKind::kReduce)) return false;
  const StepKind kind = static_cast<StepKind>(s.kind);
  const bool sends = kind == StepKind::kSend || kind == StepKind::kRecvReduceSend ||
                     kind == StepKind::kRecvReduceCopySend || kind == StepKind::kRecvCopySend;
  const bool local = kind == StepKind::kCopy || kind == StepKind::kReduce;
  const bool receives = !local && kind != StepKind::kSend;
  const bool reduces = kind == StepKind::kRecvReduce || kind == StepKind::kRecvReduceSend ||
                       kind == StepKind::kRecvReduceCopySend || kind == StepKind::kReduce;
  const bool readsSrc = kind != StepKind::kRecv && kind != StepKind::kRecvCopySend;
  const bool writesDst = kind != StepKind::kSend && kind != StepKind::kRecvReduceSend;
  if ((s.nSend != 0) != sends || (s.nRecv != 0) != receives) return false;
  if (s.nSend > kMaxStepLinks || s.nRecv > kMaxStepLinks) return false;
  if (s.nRecv > 1 && !reduces) return false;
  if (reduces && s.bytes % esz != 0) return false;
  if (s.srcSlot >= kMaxSlots || s.dstSlot >= kMaxSlots) return false;
  *src = readsSrc ? call.bufs[s.srcSlot] + s.srcOff : nullptr;
  *dst = writesDst ? call.bufs[s.dstSlot] + s.dstOff : nullptr;
  if ((readsSrc && call.bufs[s.srcSlot] == nullptr) ||
      (writesDst && call.bufs[s.dstSlot] == nullptr))
    return false;
  rs->nSend = s.nSend;
  rs->nRecv = s.nRecv;
  for (uint32_t k = 0; k < rs->nSend; ++k) {
    rs->send[k] = &call.program.sends[s.send[k]];
    if (rs->send[k]->capacity == 0) return false;
  }
  for (uint32_t k = 0; k < rs->nRecv; ++k) {
    rs->recv[k] = &call.program.recvs[s.recv[k]];
    if (rs->recv[k]->capacity == 0) return false;
  }
  return true;
}

/// The team streams one ring step. Returns a DevStatus (same on every thread).
template <class Ctx>
GROVE_HD uint32_t runRingStep(Ctx& ctx, const LaneEnv& env, const DevCall& call, const DevStep& s,
                              StepRings& rs, const uint8_t* src, uint8_t* dst, uint32_t esz) {
  const uint32_t gran = s.bytes % esz == 0 ? esz : 1;
  uint64_t v = 0;
  if (ctx.tid() == 0) {
    loadOwnCounters(ctx, rs);
    for (uint32_t k = 0; k < rs.nSend; ++k) rs.tailSeen[k] = rs.head[k] - rs.send[k]->capacity;
    for (uint32_t k = 0; k < rs.nRecv; ++k) rs.headSeen[k] = rs.tail[k];
    v = alignStreams(ctx, env, rs);
  }
  v = ctx.share(v);
  if (v != kDevOk) return static_cast<uint32_t>(v);
  loadOwnCounters(ctx, rs);
  for (uint64_t done = 0; done < s.bytes;) {
    v = 0;
    if (ctx.tid() == 0) {
      uint64_t want = minU64(s.bytes - done, kDevPieceBytes);
      for (uint32_t k = 0; k < rs.nSend; ++k)
        want = minU64(want, rs.send[k]->capacity - rs.head[k] % rs.send[k]->capacity);
      for (uint32_t k = 0; k < rs.nRecv; ++k)
        want = minU64(want, rs.recv[k]->capacity - rs.tail[k] % rs.recv[k]->capacity);
      want -= want % gran;
      v = want == 0 ? (kFailBit | kDevBadStep) : pollPiece(ctx, env, rs, want, gran);
    }
    v = ctx.share(v);
    if ((v & kFailBit) != 0) return static_cast<uint32_t>(v & 0xffffffffu);
    const uint64_t n = v;
    movePiece(ctx, call, s, rs, src == nullptr ? nullptr : src + done,
              dst == nullptr ? nullptr : dst + done, n, esz);
    ctx.fenceRelease();
    ctx.sync();
    for (uint32_t k = 0; k < rs.nSend; ++k) {
      rs.head[k] += n;
      if (ctx.tid() == 0) ctx.storeRelease(rs.send[k]->head, rs.head[k]);
    }
    for (uint32_t k = 0; k < rs.nRecv; ++k) {
      rs.tail[k] += n;
      if (ctx.tid() == 0) ctx.storeRelease(rs.recv[k]->tail, rs.tail[k]);
    }
    done += n;
  }
  return kDevOk;
}

/// Thread 0 of the failing lane: claims the launch's status and, if first,
/// records where it stopped.
template <class Ctx>
GROVE_HD void recordFailure(Ctx& ctx, DevControl* ctl, uint32_t status, uint32_t call,
                            uint32_t phase, uint32_t lane, uint32_t step) {
  if (ctl == nullptr || ctx.tid() != 0) return;
  if (!ctx.claimStatus(&ctl->status, status)) return;
  ctl->failedCall = call;
  ctl->failedPhase = phase;
  ctl->failedLane = lane;
  ctl->failedStep = step;
}

}  // namespace lane_detail

/// Runs lane `lane` (index within the phase) of phase `phase` of `call` with
/// the calling team; every thread of the team calls it with the same
/// arguments. A lane index past the phase's lanes returns kDevOk at once.
/// Returns kDevOk when the lane is done, else the DevStatus it stopped with
/// (recorded in *ctl when this lane failed first). `ctl` may be null (no
/// abort, failure record or deadline).
template <class Ctx>
GROVE_HD uint32_t runLane(const DevCall& call, uint32_t callIndex, uint32_t phase, uint32_t lane,
                          Ctx& ctx, DevControl* ctl) {
  using namespace lane_detail;
  const DevProgramView& prog = call.program;
  if (phase >= prog.nPhases) return kDevOk;
  const DevPhase& ph = prog.phases[phase];
  if (lane >= ph.end - ph.begin) return kDevOk;
  const DevLane& ln = prog.lanes[ph.begin + lane];
  const LaneEnv env{ctl, ctl == nullptr || ctx.tid() != 0 ? 0 : ctl->timeoutNs};  // thread 0 waits
  const uint32_t esz = devDtypeSize(call.reduce.dtype);
  for (uint32_t i = ln.begin; i < ln.end; ++i) {
    const DevStep& s = prog.steps[i];
    if (s.bytes == 0) continue;  // no bytes, no padding (lowering drops these anyway)
    const uint8_t* src = nullptr;
    uint8_t* dst = nullptr;
    StepRings rs;
    uint32_t status = kDevOk;
    ctx.sync();  // earlier steps' stores and publishes are seen by the whole team
    if (!resolveStep(call, s, esz, &src, &dst, &rs)) {
      status = kDevBadStep;
    } else if (rs.nSend == 0 && rs.nRecv == 0) {
      runLocal(ctx, call, s, src, dst, esz);
    } else {
      status = runRingStep(ctx, env, call, s, rs, src, dst, esz);
    }
    if (status != kDevOk) {
      recordFailure(ctx, ctl, status, callIndex, phase, lane, i - ln.begin);
      return status;
    }
  }
  ctx.sync();
  return kDevOk;
}

}  // namespace grove::exec::dev

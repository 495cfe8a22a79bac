// The host executor's data movement: pieces of steps through the links'
// zero-copy views or the direct path, lanes visited round-robin, and waits
// on what the blocked lanes need. See host_executor.cc for how it works.
#include <algorithm>
#include <cstring>

#include "exec/runner.h"
#include "kernels/cpu/reduce.h"

namespace grove::exec::detail {

uint64_t Runner::alignSend(SendLink& link) {
  uint64_t pad = plan::wirePad(link.position);
  if (pad == 0) return 0;
  void* p = nullptr;
  size_t space = link.half->reserve(&p);
  size_t n = space < pad ? space : pad;
  if (n == 0) return 0;
  std::memset(p, 0, n);
  link.half->commit(n);
  link.position += n;
  return n;
}

uint64_t Runner::alignRecv(RecvLink& link) {
  uint64_t pad = plan::wirePad(link.position);
  if (pad == 0) return 0;
  const void* p = nullptr;
  size_t avail = link.half->peek(&p);
  size_t n = avail < pad ? avail : pad;
  if (n == 0) return 0;
  link.half->consume(n);
  link.position += n;
  return n;
}

// Commits what fits of the link's call tag; true when bytes moved.
bool Runner::sendTag(SendLink& link) {
  const CallTag t = linkTag(*tag_, link.tagBytes);
  void* p = nullptr;
  size_t space = link.half->reserve(&p);
  size_t n = std::min<size_t>(space, sizeof(CallTag) - link.tagDone);
  if (n == 0) return false;
  std::memcpy(p, reinterpret_cast<const uint8_t*>(&t) + link.tagDone, n);
  link.half->commit(n);
  link.tagDone += static_cast<uint32_t>(n);
  if (link.tagDone == sizeof(CallTag)) {
    link.tagPending = false;
    link.position += sizeof(CallTag);
  }
  return true;
}

// Takes what has arrived of the peer's call tag; checks it once whole.
bool Runner::recvTag(RecvLink& link) {
  const void* p = nullptr;
  size_t avail = link.half->peek(&p);
  size_t n = std::min<size_t>(avail, sizeof(CallTag) - link.tagDone);
  if (n == 0) return false;
  std::memcpy(reinterpret_cast<uint8_t*>(&link.tagIn) + link.tagDone, p, n);
  link.half->consume(n);
  link.tagDone += static_cast<uint32_t>(n);
  if (link.tagDone == sizeof(CallTag)) {
    link.tagPending = false;
    link.position += sizeof(CallTag);
    checkCallTag(link.tagIn, linkTag(*tag_, link.tagBytes));
  }
  return true;
}

// Local steps (no streams): bounded pieces so other lanes keep moving.
uint64_t Runner::localPiece(const Resolved& r, uint64_t done) {
  uint64_t n = r.bytes - done;
  if (r.kind == StepKind::kCopy) {
    if (r.overlap) {
      std::memmove(r.dst, r.src, n);  // one piece: memmove's direction must see it all
      return n;
    }
    if (n > kLocalPieceBytes) n = kLocalPieceBytes - kLocalPieceBytes % r.gran;
    kernels::copy(r.dst + done, r.src + done, n);
    return n;
  }
  if (n > kLocalPieceBytes) n = kLocalPieceBytes - kLocalPieceBytes % r.gran;
  kernels::reduce(spec_.dtype, spec_.op, r.dst + done, nullptr, r.dst + done, r.src + done,
                  n / esz_, r.final, spec_.nranks);
  return n;
}

// Reduces one piece of a reducing receive: src with each source in order
// (ins[k] holds `count` elements from source k), into dst, the outgoing
// buffer `out`, or both, as the kind says. A fan-in step accumulates in its
// first target; `final` (avg's division) applies at the last source only.
void Runner::reducePiece(const Resolved& r, uint64_t done, uint8_t* out, const void* const* ins,
                         size_t count) {
  uint8_t* acc = r.kind == StepKind::kRecvReduceSend ? out : r.dst + done;
  uint8_t* also = r.kind == StepKind::kRecvReduceCopySend ? out : nullptr;
  const uint32_t n = 1 + r.nMoreIn;
  for (uint32_t k = 0; k < n; ++k) {
    const bool last = k + 1 == n;
    kernels::reduce(spec_.dtype, spec_.op, acc, last ? also : nullptr, k == 0 ? r.src + done : acc,
                    ins[k], count, r.final && last, spec_.nranks);
  }
}

// Sends up to n bytes of `from` on `link`: straight to the kernel where its
// half can (sockets), else copied into what its buffer has free. Returns
// the bytes taken (0: the link is full now).
uint64_t Runner::sendFrom(SendLink& link, const uint8_t* from, uint64_t n) {
  ptrdiff_t w = link.half->sendDirect(from, n);
  if (w < 0) {
    void* p = nullptr;
    w = static_cast<ptrdiff_t>(std::min<uint64_t>(link.half->reserve(&p), n));
    if (w > 0) {
      std::memcpy(p, from, static_cast<size_t>(w));
      link.half->commit(static_cast<size_t>(w));
    }
  }
  link.position += static_cast<uint64_t>(w);
  return static_cast<uint64_t>(w);
}

// Moves one piece of step r and advances `done` by the data bytes moved.
// Returns true if anything moved (pad bytes included).
// Direct path for pure data movement over halves that can bypass their
// buffers (sockets): a send goes from the user's buffer to the kernel, a
// receive from the kernel into the user's buffer, and a forwarding step
// receives into dst and then sends from dst -- no staging copies. Returns the
// bytes moved, or -1 when the halves cannot (shared memory, bytes already
// staged): the caller then uses the buffered path.
ptrdiff_t Runner::moveDirect(const Resolved& r, LaneState& lane) {
  if (r.nMore != 0) return -1;    // fan-out: moveFanOut, or in step on the buffered path
  if (r.nMoreIn != 0) return -1;  // fan-in: the buffered path reduces every source
  switch (r.kind) {
    case StepKind::kSend: {
      ptrdiff_t k = r.out->half->sendDirect(r.src + lane.done, r.bytes - lane.done);
      if (k > 0) {
        r.out->position += static_cast<uint64_t>(k);
        lane.done += static_cast<uint64_t>(k);
      }
      return k;
    }
    case StepKind::kRecv: {
      ptrdiff_t k = r.in->half->recvDirect(r.dst + lane.done, r.bytes - lane.done);
      if (k > 0) {
        r.in->position += static_cast<uint64_t>(k);
        lane.done += static_cast<uint64_t>(k);
      }
      return k;
    }
    case StepKind::kRecvCopySend: {
      if (lane.received < lane.done) lane.received = lane.done;  // after buffered pieces
      ptrdiff_t moved = 0;
      if (lane.received < r.bytes) {
        ptrdiff_t k = r.in->half->recvDirect(r.dst + lane.received, r.bytes - lane.received);
        if (k < 0 && lane.received == lane.done) return -1;  // buffered bytes: fused path
        if (k > 0) {
          r.in->position += static_cast<uint64_t>(k);
          lane.received += static_cast<uint64_t>(k);
          moved += k;
        }
      }
      uint64_t pending = lane.received - lane.done;
      if (pending == 0) return moved;
      const uint64_t s = sendFrom(*r.out, r.dst + lane.done, pending);
      lane.done += s;
      return moved + static_cast<ptrdiff_t>(s);
    }
    default: return -1;
  }
}

// A step that fans out from a buffer (fansOutFromBuffer): what has arrived
// is made into dst first (received, or reduced with src; a send's source
// is whole from the start), then each destination is sent what it has not
// had of it, as far as its link takes now. A destination whose link is
// slow does not hold back the others, nor the input (dst keeps the bytes):
// the step ends when the last destination has had them all.
bool Runner::moveFanOut(const Resolved& r, LaneState& lane) {
  bool moved = false;
  const bool sendOnly = r.kind == StepKind::kSend;
  if (!sendOnly && lane.received < r.bytes) {
    uint64_t n = r.bytes - lane.received;
    ptrdiff_t direct = -1;
    if (r.kind == StepKind::kRecvCopySend && r.nMoreIn == 0)
      direct = r.in->half->recvDirect(r.dst + lane.received, n);
    if (direct >= 0) {
      r.in->position += static_cast<uint64_t>(direct);
      lane.received += static_cast<uint64_t>(direct);
      moved = direct > 0;
    } else {
      const void* inPtrs[1 + plan::kMaxMoreRecvPeers] = {};
      const RecvList ins = recvsOf(r);
      for (uint32_t k = 0; k < ins.n; ++k)
        n = std::min<uint64_t>(n, ins.links[k]->half->peek(&inPtrs[k]));
      // A copy takes any bytes (what came straight into dst may end inside
      // an element); a reduction takes whole elements, and its bytes only
      // ever come this way.
      if (r.kind != StepKind::kRecvCopySend) n -= n % r.gran;
      if (n > 0) {
        if (r.kind == StepKind::kRecvCopySend)
          std::memcpy(r.dst + lane.received, inPtrs[0], n);
        else
          reducePiece(r, lane.received, nullptr, inPtrs, n / esz_);
        for (RecvLink* i : ins) {
          i->half->consume(n);
          i->position += n;
        }
        lane.received += n;
        moved = true;
      }
    }
  }
  const uint8_t* from = sendOnly ? r.src : r.dst;
  const uint64_t made = sendOnly ? r.bytes : lane.received;
  const SendList outs = sendsOf(r);
  uint64_t least = made;
  for (uint32_t k = 0; k < outs.n; ++k) {
    SendLink& link = *outs.links[k];
    uint64_t& sent = lane.sent[k];
    if (sent < made) {
      const uint64_t w = sendFrom(link, from + sent, made - sent);
      sent += w;
      moved = moved || w > 0;
    }
    least = std::min(least, sent);
  }
  lane.done = least;
  return moved;
}

bool Runner::movePiece(const Resolved& r, LaneState& lane) {
  uint64_t& done = lane.done;
  if (r.in == nullptr && r.out == nullptr) {
    done += localPiece(r, done);
    return true;
  }
  bool padded = false;
  if (!lane.begun) {
    if (tagsPerStep() && !lane.tagArmed) {
      armStepTags(r);
      lane.tagArmed = true;
    }
    bool aligned = true;
    for (SendLink* out : sendsOf(r)) {
      padded = (alignSend(*out) != 0) || padded;
      aligned = aligned && out->position % plan::kWireAlign == 0;
    }
    for (RecvLink* in : recvsOf(r)) {
      padded = (alignRecv(*in) != 0) || padded;
      aligned = aligned && in->position % plan::kWireAlign == 0;
    }
    if (!aligned) return padded;
    if (tag_ != nullptr) {
      bool tagged = true;
      for (SendLink* out : sendsOf(r)) {
        if (out->tagPending) padded = sendTag(*out) || padded;
        tagged = tagged && !out->tagPending;
      }
      for (RecvLink* in : recvsOf(r)) {
        if (in->tagPending) padded = recvTag(*in) || padded;
        tagged = tagged && !in->tagPending;
      }
      if (!tagged) return padded;
    }
    lane.begun = true;
  }
  if (fansOutFromBuffer(r)) return moveFanOut(r, lane) || padded;
  if (ptrdiff_t direct = moveDirect(r, lane); direct >= 0) return direct > 0 || padded;
  uint64_t n = r.bytes - done;
  const void* inPtrs[1 + plan::kMaxMoreRecvPeers] = {};
  void* outPtr = nullptr;
  const RecvList ins = recvsOf(r);
  for (uint32_t k = 0; k < ins.n; ++k) {
    size_t avail = ins.links[k]->half->peek(&inPtrs[k]);
    if (avail < n) n = avail;
  }
  void* morePtr[plan::kMaxMoreSendPeers] = {};
  if (r.out != nullptr && n >= r.gran) {
    size_t space = r.out->half->reserve(&outPtr);
    if (space < n) n = space;
    for (uint32_t k = 0; k < r.nMore && n >= r.gran; ++k) {
      space = r.more[k]->half->reserve(&morePtr[k]);
      if (space < n) n = space;
    }
  }
  n -= n % r.gran;
  if (n == 0) return padded;
  auto* in = static_cast<const uint8_t*>(inPtrs[0]);
  auto* out = static_cast<uint8_t*>(outPtr);
  size_t count = n / esz_;
  switch (r.kind) {
    case StepKind::kSend: std::memcpy(out, r.src + done, n); break;
    case StepKind::kRecv: std::memcpy(r.dst + done, in, n); break;
    case StepKind::kRecvReduce:
    case StepKind::kRecvReduceSend:
    case StepKind::kRecvReduceCopySend: reducePiece(r, done, out, inPtrs, count); break;
    case StepKind::kRecvCopySend:
      std::memcpy(r.dst + done, in, n);
      std::memcpy(out, in, n);
      break;
    default: throwInternalError("host executor: bad step kind");
  }
  for (RecvLink* i : ins) {
    i->half->consume(n);
    i->position += n;
  }
  for (uint32_t k = 0; k < r.nMore; ++k) std::memcpy(morePtr[k], out, n);
  for (SendLink* o : sendsOf(r)) {
    o->half->commit(n);
    o->position += n;
  }
  done += n;
  return true;
}

// Moves pieces of the lane's steps until it is done, blocked, or has used
// its share of this pass; true if anything moved.
bool Runner::visitLane(LaneState& lane) {
  bool moved = false;
  uint64_t budget = kVisitBytes;
  while (lane.cur != lane.end) {
    const Resolved& r = *lane.cur;
    const uint64_t before = lane.moved(r);
    if (!movePiece(r, lane)) break;
    moved = true;
    budget -= std::min(budget, lane.moved(r) - before);
    if (lane.done >= r.bytes) lane.next();
    if (budget == 0) break;  // give the other lanes a turn
  }
  return moved;
}

void Runner::flushAll() {
  for (SendLink* s : phaseSends_) s->half->flush();
}

void Runner::runPhase(size_t begin, size_t end) {
  lanes_.clear();
  phaseSends_.clear();
  for (size_t l = begin; l < end; ++l) {
    const auto& range = laneRanges_[l];
    if (range.first == range.second) continue;
    lanes_.push_back(LaneState{&steps_[range.first], steps_.data() + range.second, 0});
    for (size_t i = range.first; i < range.second; ++i)
      for (SendLink* out : sendsOf(steps_[i]))
        if (std::find(phaseSends_.begin(), phaseSends_.end(), out) == phaseSends_.end())
          phaseSends_.push_back(out);
  }
  if (!checked_) checkPhaseLinks(begin, end);
  size_t active = lanes_.size();
  while (active != 0) {
    waiter_.checkAbort();
    bool moved = false;
    for (LaneState& lane : lanes_) {
      if (lane.cur == lane.end) continue;
      if (visitLane(lane)) moved = true;
      if (lane.cur == lane.end) --active;
    }
    flushAll();
    if (moved) {
      waiter_.progressed();
    } else {
      waitForPeers();
    }
  }
}

// A wait sleeps on `fd` for `events`; a link without one (-1: shared
// memory) means the wait cannot block in poll().
void Runner::watch(int fd, short events, bool& coverAll) {
  if (fd < 0)
    coverAll = false;
  else
    pollFds_.push_back(pollfd{fd, events, 0});
}

// What a lane whose step fans out from a buffer (moveFanOut) waits for:
// input it has not had, where some source holds less than a piece (any
// byte for a copy, an element for a reduction); destinations that have
// bytes made for them, or staged, that their link did not take (before the
// step's first byte only those with staged padding or tags). False when it
// can move now: every source holds a piece (a peek here may have taken
// arriving bytes into a link's buffer, which no descriptor announces).
bool Runner::fanOutWaits(const LaneState& lane, bool& noted, bool& coverAll) {
  const Resolved& r = *lane.cur;
  const bool sendOnly = r.kind == StepKind::kSend;
  const uint64_t need = r.kind == StepKind::kRecvCopySend ? 1 : r.gran;
  bool inputWaits = false;
  if (!sendOnly && (lane.received < r.bytes || !lane.begun)) {
    bool allHold = true;
    for (RecvLink* in : recvsOf(r)) {
      const void* p;
      if (in->half->peek(&p) >= (lane.begun ? need : 1)) continue;
      allHold = false;
      watch(in->half->pollFd(), POLLIN, coverAll);
    }
    if (allHold && lane.begun) return false;
    inputWaits = !allHold;
  }
  const uint64_t made = sendOnly ? r.bytes : lane.received;
  const SendList outs = sendsOf(r);
  int blockedOut = -1;
  for (uint32_t k = 0; k < outs.n; ++k) {
    transport::SendHalf& half = *outs.links[k]->half;
    if (half.flush() && !(lane.begun && lane.sent[k] < made)) continue;
    if (blockedOut < 0) blockedOut = k == 0 ? r.step->sendPeer : r.step->moreSendPeers[k - 1];
    watch(half.pollFd(), POLLOUT, coverAll);
  }
  if (!noted) {  // the first blocked lane's peers, for the hang doctor
    waiter_.context().noteBlockedOn(inputWaits ? r.step->recvPeer : -1, blockedOut);
    noted = true;
  }
  return true;
}

// Waits for the links the blocked lanes need. Socket links give file
// descriptors to sleep on: a receive that has nothing buffered waits for
// POLLIN, a send with bytes still staged waits for POLLOUT. If every blocked
// lane waits only on sockets, the wait can block in poll(); a shared-memory
// link among them keeps it to short naps.
void Runner::waitForPeers() {
  pollFds_.clear();
  bool coverAll = true;
  bool noted = false;
  for (const LaneState& lane : lanes_) {
    if (lane.cur == lane.end) continue;
    const Resolved& r = *lane.cur;
    if (fansOutFromBuffer(r)) {
      if (!fanOutWaits(lane, noted, coverAll)) return;  // it can move now
      continue;
    }
    if (!noted) {  // the first blocked lane's peers, for the hang doctor
      waiter_.context().noteBlockedOn(r.in != nullptr ? r.step->recvPeer : -1,
                                      r.out != nullptr ? r.step->sendPeer : -1);
      noted = true;
    }
    // A pure send is blocked on the kernel's send buffer; a pure receive (or
    // a forward with nothing pending) on incoming bytes. (A fan-out forward
    // that reduces into its send buffer only takes the buffered path: it
    // waits like the fused kinds.)
    bool directForward = r.kind == StepKind::kRecvCopySend && r.nMore == 0;
    bool forwarding = directForward && lane.received > lane.done;
    bool pureSend = r.kind == StepKind::kSend || forwarding;
    bool awaitingInput = r.kind == StepKind::kRecv || (directForward && !forwarding);
    for (RecvLink* in : recvsOf(r)) {
      const void* p;
      int fd = in->half->pollFd();
      if (fd < 0)
        coverAll = false;
      else if (awaitingInput || (!pureSend && in->half->peek(&p) == 0))
        pollFds_.push_back(pollfd{fd, POLLIN, 0});
    }
    for (SendLink* out : sendsOf(r)) {
      int fd = out->half->pollFd();
      if (fd < 0)
        coverAll = false;
      else if (pureSend || (!awaitingInput && !out->half->flush()))
        pollFds_.push_back(pollfd{fd, POLLOUT, 0});
    }
  }
  waiter_.wait(pollFds_.data(), pollFds_.size(), coverAll && !pollFds_.empty());
}

void Runner::finalFlush() {
  for (;;) {
    bool flushed = true;
    pollFds_.clear();
    bool coverAll = true;
    for (SendLink* s : allSends_) {
      if (s->half->flush()) continue;
      flushed = false;
      watch(s->half->pollFd(), POLLOUT, coverAll);
    }
    if (flushed) return;
    waiter_.wait(pollFds_.data(), pollFds_.size(), coverAll);
  }
}

}  // namespace grove::exec::detail

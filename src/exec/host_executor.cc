// The host executor (see host_executor.h for the contract).
//
// How it works:
//
// Setup. runProgram first lowers the program into a flat array of resolved
// steps: buffer references become raw pointers, (peer, channel) pairs become
// SendLink* / RecvLink* looked up once in the LinkTable, zero-byte steps are
// dropped (they are no-ops: no bytes, no padding), and each step gets its
// piece granularity (the element size; 1 for plain byte moves whose size is
// not a multiple of it). Every later decision is pointer arithmetic on that
// array: no allocation, map lookup or string work on the hot path.
//
// Progress. Phases run in order. Within a phase, one thread visits the lanes
// round-robin; a visit moves pieces of the lane's current step until the step
// is done (then it goes on with the next step), nothing can move now, or the
// visit has moved 1 MiB (so one busy lane cannot starve the others). A
// piece is as large as everything currently allows: the bytes received and
// contiguous in the incoming buffer (peek), the contiguous free space in the
// outgoing buffer (reserve), what is left of the step, rounded down to the
// granularity. Fused steps work on those zero-copy views directly: a
// RecvReduceSend reduces (src op received) straight into the reserved space.
// Local steps (copy, reduce) go in pieces of 256 KiB for the same fairness;
// a copy whose source and destination overlap is one memmove.
//
// Direct path. Halves that can bypass their buffers (sockets) move pure data
// without staging copies: a send goes from the user's buffer to the kernel, a
// receive from the kernel into the user's buffer, and a forwarding step
// receives into its destination and then sends from there (a second counter
// tracks bytes received ahead of bytes forwarded). Shared-memory halves
// decline, and the buffered path above runs.
//
// Wire rule. Before the first byte of a step, every stream the step touches
// is brought to a 16-byte-aligned position: the sender reserves and commits
// zero bytes up to the boundary, the receiver consumes the same number. The
// positions live in SendLink/RecvLink, so the rule holds across programs and
// collectives that share links.
//
// Waiting. After every pass the phase's send halves are flushed (free for
// shared memory; pushes held bytes for sockets). A pass that moved nothing
// calls Waiter::wait() (spin, yield, nap; timeout and abort) with the socket
// descriptors the blocked lanes wait on, so it sleeps in poll() and wakes on
// arrival; any movement calls progressed(). Work lists are per-thread and
// reused, so a small collective allocates nothing. After the last phase the executor waits until every
// send half it used reports flush() == true. A timeout or a broken link is
// rethrown with a description of what each lane was doing.
//
// Checks. Setup rejects what would corrupt memory or streams: a step that
// writes the input buffer, a null or unbound buffer, a step past the scratch
// size, a reduction of a partial element, and two lanes of one phase on one
// stream (their bytes would interleave unpredictably).
#include "exec/host_executor.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "algorithms/step_traits.h"
#include "base/dtype.h"
#include "base/error.h"
#include "kernels/cpu/reduce.h"

namespace grove::exec {

using plan::StepKind;
using transport::LinkKey;

// ------------------------------------------------------------------ helpers

namespace {

/// Most bytes a local copy/reduce does in one piece, so other lanes keep streaming.
constexpr uint64_t kLocalPieceBytes = 256 << 10;
/// Bytes after which a lane's visit ends even if it could go on (fairness).
constexpr uint64_t kVisitBytes = 1 << 20;
/// The wire rule's alignment of every step's start in each stream.
constexpr uint64_t kStepAlign = 16;

/// A step lowered to pointers.
struct Resolved {
  StepKind kind;
  bool final;
  bool overlap;         // kCopy whose src and dst overlap: one memmove
  uint32_t gran;        // piece granularity in bytes
  SendLink* out;        // null unless the kind sends
  RecvLink* in;         // null unless the kind receives
  const uint8_t* src;
  uint8_t* dst;
  uint64_t bytes;
  const plan::Step* step;  // for error messages
  uint32_t phase, lane, index;
};

/// Where a lane is.
struct LaneState {
  const Resolved* cur;
  const Resolved* end;
  uint64_t done;          // bytes of *cur done (for a forwarding step: forwarded)
  uint64_t received = 0;  // forwarding step on the direct path: bytes received into dst
};

}  // namespace

// ------------------------------------------------------------------ the runner

namespace {

/// The runner's work lists; one set per thread, cleared (not freed) per call.
struct WorkLists {
  std::vector<Resolved> steps;
  std::vector<size_t> phaseBegin;
  std::vector<std::pair<size_t, size_t>> laneRanges;
  std::vector<LaneState> lanes;
  std::vector<SendLink*> phaseSends;
  std::vector<SendLink*> allSends;
  std::vector<pollfd> pollFds;
};

WorkLists& workLists() {
  thread_local WorkLists lists;
  lists.steps.clear();
  lists.phaseBegin.clear();
  lists.laneRanges.clear();
  lists.lanes.clear();
  lists.phaseSends.clear();
  lists.allSends.clear();
  lists.pollFds.clear();
  return lists;
}

class Runner {
 public:
  Runner(const plan::Program& program, const Buffers& buffers, const ReduceSpec& spec,
         LinkTable& links, const WaitContext& wait)
      : program_(program), buffers_(buffers), spec_(spec), links_(links),
        waiter_(wait, "waiting for peers in a host program") {}

  void run();

 private:
  void resolve();
  uint8_t* bufferBase(const plan::BufRef& ref, bool write, const plan::Step& s);
  void checkPhaseLinks(size_t begin, size_t end);
  void runPhase(size_t begin, size_t end);
  bool visitLane(LaneState& lane);
  bool movePiece(const Resolved& r, LaneState& lane);
  ptrdiff_t moveDirect(const Resolved& r, LaneState& lane);
  uint64_t localPiece(const Resolved& r, uint64_t done);
  static uint64_t alignSend(SendLink& link);
  static uint64_t alignRecv(RecvLink& link);
  void flushAll();
  void waitForPeers();
  void finalFlush();
  [[noreturn]] void rethrowWithContext(const Error& e, const char* where);

  const plan::Program& program_;
  const Buffers& buffers_;
  const ReduceSpec& spec_;
  LinkTable& links_;
  Waiter waiter_;
  size_t esz_ = 1;
  // Work lists live in a per-thread WorkLists reused across calls, so a
  // small collective allocates nothing.
  WorkLists& work_ = workLists();
  std::vector<Resolved>& steps_ = work_.steps;  // all non-empty steps, phase by phase, lane by lane
  std::vector<size_t>& phaseBegin_ = work_.phaseBegin;  // index into laneRanges_ of each phase's first lane
  std::vector<std::pair<size_t, size_t>>& laneRanges_ = work_.laneRanges;  // [begin, end) into steps_
  std::vector<LaneState>& lanes_ = work_.lanes;          // the current phase's lanes
  std::vector<SendLink*>& phaseSends_ = work_.phaseSends;  // send links of the current phase
  std::vector<SendLink*>& allSends_ = work_.allSends;      // every send link used
  std::vector<pollfd>& pollFds_ = work_.pollFds;           // what a wait sleeps on (sockets)
};

uint8_t* Runner::bufferBase(const plan::BufRef& ref, bool write, const plan::Step& s) {
  const void* base = nullptr;
  const char* name = "?";
  switch (ref.buf) {
    case plan::Buf::kInput:
      if (write) throwInternalError("host executor: a step writes the input buffer");
      base = buffers_.input;
      name = "input";
      break;
    case plan::Buf::kOutput:
      base = buffers_.output;
      name = "output";
      break;
    case plan::Buf::kScratch:
      if (ref.offset + s.bytes > program_.scratchBytes) {
        throwInternalError("host executor: step reaches past the scratch buffer (" +
                           std::to_string(ref.offset + s.bytes) + " > " +
                           std::to_string(program_.scratchBytes) + " bytes)");
      }
      base = buffers_.scratch;
      name = "scratch";
      break;
    case plan::Buf::kExtra:
      if (ref.index >= buffers_.extra.size()) {
        throwInvalidArgument("host executor: extra buffer " + std::to_string(ref.index) +
                             " not bound (" + std::to_string(buffers_.extra.size()) + " given)");
      }
      base = buffers_.extra[ref.index];
      name = "extra";
      break;
  }
  if (base == nullptr) {
    throwInvalidArgument(std::string("host executor: a ") + plan::stepKindName(s.kind) +
                         " step uses the " + name + " buffer, which is null");
  }
  return static_cast<uint8_t*>(const_cast<void*>(base));
}

void Runner::resolve() {
  esz_ = dtypeSize(spec_.dtype);
  if (esz_ == 0) throwInvalidArgument("host executor: invalid data type");
  if (!opValid(spec_.op)) throwInvalidArgument("host executor: invalid reduction op");
  for (uint32_t p = 0; p < program_.phases.size(); ++p) {
    phaseBegin_.push_back(laneRanges_.size());
    const auto& lanes = program_.phases[p].lanes;
    for (uint32_t l = 0; l < lanes.size(); ++l) {
      size_t first = steps_.size();
      for (uint32_t i = 0; i < lanes[l].steps.size(); ++i) {
        const plan::Step& s = lanes[l].steps[i];
        if (s.bytes == 0) continue;
        Resolved r{};
        r.kind = s.kind;
        r.final = s.final;
        r.bytes = s.bytes;
        r.step = &s;
        r.phase = p;
        r.lane = l;
        r.index = i;
        bool reduces = plan::stepReduces(s.kind);
        if (reduces && s.bytes % esz_ != 0) {
          throwInternalError(std::string("host executor: ") + plan::stepKindName(s.kind) + " step of " +
                             std::to_string(s.bytes) + " bytes is not a whole number of " +
                             std::to_string(esz_) + "-byte elements");
        }
        r.gran = static_cast<uint32_t>(s.bytes % esz_ == 0 ? esz_ : 1);
        if (plan::stepSends(s.kind)) r.out = &links_.sendLink(LinkKey{s.sendPeer, s.channel});
        if (plan::stepReceives(s.kind)) r.in = &links_.recvLink(LinkKey{s.recvPeer, s.channel});
        if (plan::stepReadsSrc(s.kind)) r.src = bufferBase(s.src, false, s) + s.src.offset;
        if (plan::stepWritesDst(s.kind)) r.dst = bufferBase(s.dst, true, s) + s.dst.offset;
        if (s.kind == StepKind::kCopy) {
          r.overlap = r.src < r.dst + s.bytes && r.dst < r.src + s.bytes;
        }
        if (r.out != nullptr &&
            std::find(allSends_.begin(), allSends_.end(), r.out) == allSends_.end()) {
          allSends_.push_back(r.out);
        }
        steps_.push_back(r);
      }
      laneRanges_.emplace_back(first, steps_.size());
    }
  }
  phaseBegin_.push_back(laneRanges_.size());
}

// Two lanes of one phase on one stream would interleave their bytes in an
// order nobody can predict: a planner bug, reported as such.
void Runner::checkPhaseLinks(size_t begin, size_t end) {
  std::vector<std::pair<const void*, size_t>> users;  // distinct (link, lane) pairs
  for (size_t l = begin; l < end; ++l) {
    for (size_t i = laneRanges_[l].first; i < laneRanges_[l].second; ++i) {
      const Resolved& r = steps_[i];
      for (const void* link : {static_cast<const void*>(r.out), static_cast<const void*>(r.in)}) {
        if (link == nullptr) continue;
        bool known = false;
        for (const auto& u : users) {
          if (u.first != link) continue;
          if (u.second != l) {
            throwInternalError("host executor: phase " + std::to_string(r.phase) +
                               " uses one stream in two lanes (lanes " +
                               std::to_string(steps_[laneRanges_[u.second].first].lane) +
                               " and " + std::to_string(r.lane) + ")");
          }
          known = true;
        }
        if (!known) users.emplace_back(link, l);
      }
    }
  }
}

uint64_t Runner::alignSend(SendLink& link) {
  uint64_t pad = (kStepAlign - link.position % kStepAlign) % kStepAlign;
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
  uint64_t pad = (kStepAlign - link.position % kStepAlign) % kStepAlign;
  if (pad == 0) return 0;
  const void* p = nullptr;
  size_t avail = link.half->peek(&p);
  size_t n = avail < pad ? avail : pad;
  if (n == 0) return 0;
  link.half->consume(n);
  link.position += n;
  return n;
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

// Moves one piece of step r and advances `done` by the data bytes moved.
// Returns true if anything moved (pad bytes included).
// Direct path for pure data movement over halves that can bypass their
// buffers (sockets): a send goes from the user's buffer to the kernel, a
// receive from the kernel into the user's buffer, and a forwarding step
// receives into dst and then sends from dst -- no staging copies. Returns the
// bytes moved, or -1 when the halves cannot (shared memory, bytes already
// staged): the caller then uses the buffered path.
ptrdiff_t Runner::moveDirect(const Resolved& r, LaneState& lane) {
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
      ptrdiff_t s = r.out->half->sendDirect(r.dst + lane.done, pending);
      if (s < 0) {  // the out half buffers: copy what fits
        void* out = nullptr;
        size_t space = r.out->half->reserve(&out);
        s = static_cast<ptrdiff_t>(std::min<uint64_t>(space, pending));
        std::memcpy(out, r.dst + lane.done, static_cast<size_t>(s));
        r.out->half->commit(static_cast<size_t>(s));
      }
      r.out->position += static_cast<uint64_t>(s);
      lane.done += static_cast<uint64_t>(s);
      return moved + s;
    }
    default: return -1;
  }
}

bool Runner::movePiece(const Resolved& r, LaneState& lane) {
  uint64_t& done = lane.done;
  if (r.in == nullptr && r.out == nullptr) {
    done += localPiece(r, done);
    return true;
  }
  bool padded = false;
  if (done == 0 && lane.received == 0) {
    bool aligned = true;
    if (r.out != nullptr) {
      padded = alignSend(*r.out) != 0;
      aligned = r.out->position % kStepAlign == 0;
    }
    if (r.in != nullptr) {
      padded = (alignRecv(*r.in) != 0) || padded;
      aligned = aligned && r.in->position % kStepAlign == 0;
    }
    if (!aligned) return padded;
  }
  if (ptrdiff_t direct = moveDirect(r, lane); direct >= 0) return direct > 0 || padded;
  uint64_t n = r.bytes - done;
  const void* inPtr = nullptr;
  void* outPtr = nullptr;
  if (r.in != nullptr) {
    size_t avail = r.in->half->peek(&inPtr);
    if (avail < n) n = avail;
  }
  if (r.out != nullptr && n >= r.gran) {
    size_t space = r.out->half->reserve(&outPtr);
    if (space < n) n = space;
  }
  n -= n % r.gran;
  if (n == 0) return padded;
  auto* in = static_cast<const uint8_t*>(inPtr);
  auto* out = static_cast<uint8_t*>(outPtr);
  size_t count = n / esz_;
  switch (r.kind) {
    case StepKind::kSend: std::memcpy(out, r.src + done, n); break;
    case StepKind::kRecv: std::memcpy(r.dst + done, in, n); break;
    case StepKind::kRecvReduce:
      kernels::reduce(spec_.dtype, spec_.op, r.dst + done, nullptr, r.src + done, in, count,
                      r.final, spec_.nranks);
      break;
    case StepKind::kRecvReduceSend:
      kernels::reduce(spec_.dtype, spec_.op, out, nullptr, r.src + done, in, count, r.final,
                      spec_.nranks);
      break;
    case StepKind::kRecvReduceCopySend:
      kernels::reduce(spec_.dtype, spec_.op, r.dst + done, out, r.src + done, in, count,
                      r.final, spec_.nranks);
      break;
    case StepKind::kRecvCopySend:
      std::memcpy(r.dst + done, in, n);
      std::memcpy(out, in, n);
      break;
    default: throwInternalError("host executor: bad step kind");
  }
  if (r.in != nullptr) {
    r.in->half->consume(n);
    r.in->position += n;
  }
  if (r.out != nullptr) {
    r.out->half->commit(n);
    r.out->position += n;
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
    uint64_t before = lane.done;
    if (!movePiece(r, lane)) break;
    moved = true;
    budget -= std::min(budget, lane.done - before);
    if (lane.done >= r.bytes) {
      ++lane.cur;
      lane.done = 0;
      lane.received = 0;
    }
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
    for (size_t i = range.first; i < range.second; ++i) {
      SendLink* out = steps_[i].out;
      if (out != nullptr &&
          std::find(phaseSends_.begin(), phaseSends_.end(), out) == phaseSends_.end()) {
        phaseSends_.push_back(out);
      }
    }
  }
  checkPhaseLinks(begin, end);
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

// Waits for the links the blocked lanes need. Socket links give file
// descriptors to sleep on: a receive that has nothing buffered waits for
// POLLIN, a send with bytes still staged waits for POLLOUT. If every blocked
// lane waits only on sockets, the wait can block in poll(); a shared-memory
// link among them keeps it to short naps.
void Runner::waitForPeers() {
  pollFds_.clear();
  bool coverAll = true;
  for (const LaneState& lane : lanes_) {
    if (lane.cur == lane.end) continue;
    const Resolved& r = *lane.cur;
    // A pure send is blocked on the kernel's send buffer; a pure receive (or
    // a forward with nothing pending) on incoming bytes.
    bool forwarding = r.kind == StepKind::kRecvCopySend && lane.received > lane.done;
    bool pureSend = r.kind == StepKind::kSend || forwarding;
    bool awaitingInput = r.kind == StepKind::kRecv ||
                         (r.kind == StepKind::kRecvCopySend && !forwarding);
    if (r.in != nullptr) {
      const void* p;
      int fd = r.in->half->pollFd();
      if (fd < 0) coverAll = false;
      else if (awaitingInput || (!pureSend && r.in->half->peek(&p) == 0))
        pollFds_.push_back(pollfd{fd, POLLIN, 0});
    }
    if (r.out != nullptr) {
      int fd = r.out->half->pollFd();
      if (fd < 0) coverAll = false;
      else if (pureSend || (!awaitingInput && !r.out->half->flush()))
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
      int fd = s->half->pollFd();
      if (fd < 0) coverAll = false;
      else pollFds_.push_back(pollfd{fd, POLLOUT, 0});
    }
    if (flushed) return;
    waiter_.wait(pollFds_.data(), pollFds_.size(), coverAll);
  }
}

[[noreturn]] void Runner::rethrowWithContext(const Error& e, const char* where) {
  std::string msg = e.what();
  msg += " [program";
  if (!program_.algo.empty()) msg += " '" + program_.algo + "'";
  msg += std::string(" ") + where;
  for (const LaneState& lane : lanes_) {
    if (lane.cur == lane.end) continue;
    const Resolved& r = *lane.cur;
    msg += "; lane " + std::to_string(r.lane) + " step " +
           std::to_string(r.index) + " " + plan::stepKindName(r.kind) + " " + std::to_string(lane.done) +
           "/" + std::to_string(r.bytes) + " B";
    if (r.in != nullptr) {
      msg += " from rank " + std::to_string(r.step->recvPeer) + " ch " +
             std::to_string(r.step->channel);
    }
    if (r.out != nullptr) {
      msg += " to rank " + std::to_string(r.step->sendPeer) + " ch " +
             std::to_string(r.step->channel);
    }
  }
  msg += "]";
  throw Error(e.code(), msg);
}

void Runner::run() {
  resolve();
  size_t nPhases = phaseBegin_.size() - 1;
  for (size_t p = 0; p < nPhases; ++p) {
    try {
      runPhase(phaseBegin_[p], phaseBegin_[p + 1]);
    } catch (const Error& e) {
      std::string where = "in phase " + std::to_string(p);
      rethrowWithContext(e, where.c_str());
    }
  }
  lanes_.clear();
  try {
    finalFlush();
  } catch (const Error& e) {
    rethrowWithContext(e, "flushing its sends after the last phase");
  }
}

}  // namespace

void runProgram(const plan::Program& program, const Buffers& buffers, const ReduceSpec& spec,
                LinkTable& links, const WaitContext& wait) {
  Runner runner(program, buffers, spec, links, wait);
  runner.run();
}

}  // namespace grove::exec

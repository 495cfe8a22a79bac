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
// Fan-out. A step with several destinations whose bytes stay in a buffer
// -- a send's source, a forward's destination (it receives, or reduces,
// into dst before it sends) -- sends each destination from there at that
// link's own pace: what has arrived is made into dst as soon as it comes,
// and every destination is sent what it has not had yet, so one slow link
// holds back neither the other destinations nor the input, as the cost
// model's simulation assumes, and a rank that reads one destination's
// bytes only after another destination has had all of its own does not
// hang (the device interpreter keeps its destinations in step, and the
// deadlock check, ir/deadlock_sim.cc, assumes so for every program).
// Over sockets its sends go straight from that buffer to the kernel, and
// a single-source copy receives straight into dst: no staging copy. The
// step ends when the last destination has had every byte. A fan-out
// that reduces into its send buffer only (RecvReduceSend) has no such
// buffer: each piece is as large as the smallest free space among the
// destinations, produced once into the first and copied to the others, so
// they advance together.
//
// Fan-in. A reducing receive with several sources peeks every source link:
// the piece is as large as the least any of them holds, and it is reduced in
// the step's order -- result = src op r0, then result = result op r1, ... --
// with `final` (avg's division) only on the last source; then the same count
// is consumed from every source. Fan-in steps are reductions, so they always
// take the buffered path too.
//
// Direct path. Halves that can bypass their buffers (sockets) move pure data
// without staging copies: a send goes from the user's buffer to the kernel, a
// receive from the kernel into the user's buffer, and a forwarding step
// receives into its destination and then sends from there (a second counter
// tracks bytes received ahead of bytes forwarded). Shared-memory halves
// decline, and the buffered path above runs.
//
// Call tags. With a tag (call_tag.h), each link's first step of the call
// (of a send/recv batch: every step) first moves the 32-byte CallTag
// (after the alignment below): the sender
// commits it, possibly in parts, the receiver collects it and compares it
// with its own call before it takes any of the call's bytes. The stream
// position advances by the tag once it is whole, so alignment never pads
// into a half-written tag.
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

#include <algorithm>
#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "exec/runner.h"
#include "ir/step_traits.h"

namespace grove::exec {
namespace detail {

using transport::LinkKey;

WorkLists& workLists() {
  thread_local WorkLists lists;
  lists.steps.clear();
  lists.phaseBegin.clear();
  lists.laneRanges.clear();
  lists.lanes.clear();
  lists.phaseSends.clear();
  lists.allSends.clear();
  lists.pollFds.clear();
  lists.linkUsers.clear();
  lists.sendTotals.clear();
  lists.recvTotals.clear();
  return lists;
}

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

// Points a resolved step at this call's buffers.
void Runner::bindBuffers(Resolved& r) {
  const plan::Step& s = *r.step;
  if (plan::stepReadsSrc(s.kind)) r.src = bufferBase(s.src, false, s) + s.src.offset;
  if (plan::stepWritesDst(s.kind)) r.dst = bufferBase(s.dst, true, s) + s.dst.offset;
  if (s.kind == StepKind::kCopy) r.overlap = r.src < r.dst + s.bytes && r.dst < r.src + s.bytes;
}

void Runner::resolve() {
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
          throwInternalError(std::string("host executor: ") + plan::stepKindName(s.kind) +
                             " step of " + std::to_string(s.bytes) +
                             " bytes is not a whole number of " + std::to_string(esz_) +
                             "-byte elements");
        }
        r.gran = static_cast<uint32_t>(s.bytes % esz_ == 0 ? esz_ : 1);
        if (plan::stepSends(s.kind)) r.out = &links_.sendLink(LinkKey{s.sendPeer, s.channel});
        for (int k = 1; k < plan::sendPeerCount(s); ++k)
          r.more[r.nMore++] = &links_.sendLink(LinkKey{plan::sendPeerAt(s, k), s.channel});
        if (plan::stepReceives(s.kind)) r.in = &links_.recvLink(LinkKey{s.recvPeer, s.channel});
        for (int k = 1; k < plan::recvPeerCount(s); ++k)
          r.moreIn[r.nMoreIn++] = &links_.recvLink(LinkKey{plan::recvPeerAt(s, k), s.channel});
        bindBuffers(r);
        for (SendLink* out : sendsOf(r))
          if (std::find(allSends_.begin(), allSends_.end(), out) == allSends_.end())
            allSends_.push_back(out);
        steps_.push_back(r);
      }
      laneRanges_.emplace_back(first, steps_.size());
    }
  }
  phaseBegin_.push_back(laneRanges_.size());
  countLinkBytes();
}

// The bytes the program moves over each link (what its call tags
// announce), and the sizes of its steps there in order, hashed.
void Runner::countLinkBytes() {
  auto add = [](auto& totals, auto* link, uint64_t bytes) {
    auto it = std::find_if(totals.begin(), totals.end(), [&](auto& t) { return t.link == link; });
    if (it == totals.end()) it = totals.insert(totals.end(), {link, 0});
    it->bytes += bytes;
  };
  for (const Resolved& r : steps_) {
    for (SendLink* out : sendsOf(r)) add(sendTotals_, out, r.bytes);
    for (RecvLink* in : recvsOf(r)) add(recvTotals_, in, r.bytes);
  }
}

namespace {
// The link's next bytes are a tag announcing `bytes` (either half).
template <typename Link>
void armTag(Link& link, uint64_t bytes) {
  link.tagPending = true;
  link.tagDone = 0;
  link.tagBytes = bytes;
}
}  // namespace

// Every link of a tagged call starts with its tag. A send/recv batch's
// steps carry one each instead (armStepTags).
void Runner::armTags() {
  if (tagsPerStep()) return;
  for (const auto& t : sendTotals_) armTag(*t.link, t.bytes);
  for (const auto& t : recvTotals_) armTag(*t.link, t.bytes);
}

// A send/recv batch tags each step's bytes on its link: the nth send from
// a rank to a peer pairs with the peer's nth receive from it, whatever
// groups either side made (NCCL's rule), so a group of two sends may meet
// two receives in separate calls. A tag per batch and link took both
// sends' bytes as one and refused that as a size mismatch.
void Runner::armStepTags(const Resolved& r) {
  for (SendLink* out : sendsOf(r)) armTag(*out, r.bytes);
  for (RecvLink* in : recvsOf(r)) armTag(*in, r.bytes);
}

// Two lanes of one phase on one stream would interleave their bytes in an
// order nobody can predict: a planner bug, reported as such.
void Runner::checkPhaseLinks(size_t begin, size_t end) {
  auto& users = work_.linkUsers;  // distinct (link, lane) pairs
  users.clear();
  for (size_t l = begin; l < end; ++l) {
    for (size_t i = laneRanges_[l].first; i < laneRanges_[l].second; ++i) {
      const Resolved& r = steps_[i];
      const void* touched[2 + plan::kMaxMoreSendPeers + plan::kMaxMoreRecvPeers] = {r.out, r.in};
      for (uint32_t k = 0; k < r.nMore; ++k) touched[2 + k] = r.more[k];
      for (uint32_t k = 0; k < r.nMoreIn; ++k)
        touched[2 + plan::kMaxMoreSendPeers + k] = r.moreIn[k];
      for (const void* link : touched) {
        if (link == nullptr) continue;
        bool known = false;
        for (const auto& u : users) {
          if (u.first != link) continue;
          if (u.second != l) {
            throwInternalError("host executor: phase " + std::to_string(r.phase) +
                               " uses one stream in two lanes (lanes " +
                               std::to_string(steps_[laneRanges_[u.second].first].lane) + " and " +
                               std::to_string(r.lane) + ")");
          }
          known = true;
        }
        if (!known) users.emplace_back(link, l);
      }
    }
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
    msg += "; lane " + std::to_string(r.lane) + " step " + std::to_string(r.index) + " " +
           plan::stepKindName(r.kind) + " " + std::to_string(lane.done) + "/" +
           std::to_string(r.bytes) + " B";
    if (r.in != nullptr) {
      msg += " from rank";
      plan::forEachRecvPeer(*r.step, [&](int peer) { msg += " " + std::to_string(peer); });
      msg += " ch " + std::to_string(r.step->channel);
    }
    if (r.out != nullptr) {
      msg += " to rank";
      plan::forEachSendPeer(*r.step, [&](int peer) { msg += " " + std::to_string(peer); });
      msg += " ch " + std::to_string(r.step->channel);
    }
  }
  msg += "]";
  throw Error(e.code(), msg);
}

// A lowered program holds everything resolve() works out but the buffer
// pointers, which are bound again here for this call.
bool Runner::restore() {
  if (lowered_ == nullptr || !lowered_->valid || lowered_->dtype != spec_.dtype) return false;
  steps_.assign(lowered_->steps.begin(), lowered_->steps.end());
  phaseBegin_.assign(lowered_->phaseBegin.begin(), lowered_->phaseBegin.end());
  laneRanges_.assign(lowered_->laneRanges.begin(), lowered_->laneRanges.end());
  allSends_.assign(lowered_->allSends.begin(), lowered_->allSends.end());
  sendTotals_.assign(lowered_->sendTotals.begin(), lowered_->sendTotals.end());
  recvTotals_.assign(lowered_->recvTotals.begin(), lowered_->recvTotals.end());
  for (Resolved& r : steps_) bindBuffers(r);
  checked_ = true;
  return true;
}

void Runner::save() {
  if (lowered_ == nullptr || checked_) return;
  lowered_->dtype = spec_.dtype;
  lowered_->steps = steps_;
  lowered_->phaseBegin = phaseBegin_;
  lowered_->laneRanges = laneRanges_;
  lowered_->allSends = allSends_;
  lowered_->sendTotals = sendTotals_;
  lowered_->recvTotals = recvTotals_;
  lowered_->valid = true;
}

void Runner::run() {
  esz_ = dtypeSize(spec_.dtype);
  if (esz_ == 0) throwInvalidArgument("host executor: invalid data type");
  if (!opValid(spec_.op)) throwInvalidArgument("host executor: invalid reduction op");
  if (!restore()) resolve();
  if (tag_ != nullptr) armTags();
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
  save();  // only a program that ran through is kept
}

}  // namespace detail

void runProgram(const plan::Program& program, const Buffers& buffers, const ReduceSpec& spec,
                LinkTable& links, const WaitContext& wait, LoweredProgram* lowered,
                const CallTag* tag) {
  detail::Runner runner(program, buffers, spec, links, wait, lowered, tag);
  runner.run();
}

LoweredProgram::LoweredProgram() : impl_(std::make_unique<Impl>()) {}
LoweredProgram::~LoweredProgram() = default;
LoweredProgram::LoweredProgram(LoweredProgram&&) noexcept = default;
LoweredProgram& LoweredProgram::operator=(LoweredProgram&&) noexcept = default;

}  // namespace grove::exec

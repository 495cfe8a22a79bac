// Internal to src/exec: the host executor's runner, shared by the file that
// lowers a program (host_executor.cc) and the file that moves its bytes
// (runner_progress.cc). See host_executor.cc for how it works.
#pragma once

#include <poll.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "base/error.h"
#include "exec/host_executor.h"

namespace grove::exec::detail {

using plan::StepKind;

/// Most bytes a local copy/reduce does in one piece, so other lanes keep streaming.
constexpr uint64_t kLocalPieceBytes = 256 << 10;
/// Bytes after which a lane's visit ends even if it could go on (fairness).
constexpr uint64_t kVisitBytes = 1 << 20;
/// A step lowered to pointers.
struct Resolved {
  StepKind kind;
  bool final;
  bool overlap;   // kCopy whose src and dst overlap: one memmove
  uint32_t gran;  // piece granularity in bytes
  SendLink* out;  // null unless the kind sends (a fan-out step: its first destination)
  SendLink* more[plan::kMaxMoreSendPeers];  // a fan-out step's other destinations
  uint32_t nMore;                           // used entries of `more`; > 0 disables the direct path
  RecvLink* in;  // null unless the kind receives (a fan-in step: its first source)
  RecvLink* moreIn[plan::kMaxMoreRecvPeers];  // a fan-in step's other sources, in reduction order
  uint32_t nMoreIn;                           // used entries of `moreIn`
  const uint8_t* src;
  uint8_t* dst;
  uint64_t bytes;
  const plan::Step* step;  // for error messages
  uint32_t phase, lane, index;
};

/// Every send link of a resolved step (out, then more), iterable.
struct SendList {
  SendLink* links[1 + plan::kMaxMoreSendPeers];
  uint32_t n = 0;
  SendLink* const* begin() const { return links; }
  SendLink* const* end() const { return links + n; }
};

/// The send links of r: none, or out followed by the fan-out destinations.
inline SendList sendsOf(const Resolved& r) {
  SendList l{};
  if (r.out == nullptr) return l;
  l.links[l.n++] = r.out;
  for (uint32_t k = 0; k < r.nMore; ++k) l.links[l.n++] = r.more[k];
  return l;
}

/// Every receive link of a resolved step (in, then moreIn), iterable.
struct RecvList {
  RecvLink* links[1 + plan::kMaxMoreRecvPeers];
  uint32_t n = 0;
  RecvLink* const* begin() const { return links; }
  RecvLink* const* end() const { return links + n; }
};

/// The receive links of r: none, or in followed by the fan-in sources.
inline RecvList recvsOf(const Resolved& r) {
  RecvList l{};
  if (r.in == nullptr) return l;
  l.links[l.n++] = r.in;
  for (uint32_t k = 0; k < r.nMoreIn; ++k) l.links[l.n++] = r.moreIn[k];
  return l;
}

/// Whether r fans out from a buffer that holds its bytes once made (a
/// send's source, a forward's destination, which it writes before it
/// sends): then each destination takes them at its own pace (moveFanOut).
inline bool fansOutFromBuffer(const Resolved& r) {
  return r.nMore != 0 && (r.kind == StepKind::kSend || r.kind == StepKind::kRecvCopySend ||
                          r.kind == StepKind::kRecvReduceCopySend);
}

/// Where a lane is.
struct LaneState {
  const Resolved* cur;
  const Resolved* end;
  uint64_t done;          // bytes of *cur done (for a forwarding step: forwarded)
  uint64_t received = 0;  // forwarding step on the direct path or fanning out: bytes made in dst
  bool begun = false;     // *cur's streams are aligned and tagged: its bytes may move
  bool tagArmed = false;  // a send/recv batch: *cur's own tags are armed (armStepTags)
  /// A step that fans out from a buffer: bytes sent to each destination
  /// (sendsOf order); `done` is the least of them.
  uint64_t sent[1 + plan::kMaxMoreSendPeers] = {};

  /// Bytes of *cur (= r) moved so far, a visit's share: done, or for a
  /// fan-out from a buffer the most it made or any destination has had
  /// (as a forward counts what it forwarded, not what it received too).
  uint64_t moved(const Resolved& r) const {
    if (!fansOutFromBuffer(r)) return done;
    uint64_t n = received;  // made into dst, whether sent yet or not
    for (uint64_t s : sent) n = s > n ? s : n;
    return n;
  }
  /// On to the next step of the lane.
  void next() {
    ++cur;
    done = 0;
    received = 0;
    begun = false;
    tagArmed = false;
    for (uint64_t& s : sent) s = 0;
  }
};

/// The runner's work lists; one set per thread, cleared (not freed) per call.
/// What a program moves over one link: its bytes (what a call tag
/// announces there; a send/recv batch tags each step instead).
template <typename Link>
struct LinkLoad {
  Link* link = nullptr;
  uint64_t bytes = 0;
};

struct WorkLists {
  std::vector<Resolved> steps;
  std::vector<size_t> phaseBegin;
  std::vector<std::pair<size_t, size_t>> laneRanges;
  std::vector<LaneState> lanes;
  std::vector<SendLink*> phaseSends;
  std::vector<SendLink*> allSends;
  std::vector<pollfd> pollFds;
  std::vector<std::pair<const void*, size_t>> linkUsers;  // checkPhaseLinks' (link, lane) pairs
  std::vector<LinkLoad<SendLink>> sendTotals;             // what the program moves per send link
  std::vector<LinkLoad<RecvLink>> recvTotals;             // and per receive link
};

/// This thread's work lists, cleared.
WorkLists& workLists();

}  // namespace grove::exec::detail

namespace grove::exec {

/// A program lowered for one link table and data type (see host_executor.h):
/// the resolved steps (buffer pointers are rebound on every call).
struct LoweredProgram::Impl {
  bool valid = false;
  groveDataType_t dtype = groveFloat32;
  std::vector<detail::Resolved> steps;
  std::vector<size_t> phaseBegin;
  std::vector<std::pair<size_t, size_t>> laneRanges;
  std::vector<SendLink*> allSends;
  std::vector<detail::LinkLoad<SendLink>> sendTotals;
  std::vector<detail::LinkLoad<RecvLink>> recvTotals;
};

}  // namespace grove::exec

namespace grove::exec::detail {

class Runner {
 public:
  Runner(const plan::Program& program, const Buffers& buffers, const ReduceSpec& spec,
         LinkTable& links, const WaitContext& wait, LoweredProgram* lowered, const CallTag* tag)
      : program_(program),
        buffers_(buffers),
        spec_(spec),
        links_(links),
        lowered_(lowered != nullptr ? lowered->impl_.get() : nullptr),
        tag_(tag),
        waiter_(wait, "waiting for peers in a host program") {}

  void run();

 private:
  void resolve();
  void bindBuffers(Resolved& r);
  bool restore();
  void save();
  uint8_t* bufferBase(const plan::BufRef& ref, bool write, const plan::Step& s);
  void checkPhaseLinks(size_t begin, size_t end);
  void runPhase(size_t begin, size_t end);
  bool visitLane(LaneState& lane);
  bool movePiece(const Resolved& r, LaneState& lane);
  ptrdiff_t moveDirect(const Resolved& r, LaneState& lane);
  bool moveFanOut(const Resolved& r, LaneState& lane);
  uint64_t sendFrom(SendLink& link, const uint8_t* from, uint64_t n);
  uint64_t localPiece(const Resolved& r, uint64_t done);
  void reducePiece(const Resolved& r, uint64_t done, uint8_t* out, const void* const* ins,
                   size_t count);
  static uint64_t alignSend(SendLink& link);
  static uint64_t alignRecv(RecvLink& link);
  void countLinkBytes();
  void armTags();
  void armStepTags(const Resolved& r);
  /// A send/recv batch's tags go with each step (each send, or its piece
  /// on a channel), not with the call: see armStepTags.
  bool tagsPerStep() const {
    return tag_ != nullptr && tag_->coll == static_cast<uint8_t>(plan::Coll::kSendRecv);
  }
  bool sendTag(SendLink& link);
  bool recvTag(RecvLink& link);
  void flushAll();
  void waitForPeers();
  bool fanOutWaits(const LaneState& lane, bool& noted, bool& coverAll);
  void watch(int fd, short events, bool& coverAll);
  void finalFlush();
  [[noreturn]] void rethrowWithContext(const Error& e, const char* where);

  const plan::Program& program_;
  const Buffers& buffers_;
  const ReduceSpec& spec_;
  LinkTable& links_;
  LoweredProgram::Impl* lowered_;  // null: lower from scratch, keep nothing
  const CallTag* tag_;             // null: no call tags
  bool checked_ = false;           // the phases' links were checked when lowered
  Waiter waiter_;
  size_t esz_ = 1;
  // Work lists live in a per-thread WorkLists reused across calls, so a
  // small collective allocates nothing.
  WorkLists& work_ = workLists();
  std::vector<Resolved>& steps_ = work_.steps;  // all non-empty steps, phase by phase, lane by lane
  std::vector<size_t>& phaseBegin_ =
      work_.phaseBegin;  // index into laneRanges_ of each phase's first lane
  std::vector<std::pair<size_t, size_t>>& laneRanges_ =
      work_.laneRanges;                                    // [begin, end) into steps_
  std::vector<LaneState>& lanes_ = work_.lanes;            // the current phase's lanes
  std::vector<SendLink*>& phaseSends_ = work_.phaseSends;  // send links of the current phase
  std::vector<SendLink*>& allSends_ = work_.allSends;      // every send link used
  std::vector<pollfd>& pollFds_ = work_.pollFds;           // what a wait sleeps on (sockets)
  std::vector<LinkLoad<SendLink>>& sendTotals_ = work_.sendTotals;
  std::vector<LinkLoad<RecvLink>>& recvTotals_ = work_.recvTotals;
};

}  // namespace grove::exec::detail

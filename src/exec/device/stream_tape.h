// Stream tapes: a device launch as plain stream operations -- wait for a
// ring counter, write a ring counter, copy, zero, reduce -- one list per
// lane, for a GPU where no kernel may wait for another rank.
//
// Why: ranks of several processes sharing one GPU without MPS only take
// turns on it, a time slice each. The persistent kernel (exec/cuda/) polls
// ring counters that a kernel of another process must move, and that kernel
// runs only in the next slice: every wait costs a slice. A stream tape never
// waits inside a kernel. Each wait is a stream memory operation
// (cuStreamWaitValue64: the GPU's front end holds the stream until the
// counter reaches the value, and other contexts run meanwhile), each move is
// a copy (the copy engine) or a short reduce kernel that runs to its end,
// and each publish is a stream write of the counter.
//
// How it works: the builder walks a launch's calls, phases, lanes and steps
// exactly as dev_lane.h's interpreter does and emits what the interpreter
// would do, with one difference: the interpreter sizes each piece from the
// counters it reads, the builder cannot read them (nothing has run yet when
// the tape is enqueued), so it sizes pieces from its own counters alone:
// at most `pieceBytes`, at most half of every ring touched, never across a
// ring's wrap, a multiple of the step's granularity. Either side may cut
// pieces as it likes: a receiver waits for head >= its end, a sender for
// tail >= its end - capacity, and because every piece is at most half a
// ring, a sender and receiver never wait for each other (a sender blocks
// only while more than half a ring is unread, which the receiver, taking at
// most half a ring, can always drain). So a tape interoperates with the
// persistent kernel and the host executor on the other end of a ring.
//
// The builder keeps, per counter address, the counters this rank writes
// (send heads, receive tails: their values after every launch built so far)
// and the least value each awaited counter is known to have reached (a wait
// already passed need not be emitted again). The wire rule (ir/wire.h) is
// applied as the interpreter applies it: before a step's first byte every
// touched stream is padded to a 16-byte boundary (the sender zeroes the pad
// bytes and raises head, the receiver raises tail past them).
//
// Runners: exec/device/stream_emulate.h runs a tape on host threads (tests,
// GROVE_DEVICE_EMULATION); exec/cuda/stream_exec.h enqueues it, one CUDA
// stream per lane, phases joined by events.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exec/device/dev_lane.h"
#include "exec/device/dev_program.h"

namespace grove::exec::dev {

/// What one tape operation does.
enum class TapeOpKind : uint8_t {
  kWait,    ///< wait until *word >= value (cyclic 64-bit compare)
  kPost,    ///< *word = value, after every earlier operation of the lane is visible
  kCopy,    ///< dst[0:bytes) = src[0][0:bytes) (never overlapping)
  kZero,    ///< dst[0:bytes) = 0
  kReduce,  ///< dst (and dst2) = src[0] op ... op src[nsrc-1], `count` elements
};

/// One operation of a lane's tape. Plain data; pointers are the lane's
/// (device pointers for a GPU, host pointers in the emulation).
struct TapeOp {
  TapeOpKind kind = TapeOpKind::kCopy;
  uint8_t nsrc = 0;                  ///< kReduce: sources
  uint8_t final = 0;                 ///< kReduce: last reduction of these elements (avg divides)
  uint32_t step = 0;                 ///< the step's index within its lane (failure reports)
  uint64_t* word = nullptr;          ///< kWait, kPost: the counter
  const uint32_t* closed = nullptr;  ///< kWait: the ring's closed word
  uint64_t value = 0;                ///< kWait, kPost
  void* dst = nullptr;               ///< kCopy, kZero, kReduce
  void* dst2 = nullptr;              ///< kReduce: second destination or null
  const void* src[1 + kMaxStepLinks] = {};  ///< kCopy: src[0]; kReduce: the sources
  uint64_t bytes = 0;                       ///< kCopy, kZero: bytes; kReduce: elements
  DevReduce reduce;                         ///< kReduce: type, op, avg's divisor
};

/// The operations of one lane of one phase.
struct TapeLane {
  uint32_t call = 0;  ///< where it came from (failure reports)
  uint32_t phase = 0;
  uint32_t lane = 0;
  std::vector<TapeOp> ops;
};

/// A launch: phases run one after another (a call's phases, then the next
/// call's), the lanes of a phase at once.
struct LaunchTape {
  std::vector<std::vector<TapeLane>> phases;
  /// Most lanes of any phase (the streams a runner needs).
  uint32_t maxLanes() const;
  /// Operations in all.
  size_t ops() const;
};

/// Most bytes a tape piece moves by default. Every piece costs a few stream
/// operations enqueued by the host (microseconds each), so pieces are long:
/// the copy engine moves 4 MiB in a few microseconds on current GPUs.
inline constexpr uint64_t kTapePieceBytes = 4ull << 20;

/// Builds tapes for one rank and remembers its ring counters between launches.
class TapeBuilder {
 public:
  explicit TapeBuilder(uint64_t pieceBytes = kTapePieceBytes);

  /// Turns calls[0..n) into `out` (replacing what it held, reusing its
  /// memory) and advances the counters. Throws grove::Error, before any
  /// counter moves: (groveInternalError) for a step the interpreter would
  /// refuse (kDevBadStep); (groveInvalidArgument) for an invalid data type
  /// or op, or a reduced buffer not aligned to its elements.
  void build(const DevCall* calls, size_t n, LaunchTape& out);

  /// Every counter a tape of this builder waits on, with the greatest value
  /// awaited so far (abort releases the waits by writing past it).
  std::vector<std::pair<uint64_t*, uint64_t>> awaitedValues() const;

 private:
  struct Lane;
  void buildStep(Lane& lane, const DevCall& call, const DevStep& s);
  void buildRingStep(Lane& lane, const DevCall& call, const DevStep& s,
                     const lane_detail::StepRings& rs, const uint8_t* src, uint8_t* dst,
                     uint32_t esz);
  void buildLocal(Lane& lane, const DevCall& call, const DevStep& s, const uint8_t* src,
                  uint8_t* dst, uint32_t esz);

  uint64_t pieceBytes_;
  std::unordered_map<const uint64_t*, uint64_t> own_;    // counters this rank writes
  std::unordered_map<const uint64_t*, uint64_t> known_;  // least value of awaited counters
};

}  // namespace grove::exec::dev

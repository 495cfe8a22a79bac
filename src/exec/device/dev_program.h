// The device form of a schedule: what the CUDA executor's kernel (and the
// host emulation that tests it without a GPU) interprets.
//
// How it works: lowering (dev_lower.cc) flattens one rank's plan::Program
// into plain arrays -- phases point at lanes, lanes point at steps -- with
// every (peer, channel, route) replaced by an index into the program's send
// and receive ring tables and every buffer reference by a binding slot
// (input, output, scratch, extra i) plus an offset. Nothing in it is a
// pointer to user memory, so one lowered program is uploaded once (cached
// with the plan::Program) and replayed on new buffers: a launch passes the
// buffers' base addresses (DevCall::bufs) by value.
//
// A launch runs one or more calls (a group), one after another; within a
// call, phases one after another; within a phase, every lane at once, one
// thread block per lane (block b runs lane b of the phase; blocks without a
// lane only take part in the barriers). Zero-byte steps are dropped, and so
// are lanes left without steps and phases left without lanes (lane and step
// numbers in DevControl and describe() count what remains). The interpreter
// is exec/device/dev_lane.h (runLane); exec/device/emulate.h runs it on CPU
// threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/schedule.h"
#include "transports/device_ring.h"
#include "transports/transport.h"

namespace grove::exec::dev {

using transport::DevRing;

/// Binding slots of a call's buffers: input, output, scratch, then extras.
enum DevSlot : uint8_t { kSlotInput = 0, kSlotOutput = 1, kSlotScratch = 2, kSlotExtra0 = 3 };
/// Most buffer slots of one call (3 fixed + extras of a send/recv group).
inline constexpr int kMaxSlots = 32;
/// Most send (or receive) rings one step touches: 1 + plan::kMaxMoreSendPeers.
inline constexpr int kMaxStepLinks = 4;
static_assert(1 + plan::kMaxMoreSendPeers <= kMaxStepLinks, "fan-out wider than a device step");
static_assert(1 + plan::kMaxMoreRecvPeers <= kMaxStepLinks, "fan-in wider than a device step");

/// One step, lowered. Plain data.
struct DevStep {
  uint8_t kind = 0;                   ///< plan::StepKind
  uint8_t final = 0;                  ///< last reduction of these elements (avg divides)
  uint8_t nSend = 0;                  ///< rings sent to (send[0..nSend)), in the step's order
  uint8_t nRecv = 0;                  ///< rings received from (recv[0..nRecv)), in reduction order
  uint16_t send[kMaxStepLinks] = {};  ///< indices into DevProgramView::sends
  uint16_t recv[kMaxStepLinks] = {};  ///< indices into DevProgramView::recvs
  uint8_t srcSlot = 0;                ///< DevSlot of the local operand (when the kind reads one)
  uint8_t dstSlot = 0;                ///< DevSlot of the destination (when the kind writes one)
  uint16_t pad = 0;
  uint64_t srcOff = 0;
  uint64_t dstOff = 0;
  uint64_t bytes = 0;  ///< > 0
};

/// A lane: steps [begin, end) of DevProgramView::steps.
struct DevLane {
  uint32_t begin = 0;
  uint32_t end = 0;
};

/// A phase: lanes [begin, end) of DevProgramView::lanes.
struct DevPhase {
  uint32_t begin = 0;
  uint32_t end = 0;
};

/// A lowered program as the interpreter sees it: plain pointers into one
/// upload (device memory, or host memory in the emulation).
struct DevProgramView {
  const DevPhase* phases = nullptr;
  const DevLane* lanes = nullptr;
  const DevStep* steps = nullptr;
  const DevRing* sends = nullptr;  ///< this rank's sending ends, by index
  const DevRing* recvs = nullptr;  ///< this rank's receiving ends, by index
  uint32_t nPhases = 0;
  uint32_t maxLanes = 0;  ///< most lanes of any phase (blocks the call needs)
};

/// Element type and reduction of a call (plain data).
struct DevReduce {
  int32_t dtype = 0;   ///< groveDataType_t
  int32_t op = 0;      ///< groveRedOp_t
  int32_t nranks = 1;  ///< avg's divisor
};

/// One call of a launch: a program bound to buffers.
struct DevCall {
  DevProgramView program;
  DevReduce reduce;
  uint8_t* bufs[kMaxSlots] = {};  ///< base address of each slot used by the program
};

/// Launch status codes (DevControl::status); 0 = running / success.
enum DevStatus : uint32_t {
  kDevOk = 0,
  kDevAborted = 1,     ///< *abortFlag was raised
  kDevTimedOut = 2,    ///< a wait passed the deadline
  kDevPeerClosed = 3,  ///< a ring's `closed` word was set
  kDevBadStep = 4,     ///< a step the interpreter cannot run (a lowering bug, an unbound
                       ///< buffer, a reduction of part of an element of the call's type)
};

/// DevControl::failed* when the engine cannot tell where a launch stopped
/// (a stream tape on a GPU: the host sees only that it did not finish).
inline constexpr uint32_t kDevUnknownPosition = 0xffffffffu;

/// Shared between the host and one launch: the abort request, the outcome,
/// and where it stopped. Lives in memory both can see (mapped pinned memory).
struct DevControl {
  uint32_t abortFlag = 0;    ///< set by the host to stop the launch
  uint32_t status = kDevOk;  ///< first failure (DevStatus), written once
  uint32_t failedCall = 0;   ///< the call, phase, lane and step that failed
  uint32_t failedPhase = 0;
  uint32_t failedLane = 0;
  uint32_t failedStep = 0;  ///< (the step's index within its lane's lowered steps)
  uint64_t timeoutNs = 0;   ///< a wait longer than this fails (0: never)
};

/// The host-side result of lowering: the arrays to upload, and which links
/// the ring tables must hold (the executor binds them in this order).
struct DevProgram {
  std::vector<DevPhase> phases;
  std::vector<DevLane> lanes;
  std::vector<DevStep> steps;
  std::vector<transport::LinkKey> sendKeys;  ///< DevStep::send indices refer to these
  std::vector<transport::LinkKey> recvKeys;  ///< DevStep::recv indices refer to these
  uint32_t maxLanes = 0;
  uint64_t scratchBytes = 0;
  uint32_t nSlots = 3;  ///< slots the program uses (3 + extras)
  std::string algo;
};

/// The route id of one link: (peer, channel, send) -> transport::LinkKey::route
/// (0 = the default path).
using RouteFn = std::function<uint32_t(int peer, int channel, bool send)>;

/// How lowering may widen a program for the device that runs it. A lane of
/// one local step (a copy or a reduce) is one thread block on a GPU, which
/// moves a few tens of GB/s; the ring lanes beside it move far more. So a
/// longer local step is cut into pieces of at least `localSplitBytes`, each
/// a lane of its own, at most `maxSplitLanes` of them. Pieces start at 4 KiB
/// multiples (whole elements of every type). Steps on extra buffers (a
/// send/recv group's, which the caller may overlap) and steps whose source
/// and destination overlap are never cut.
struct LowerOptions {
  uint64_t localSplitBytes = 0;  ///< 0: never cut
  uint32_t maxSplitLanes = 1;
};

/// Lowers one rank's program. `routeOf` gives each link's route id (empty:
/// every link on its default path); `options` may cut long local steps.
/// Throws grove::Error(groveInternalError) for a program the device cannot
/// run (a step writing the input or reaching
/// past the scratch size, a fan-out or fan-in wider than kMaxStepLinks, more
/// than kMaxSlots buffers, a step without its peer, two lanes of one phase on
/// one ring). Ring indices are assigned in order of first use. A reduction of
/// part of an element depends on the call's type: the interpreter refuses
/// that step (kDevBadStep).
DevProgram lowerProgram(const plan::Program& program, const RouteFn& routeOf = {},
                        const LowerOptions& options = {});

/// Multi-line dump of a lowered program (tests, TRACE logs).
std::string describe(const DevProgram& program);

}  // namespace grove::exec::dev

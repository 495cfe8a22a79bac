// The schedule IR: what every algorithm compiles to, and what the host
// executor (and later the CUDA executor and the simulator) consume.
//
// A Program is one rank's part of one collective. It is a list of phases run
// one after another; a phase is a set of lanes that progress concurrently; a
// lane is a list of steps run in order. Steps name local buffers
// symbolically (input = sendbuff, output = recvbuff, scratch = a buffer the
// executor allocates), so a program can be cached and replayed on new
// pointers. Ring and tree algorithms are both just programs.
//
// Wire rule (ir/wire.h): every step starts at a kWireAlign-aligned position
// of each stream it touches (the executor pads), so elements never straddle a
// buffer wrap.
//
// Pipelining: a step streams -- a receiver consumes bytes as soon as the
// sender commits them -- so a chain broadcast pipelines by itself. Steps of
// ring algorithms that depend on each other around a cycle must move at most
// PlanParams::chunkBytes each (< the link buffer), which keeps them free of
// deadlock (every link can hold one whole step).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "grove/grove.h"
#include "ir/wire.h"

namespace grove::plan {

/// Which local buffer a step refers to.
/// kExtra names Buffers::extra[BufRef::index] (e.g. one buffer per grouped send/recv).
enum class Buf : uint8_t { kInput, kOutput, kScratch, kExtra };

/// A byte offset into one of the local buffers.
struct BufRef {
  Buf buf = Buf::kInput;
  uint32_t index = 0;  ///< which extra buffer (Buf::kExtra only)
  uint64_t offset = 0;
};

/// What a step does. "received" = bytes arriving from recvPeer; "sendPeer"
/// stands for sendPeer and every extra peer of Step::moreSendPeers (fan-out).
/// The reducing receives may fan in (Step::moreRecvPeers): "src op received"
/// then reads src op r0 op r1 ..., r0 from recvPeer, r1.. from the extras.
enum class StepKind : uint8_t {
  kSend,                ///< send src to sendPeer
  kRecv,                ///< dst = received
  kRecvReduce,          ///< dst = src op received
  kRecvReduceSend,      ///< send (src op received) to sendPeer
  kRecvReduceCopySend,  ///< dst = src op received, and send it to sendPeer
  kRecvCopySend,        ///< dst = received, and forward it to sendPeer
  kCopy,                ///< dst = src (local)
  kReduce,              ///< dst = dst op src (local)
};

/// Name of a step kind (for logs and tests). Inline so executors can name
/// steps without linking the planners.
inline const char* stepKindName(StepKind k) {
  switch (k) {
    case StepKind::kSend: return "send";
    case StepKind::kRecv: return "recv";
    case StepKind::kRecvReduce: return "recvReduce";
    case StepKind::kRecvReduceSend: return "recvReduceSend";
    case StepKind::kRecvReduceCopySend: return "recvReduceCopySend";
    case StepKind::kRecvCopySend: return "recvCopySend";
    case StepKind::kCopy: return "copy";
    case StepKind::kReduce: return "reduce";
  }
  return "invalid";
}

/// Most extra destinations of one sending step (Step::moreSendPeers).
inline constexpr int kMaxMoreSendPeers = 3;

/// Most extra sources of one reducing receive (Step::moreRecvPeers).
inline constexpr int kMaxMoreRecvPeers = 3;

/// One step of a lane.
struct Step {
  StepKind kind = StepKind::kCopy;
  bool final = false;     ///< last reduction of these elements: avg divides here
  int32_t sendPeer = -1;  ///< rank sent to (send kinds)
  int32_t recvPeer = -1;  ///< rank received from (recv kinds)
  /// Fan-out (send kinds only): further ranks that get the same outgoing
  /// bytes as sendPeer, on the same channel, in the same order, concurrently.
  /// Used entries come first; -1 marks the unused ones. Each destination is
  /// its own stream: the step ends when every destination has all its bytes.
  std::array<int32_t, kMaxMoreSendPeers> moreSendPeers{-1, -1, -1};
  /// Fan-in (kRecvReduce, kRecvReduceSend, kRecvReduceCopySend only): further
  /// ranks whose bytes are reduced in as well, on the same channel, the same
  /// byte count from each: result = src op r0 op r1 ... in that order (r0 from
  /// recvPeer, then these). Used entries come first; -1 marks the unused ones.
  /// Each source is its own stream; `final` applies once, after the last.
  std::array<int32_t, kMaxMoreRecvPeers> moreRecvPeers{-1, -1, -1};
  int32_t channel = 0;  ///< connection namespace of the streams used
  BufRef src;           ///< local operand: what is sent, or the local side of a reduction
  BufRef dst;           ///< where the result lands
  uint64_t bytes = 0;   ///< bytes moved (a multiple of the element size)
};

/// Steps run in order.
struct Lane {
  std::vector<Step> steps;
};

/// Lanes run concurrently; the phase ends when all lanes end.
struct Phase {
  std::vector<Lane> lanes;
};

/// One rank's part of one collective.
/// The route a planner chose for one of a rank's links: the bytes sent
/// (send) or received (!send) between this rank and `peer` on `channel`
/// travel over `links` (indices into PlanGraph::links() of the plans the
/// program was built from, from the sender's vertex to the receiver's). Both
/// ends of a link record the same route. Links without an entry take the
/// widest route.
struct LinkRoute {
  int32_t peer = -1;
  int32_t channel = 0;
  bool send = true;
  std::vector<int> links;
};

struct Program {
  std::vector<Phase> phases;
  uint64_t scratchBytes = 0;  ///< size of the scratch buffer the executor must provide
  std::string algo;           ///< name of the algorithm that built it (for logs)
  /// Planned routes of this rank's links (trees and rings lowered from
  /// topology plans); the flow simulator follows them and the communicator
  /// opens those links over the routes' end addresses when the topology has them.
  std::vector<LinkRoute> routes;
};

/// The collectives.
enum class Coll : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kGather,
  kScatter,
  kAlltoAll,
  kSendRecv
};
/// Name of a collective ("allreduce", "broadcast", ...). Inline: the executors
/// name calls without linking grove_algorithms.
inline const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "allreduce";
    case Coll::kBroadcast: return "broadcast";
    case Coll::kReduce: return "reduce";
    case Coll::kAllGather: return "allgather";
    case Coll::kReduceScatter: return "reducescatter";
    case Coll::kGather: return "gather";
    case Coll::kScatter: return "scatter";
    case Coll::kAlltoAll: return "alltoall";
    case Coll::kSendRecv: return "sendrecv";
  }
  return "invalid";
}

/// What a collective call asks for, from one rank's point of view.
struct CollArgs {
  Coll coll = Coll::kAllReduce;
  uint64_t count = 0;  ///< elements, as the C API's count argument (per rank for allgather etc.)
  groveDataType_t dtype = groveFloat32;
  groveRedOp_t op = groveSum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  bool inPlace = false;  ///< sendbuff and recvbuff alias as the C API defines in-place
};

/// Knobs of the builders.
struct PlanParams {
  int nChannels = 1;                ///< channels to spread data over
  uint64_t chunkBytes = 512 << 10;  ///< most bytes a cyclically dependent step moves
  /// The call size that size-dependent plans (a tree plan's sets by size)
  /// follow; 0: the call's own. The cost model sets it when it predicts a
  /// large call from the simulations of smaller ones.
  uint64_t planBytes = 0;
};

/// How a send/recv group spreads a long op over channels (see p2p.cc): an op
/// of b bytes takes clamp(b / bytesPerChannel, 1, maxChannels) channels.
/// The default keeps every op on one channel.
struct P2PSplit {
  uint64_t bytesPerChannel = 0;  ///< 0: never split
  int maxChannels = 1;           ///< at most kMaxP2PChannels (builders.h)
};

/// Name of a buffer ("in", "out", "scratch", "extra").
const char* bufName(Buf b);

/// Multi-line human-readable dump of a program (phases, lanes, steps), for
/// debugging and test failure messages.
std::string describe(const Program& program);

/// One-line dump of a step, e.g. "recvReduceSend 2->[me]->4 ch1 src=in+64 dst=- 128B final"
/// (a fan-out step lists its destinations: "send [me]->{1,2,5} ch0 ...", a
/// fan-in step its sources: "recvReduceSend {1,2}->[me]->0 ch0 ...").
std::string describe(const Step& step);

}  // namespace grove::plan

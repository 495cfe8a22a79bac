// The bootstrap root server and the wire format it shares with Bootstrap.
//
// How it works: the root is one detached thread that owns a listening socket
// and every rank's connection, and waits in poll() (never spinning). A new
// connection is sent a CHALLENGE (64 random bits) at once and must answer
// with a HELLO {magic, version, rank, nranks, mac, nonce, PeerInfo} within a
// few seconds or it is closed. The mac is SipHash-2-4 under the key {job
// secret, nonce} of the hello (mac field zero) and the challenge: it proves
// the rank holds the secret without sending it, and a recorded hello is
// useless against another challenge. A bad mac or nonce, a rank
// out of range, a duplicate rank, an nranks that differs from the first
// rank's, or a join to a failed job is answered with REFUSE(text) and closed.
// When all nranks ranks have joined, each gets WELCOME(all PeerInfos).
// After that the root:
//   - collects GATHER(seq, bytes) contributions keyed by seq and, when every
//     rank has given its part, sends GATHER_RESULT(seq, all parts in rank
//     order) to everyone;
//   - collects BROADCAST(seq, {source rank, data}) contributions alike (only
//     the source sends data) and answers GATHER_RESULT(seq, the source's
//     data) to everyone: a broadcast costs its bytes once per rank, not
//     nranks times as an all-gather padded to the largest part would;
//   - forwards ABORT(reason) from one rank to all others, naming the sender;
//   - on DOCTOR from any rank, asks every rank for its Position (REPORT_ASK),
//     waits up to kReportWindowSec for the REPORTs, and sends the diagnosis
//     (core/hang_doctor.h) to every rank; requests during one share it;
//   - marks a rank that sends BYE as left (and closes its connection), and a
//     rank whose connection ends without BYE as dead, telling every rank
//     still connected at once with ABORT("rank K (host H pid P) died ...").
// The thread exits when no rank is connected any more and the job either
// completed its join or failed. Connections use non-blocking sockets with a
// per-connection output queue, so a slow rank never stalls the root.
// Each message is a 16-byte header {type, length, seq} and `length` bytes.
#pragma once

#include <sys/socket.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/socket.h"
#include "transports/transport.h"

namespace grove::core {

/// Message types of the bootstrap protocol.
enum class MsgType : uint32_t {
  kHello = 1,         ///< client -> root: HelloMsg, answering the challenge
  kWelcome = 2,       ///< root -> client: nranks PeerInfos
  kRefuse = 3,        ///< root -> client: text, then the root closes
  kGather = 4,        ///< client -> root: this rank's part of all-gather `seq`
  kGatherResult = 5,  ///< root -> client: every part of all-gather `seq`
  kAbort = 6,         ///< either way: text reason
  kBye = 7,           ///< client -> root: graceful leave
  kDoctor = 8,        ///< client -> root: diagnose the job (core/hang_doctor.h)
  kReportAsk = 9,     ///< root -> client: report your Position for diagnosis `seq`
  kReport = 10,       ///< client -> root: this rank's Position for diagnosis `seq`
  kDiagnosis = 11,    ///< root -> client: the text of diagnosis `seq`
  kChallenge = 12,    ///< root -> client, first: `seq` = 64 random bits the hello's mac covers
  kBroadcast = 13,    ///< client -> root: int32 source rank, then (the source only) its data
};

/// Header in front of every message (host byte order; one machine type per job).
struct MsgHeader {
  uint32_t type = 0;    ///< a MsgType
  uint32_t length = 0;  ///< payload bytes after the header
  uint64_t seq = 0;     ///< all-gather sequence number (0 otherwise)
};

/// Payload of kHello.
struct HelloMsg {
  uint64_t magic = 0;    ///< kHelloMagic
  uint32_t version = 0;  ///< kProtocolVersion
  int32_t rank = -1;
  int32_t nranks = 0;
  uint32_t pad = 0;
  uint64_t mac = 0;  ///< helloMac(this hello, the challenge, the job's secret)
  uint64_t nonce = 0;
  transport::PeerInfo self;
};

/// "rank R (host H pid P)": how messages name a rank.
std::string describeRank(int rank, const transport::PeerInfo& info);

/// The mac of hello `m` (its mac field taken as 0) answering `challenge` in
/// the job of `secret` (and m.nonce).
uint64_t helloMac(const HelloMsg& m, uint64_t challenge, uint64_t secret);

constexpr uint64_t kHelloMagic = 0x47524f5645424f54ull;  // "GROVEBOT"
constexpr uint32_t kProtocolVersion = 3;
constexpr uint32_t kMaxMsgBytes = 1u << 30;  ///< larger payloads are a protocol error
constexpr double kHelloTimeoutSec = 5.0;     ///< a connection must say hello within this
/// Connections the root holds that have not said hello yet; past it, the
/// oldest is closed (a flood of strangers cannot take every descriptor).
constexpr size_t kMaxPendingHellos = 64;

/// A bootstrap root server running on a detached thread of this process.
class RootServer {
 public:
  /// Listens on `addr` (port 0: any free port) and starts the thread. With
  /// closeListenerWhenComplete the listening socket is closed as soon as all
  /// ranks joined (frees a fixed GROVE_COMM_ID port for the next job).
  /// Throws Error(groveSystemError) if it cannot listen.
  static std::shared_ptr<RootServer> start(const sockaddr_storage& addr, uint64_t secret,
                                           uint64_t nonce, bool closeListenerWhenComplete);
  /// As start(), on `listener`, a socket already listening at `addr` (a
  /// bootstrap's rescue listener: core/comm_elastic.cc).
  static std::shared_ptr<RootServer> startOn(net::Fd listener, const sockaddr_storage& addr,
                                             uint64_t secret, uint64_t nonce,
                                             bool closeListenerWhenComplete);
  /// The running root of this process for `nonce`, or null.
  static std::shared_ptr<RootServer> findLocal(uint64_t nonce);
  /// True if this process started the root for `nonce` and it has ended
  /// (its job finished or its init failed): an id that names it is spent.
  static bool endedLocally(uint64_t nonce);

  /// The bound address (with its port).
  const sockaddr_storage& address() const { return addr_; }
  /// Waits (up to timeoutSec) until every rank living in another process has
  /// left or died, or the server exited. Returns false on timeout.
  bool waitRemoteRanksGone(double timeoutSec);
  /// Waits (up to timeoutSec) until the server thread has exited.
  bool waitFinished(double timeoutSec);
  /// True once every rank has joined (a root that closes its listener then
  /// takes no further rank: an init with its id is refused at once).
  bool complete();
  /// True once every rank has left (or died) or the server exited: its job
  /// is over and the server is about to end, so an id that names it is
  /// spent. Set before a leaving rank sees its connection close.
  bool ending();

  RootServer() = default;

 private:
  friend class RootLoop;  // the thread (root_loop.h)
  sockaddr_storage addr_{};
  uint64_t nonce_ = 0;
  std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  std::vector<int> rankGone_;  // per rank: 1 when left/dead or in this process
  bool finished_ = false;
  bool complete_ = false;
  bool allLeft_ = false;  // every rank has left or died
  bool closesWhenComplete_ = false;
};

}  // namespace grove::core

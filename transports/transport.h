// The narrow transport interface.
//
// A transport moves ordered bytes between two ranks. Each directed link
// (peer, channel) is a byte stream with a bounded buffer; the executor writes
// into the sending half and reads out of the receiving half through zero-copy
// views (reserve/commit, peek/consume), so a reduction can read straight out
// of a shared-memory slot and write straight into the next peer's buffer.
//
// Every call is non-blocking: a half that has no room or no data returns 0
// and the executor waits (base/wait.h) and tries again. A half whose peer is
// gone throws grove::Error(groveRemoteError).
//
// Opening is split so that ranks that all open at once never wait on each
// other in a cycle: the core calls `establish` on each transport in a fixed
// order, and each transport first does everything that does not wait (shm:
// create the receive segments; socket: connect and send a hello) and only
// then waits for its peers.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/wait.h"

namespace grove::transport {

/// One directed stream: to (sending) or from (receiving) `peer` on `channel`.
struct LinkKey {
  int peer = -1;    ///< the other rank
  int channel = 0;  ///< connection namespace; different channels never share bytes
  /// 0: the peer's default path; else a planned route registered with
  /// Transport::addRoute (both ends use the same id; another connection).
  uint32_t route = 0;
  bool operator==(const LinkKey& o) const {
    return peer == o.peer && channel == o.channel && route == o.route;
  }
  bool operator<(const LinkKey& o) const {
    if (peer != o.peer) return peer < o.peer;
    return channel != o.channel ? channel < o.channel : route < o.route;
  }
};

/// Sending half of a link.
class SendHalf {
 public:
  virtual ~SendHalf() = default;
  /// Contiguous free space in the outgoing buffer: sets *ptr and returns its
  /// size (0 when full). The space stays valid until commit().
  virtual size_t reserve(void** ptr) = 0;
  /// Publishes the first n bytes of the space last reserved.
  virtual void commit(size_t n) = 0;
  /// Pushes committed bytes onward (socket); returns true when nothing
  /// committed is still held in this process. Shared memory: always true.
  virtual bool flush() { return true; }
  /// A file descriptor that becomes writable when flush() can progress, or -1.
  virtual int pollFd() const { return -1; }
  /// Sends up to n bytes straight from src, bypassing the buffer (sockets:
  /// into the kernel without a staging copy). Returns the bytes taken (0:
  /// would block), or -1 when this half cannot right now (no such path, or
  /// bytes already staged must go first): then use reserve/commit.
  virtual ptrdiff_t sendDirect(const void* src, size_t n) { return -1; }
};

/// Receiving half of a link.
class RecvHalf {
 public:
  virtual ~RecvHalf() = default;
  /// Contiguous received bytes: sets *ptr and returns how many (0 if none yet).
  virtual size_t peek(const void** ptr) = 0;
  /// Releases the first n bytes of what peek() showed.
  virtual void consume(size_t n) = 0;
  /// A file descriptor that becomes readable when peek() can progress, or -1.
  virtual int pollFd() const { return -1; }
  /// Receives up to n bytes straight into dst, bypassing the buffer. Returns
  /// the bytes received (0: none yet), or -1 when this half cannot right now
  /// (no such path, or bytes already buffered must be read first): then use
  /// peek/consume.
  virtual ptrdiff_t recvDirect(void* dst, size_t n) { return -1; }
};

/// Sending half of a slot link: small whole messages, each in a slot of its
/// own whose ready flag shares the message's first cache line, so a message
/// that fits that line reaches the peer in one cache-line transfer (the
/// byte rings need two: the head counter, then the data). Only transports
/// whose ranks share memory have slot links (Transport::establishSlots).
class SlotSender {
 public:
  virtual ~SlotSender() = default;
  /// The largest message a slot holds.
  virtual size_t maxBytes() const = 0;
  /// The payload area (maxBytes() bytes) of the next message's slot, or
  /// nullptr while every slot still holds a message the peer has not released.
  virtual void* acquire() = 0;
  /// Publishes the first n bytes written to the area acquire() gave.
  virtual void post(size_t n) = 0;
};

/// Receiving half of a slot link: messages in the order they were posted.
class SlotReceiver {
 public:
  virtual ~SlotReceiver() = default;
  /// The next message (its size in *n), or nullptr if it has not arrived.
  /// The bytes stay valid, and the same message is shown, until release().
  virtual const void* poll(size_t* n) = 0;
  /// Hands the slot of the message poll() showed back to the sender.
  virtual void release() = 0;
};

/// A transport's address for one rank, opaque to everything but that
/// transport (the socket transport: its listening sockaddr; the network
/// transport: its fabric endpoints). size 0: the rank has none.
struct Address {
  static constexpr size_t kMaxBytes = 240;
  uint32_t size = 0;
  uint8_t bytes[kMaxBytes] = {};
};

/// Registered transports whose addresses a PeerInfo can carry.
constexpr int kMaxTransports = 6;

/// One-sided access to peers' memory (RDMA-style), for transports that have
/// it (Transport::oneSided(); the network transport; the core's one-sided
/// service, core/rma.h, puts through it): a rank exposes a
/// region of its memory, hands the description to a peer by any means (the
/// caller's business, e.g. a byte link), and the peer writes into it with
/// put(); each put carries a small signal that the exposing rank takes,
/// in order, once the bytes have landed. Sources and regions are registered
/// through a cache keyed by address range, so the same buffer costs one
/// registration however often it is used; each exposed region and each put
/// in flight holds its registration, so overlapping regions and sources
/// never close what another still uses. Not thread-safe beyond the
/// transport's own lock; every call is non-blocking.
class OneSided {
 public:
  /// What a peer needs to write into an exposed region (POD; send it as bytes).
  struct Remote {
    uint64_t addr = 0;   ///< base the peer adds offsets to
    uint64_t key = 0;    ///< the region's remote key
    uint64_t bytes = 0;  ///< its size
    int32_t rank = -1;   ///< the exposing rank
    int32_t nic = 0;     ///< the exposing rank's NIC the region is registered with
  };
  /// Largest signal value a put can carry.
  static constexpr uint32_t kMaxSignal = (1u << 20) - 1;

  virtual ~OneSided() = default;
  /// Registers [base, base + bytes) for remote writes (cached) and describes
  /// it; the registration stays while the region is exposed (unexpose).
  virtual Remote expose(void* base, size_t bytes) = 0;
  /// Ends what expose() returned `r` for (peers must not write into it any
  /// more); call release(base) too before the memory goes.
  virtual void unexpose(const Remote& r) = 0;
  /// Writes [src, src + n) into `dst` at `offset`, then signals `signal`
  /// (<= kMaxSignal) to dst.rank. Returns an operation id, or 0 when the
  /// transport is busy (try again). Throws groveInvalidArgument when the
  /// write falls outside dst, groveRemoteError when the peer is gone.
  virtual uint64_t put(const void* src, size_t n, const Remote& dst, uint64_t offset,
                       uint32_t signal) = 0;
  /// True once put `op` completed here: its source may be reused.
  virtual bool done(uint64_t op) = 0;
  /// The next signal of a put into this rank's exposed regions, oldest
  /// first (false: none yet).
  virtual bool takeSignal(uint32_t* signal) = 0;
  /// Progresses every put; true when none is still in flight.
  virtual bool flush() = 0;
  /// Takes the registrations that start at `base` out of the cache (call
  /// before freeing memory that was exposed or put from: the cache cannot
  /// see a free, and a registration outliving its pages would pin stale
  /// ones); one still exposed or put from closes when that use ends.
  virtual void release(void* base) = 0;
  /// Registrations made and registration-cache hits (tests, logs).
  virtual size_t registrations() const = 0;
  virtual size_t registrationHits() const = 0;
};

/// What every rank tells the others about itself at init (fixed-size, POD).
struct PeerInfo {
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t hostHash = 0;  ///< same value on every rank of one host (boot id + host name)
  char hostName[64] = {};
  /// By registry slot (transports/registry.h): each transport's address.
  Address addresses[kMaxTransports];
  /// Where this rank's bootstrap listens to host the root of a communicator
  /// reformed from this one (core/comm_elastic.cc: shrink); AF_UNSPEC: none.
  sockaddr_storage rescue{};
};

/// The socket addresses of the path to one peer, when the topology's links
/// carry IP addresses (an AF_UNSPEC address = none given).
struct PeerRoute {
  sockaddr_storage
      local{};  ///< bind to this (port 0) before connecting; AF_UNSPEC: kernel's choice
  sockaddr_storage
      remote{};      ///< connect here, on the port of the peer's address; AF_UNSPEC: its address
  std::string path;  ///< readable description of the path (logs)
};

/// What a transport needs to know about its communicator.
struct Context {
  int rank = 0;
  int nranks = 1;
  std::string jobId;            ///< unique per communicator: names shm segments
  uint64_t secret = 0;          ///< presented in socket hellos
  std::vector<PeerInfo> peers;  ///< indexed by rank
  /// By rank: this transport's address of each rank (the registry fills it
  /// from PeerInfo::addresses; tests may fill it directly).
  std::vector<Address> addresses;
  std::vector<PeerRoute> routes;  ///< by rank (socket transport); empty: every peer at its address
  size_t bufferBytes = 1 << 20;   ///< capacity of each half's buffer
  WaitContext wait;               ///< abort flag + timeout for waits
};

/// A way of reaching peers.
class Transport {
 public:
  virtual ~Transport() = default;
  /// "shm", "socket", "loopback", ...
  virtual const char* name() const = 0;
  /// True if this transport can reach `peer`.
  virtual bool canConnect(int peer) const = 0;
  /// True if links can follow planned routes (addRoute).
  virtual bool routable() const { return false; }
  /// Registers the addresses of planned route `route` (LinkKey::route) to
  /// `peer`, before links on it are opened. Transports with one path per
  /// peer (routable() false) ignore it.
  virtual void addRoute(int peer, uint32_t route, const PeerRoute& addresses) {}
  /// Opens the given halves (see the file comment for the no-deadlock rule).
  /// outSends[i] / outRecvs[i] correspond to sends[i] / recvs[i].
  virtual void establish(const std::vector<LinkKey>& sends, const std::vector<LinkKey>& recvs,
                         std::vector<std::unique_ptr<SendHalf>>& outSends,
                         std::vector<std::unique_ptr<RecvHalf>>& outRecvs) = 0;
  /// Receive-side bytes one slot of a slot link for messages of up to
  /// `maxBytes` occupies (what establishSlots allocates per slot).
  virtual size_t slotStride(size_t maxBytes) const { return maxBytes; }
  /// One-sided access (OneSided), or nullptr where this transport has none.
  virtual OneSided* oneSided() { return nullptr; }
  /// Opens a slot link to and one from every rank in `peers` (outSends[i]
  /// and outRecvs[i] for peers[i]), each with `slots` slots of `maxBytes`,
  /// under the same no-deadlock rule as establish(). Returns false (and
  /// opens nothing) if this transport has no slot links.
  virtual bool establishSlots(const std::vector<int>& peers, size_t maxBytes, int slots,
                              std::vector<std::unique_ptr<SlotSender>>& outSends,
                              std::vector<std::unique_ptr<SlotReceiver>>& outRecvs) {
    return false;
  }
};

}  // namespace grove::transport

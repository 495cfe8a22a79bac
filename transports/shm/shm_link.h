// The layout of one shm link segment and the two halves that use it.
//
// How it works: each directed link (src -> dst, channel) is one segment made
// by the receiver. It starts with a ShmHeader (identity, capacity, handshake
// flags, and the RingControl of byte_ring.h, each counter on its own cache
// line), followed at kShmDataOffset (page aligned) by the data area that the
// ByteRing wraps. Handshake: the receiver fills the header and stores
// ready = 1 (release); the sender checks the header, writes its pid, stores
// attached = 1 and unlinks the name (both sides now hold a mapping).
//
// The halves are thin: reserve/commit and peek/consume go straight to the
// ByteRing, so the hot path has no syscall and no shared write beyond the
// ring counters. Only when a call returns 0 does the half count idle calls;
// every 16th idle call reads the clock, and at most every 100 ms it checks
// the `closed` flag and whether the peer process still lives (PeerWatch),
// throwing grove::Error(groveRemoteError) if it is gone. Destroying a half
// sets its bit in `closed`.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "base/shm_segment.h"
#include "transports/byte_ring.h"
#include "transports/shm/peer_watch.h"
#include "transports/transport.h"

namespace grove::transport::shm {

/// "GRVSHM01" in memory order: the first bytes of every grove shm segment.
constexpr uint64_t kShmMagic = 0x31304d4853565247ull;
/// Layout version; a mismatch means mixed grove builds on one host.
constexpr uint32_t kShmVersion = 3;
/// Where the data area starts (page aligned, so data never shares a line with control).
constexpr size_t kShmDataOffset = 4096;
/// The channel field of a slot link's header (byte-ring channels are >= 0).
constexpr int32_t kSlotChannel = -1;
/// Bits of RingControl::closed.
constexpr uint32_t kSenderClosed = 1;
constexpr uint32_t kReceiverClosed = 2;

/// Start of every link segment. Written by the receiver before `ready`.
struct ShmHeader {
  uint64_t magic = 0;       ///< kShmMagic
  uint32_t version = 0;     ///< kShmVersion
  uint32_t dataOffset = 0;  ///< kShmDataOffset
  uint64_t capacity = 0;    ///< bytes of the data area (multiple of 64)
  int32_t creatorPid = 0;   ///< the receiver's pid
  int32_t src = -1;         ///< sending rank
  int32_t dst = -1;         ///< receiving rank (the creator)
  int32_t channel = 0;      ///< channel of the link; kSlotChannel for a slot link
  uint32_t slots = 0;       ///< slot links: number of slots (0: a byte ring)
  uint32_t slotStride = 0;  ///< slot links: bytes from one slot to the next (multiple of 64)
  /// The creator's run tag (ShmTransport::runTagOf): an earlier run's
  /// segment of the same link, left by a process that had the same pid
  /// (pids repeat across pid namespaces), carries another.
  uint64_t run = 0;
  alignas(64) std::atomic<uint32_t> ready{0};  ///< 1 once the header is valid (release)
  std::atomic<uint32_t> attached{0};           ///< 1 once the sender has mapped it
  std::atomic<int32_t> attacherPid{0};         ///< the sender's pid
  RingControl ring;                            ///< head / tail / closed
};
static_assert(sizeof(ShmHeader) <= kShmDataOffset, "header must fit before the data");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "ring counters must be lock-free");

/// What the two halves share: the mapping, the ring, and the idle checks.
class ShmLinkBase {
 public:
  /// True unless the peer process is known to be gone (a few syscalls).
  bool peerAlive() const { return watch_.alive(); }
  /// The header inside the mapping.
  ShmHeader* header() const { return reinterpret_cast<ShmHeader*>(seg_.base()); }

 protected:
  ShmLinkBase(ShmSegment seg, int peerRank, int channel, int peerPid, uint32_t closedBit);
  ~ShmLinkBase();
  /// The rank at the other end.
  int peer() const { return peer_; }
  /// Called when the ring gave 0 bytes; throws if the peer is gone.
  void onIdle() {
    if ((++idleCalls_ & 15u) == 0) checkPeer();
  }

  ShmSegment seg_;
  ByteRing ring_;

 private:
  void checkPeer();

  PeerWatch watch_;
  int peer_;
  int channel_;
  uint32_t closedBit_;
  uint32_t idleCalls_ = 0;
  std::chrono::steady_clock::time_point lastCheck_;
};

/// Sending half: the ByteRing's producer side over a mapped segment.
class ShmSendHalf final : public SendHalf, public ShmLinkBase {
 public:
  /// Takes a mapped, attached segment; `peerPid` is the receiver's pid.
  ShmSendHalf(ShmSegment seg, int peerRank, int channel, int peerPid);
  /// Free contiguous ring space (no syscall); when 0, now and then checks the peer.
  size_t reserve(void** ptr) override {
    size_t n = ring_.reserve(ptr);
    if (n == 0) onIdle();
    return n;
  }
  /// Publishes n reserved bytes to the receiver (one release store).
  void commit(size_t n) override { ring_.commit(n); }
};

/// Receiving half: the ByteRing's consumer side; peek() points into the segment.
class ShmRecvHalf final : public RecvHalf, public ShmLinkBase {
 public:
  /// Takes the segment this rank created; `peerPid` is the sender's pid.
  ShmRecvHalf(ShmSegment seg, int peerRank, int channel, int peerPid);
  /// Also removes the segment's name if the sender never took it.
  ~ShmRecvHalf() override;
  /// Readable bytes, pointing into the shared segment; when 0, now and then checks the peer.
  size_t peek(const void** ptr) override {
    size_t n = ring_.peek(ptr);
    if (n == 0) onIdle();
    return n;
  }
  /// Gives n bytes back to the sender (one release store).
  void consume(size_t n) override { ring_.consume(n); }
};

}  // namespace grove::transport::shm

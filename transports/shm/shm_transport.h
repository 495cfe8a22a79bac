// ShmTransport: ranks on one host talk through POSIX shared memory.
//
// How it works: every directed link (src -> dst, channel) is one segment,
// a file "grove-<jobId>-<src>-<dst>-<channel>" in GROVE_SHM_DIR (/dev/shm),
// holding a small header and a ByteRing data area of bufferBytes rounded up
// to 64 (see shm_link.h for the layout). The RECEIVER owns the segment.
//
// establish() keeps the no-deadlock rule of transport.h in two phases:
//   1. for each receive link, create the segment (O_EXCL; a stale file of
//      that name from a crashed job is unlinked and recreated), fill the
//      header and store ready = 1. Nothing here waits on anyone.
//   2. for each send link, open the peer's segment, waiting (grove::Waiter:
//      backoff, GROVE_TIMEOUT, abort flag) until it exists, is big enough,
//      is marked ready and was made by the peer's pid (a stale file is not
//      mistaken for the real one); then set attached and unlink the name.
// Since every rank finishes phase 1 before it waits in phase 2, ranks that
// all call establish() at once always find each other. Once both sides hold a
// mapping no name is left in the directory, so a job that crashes later
// leaks nothing; a receiver that is destroyed before its sender came removes
// the name itself.
//
// Data moves zero-copy: SendHalf::reserve hands out space in the ring,
// RecvHalf::peek a pointer into the shared segment. A dead peer process is
// noticed by the halves when they have been idle for a while (kill(pid, 0)
// and /proc) and reported as grove::Error(groveRemoteError).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/shm_segment.h"
#include "transports/transport.h"

namespace grove::transport {

/// Shared-memory transport between ranks of one host (name "shm").
class ShmTransport final : public Transport {
 public:
  /// Keeps a copy of `ctx` (rank, nranks, jobId, peers' hostHash and pid,
  /// bufferBytes, wait context) and reads GROVE_SHM_DIR. Throws
  /// grove::Error(groveInvalidArgument) if the context is inconsistent.
  explicit ShmTransport(Context ctx);

  /// "shm".
  const char* name() const override { return "shm"; }
  /// True for another rank with the same host hash as this one.
  bool canConnect(int peer) const override;
  /// Creates every receive segment, then attaches to every send segment
  /// (waiting for the peers to create them). Throws groveInvalidArgument for
  /// links this transport cannot make, groveRemoteError on timeout or abort,
  /// groveSystemError when the OS refuses or a segment is malformed.
  void establish(const std::vector<LinkKey>& sends, const std::vector<LinkKey>& recvs,
                 std::vector<std::unique_ptr<SendHalf>>& outSends,
                 std::vector<std::unique_ptr<RecvHalf>>& outRecvs) override;
  /// Slot links (shm_slots.h) with every rank in `peers`, in the same two
  /// phases; the segments are named like the ring links with "-slots" added.
  bool establishSlots(const std::vector<int>& peers, size_t maxBytes, int slots,
                      std::vector<std::unique_ptr<SlotSender>>& outSends,
                      std::vector<std::unique_ptr<SlotReceiver>>& outRecvs) override;

  /// shm::slotStrideFor(maxBytes): a slot's header line and payload.
  size_t slotStride(size_t maxBytes) const override;

  /// File name (no directory) of the segment of link src -> dst on `channel`
  /// for communicator `jobId` (characters other than [A-Za-z0-9_.] become '_').
  static std::string segmentName(const std::string& jobId, int src, int dst, int channel);
  /// Full path of that segment for this communicator.
  std::string segmentPath(int src, int dst, int channel) const;
  /// Directory the segments live in (GROVE_SHM_DIR).
  const std::string& dir() const { return dir_; }
  /// The tag this run writes into its segments' headers and expects in its
  /// peers': derived from the run's link key (Context::secret, fresh per
  /// run), which it does not reveal; 0 for a key of 0.
  static uint64_t runTagOf(uint64_t secret);
  /// Bytes of each ring's data area (bufferBytes rounded up to 64).
  size_t capacity() const { return capacity_; }

 private:
  struct SegmentSpec;
  struct PendingSend;
  std::string pathOf(const SegmentSpec& spec) const;
  ShmSegment createSegment(const SegmentSpec& spec);
  void attachAll(std::vector<PendingSend>& pending);
  bool tryAttach(PendingSend& p);
  void checkLinks(const std::vector<LinkKey>& links, const char* kind) const;

  Context ctx_;
  std::string dir_;
  size_t capacity_ = 0;
  uint64_t runTag_ = 0;  ///< runTagOf(ctx_.secret)
};

}  // namespace grove::transport

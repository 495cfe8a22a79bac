// LoopbackTransport: an in-process transport for tests whose ranks are
// threads of one process.
//
// How it works: a process-wide registry (one mutex) maps each directed link
// (jobId, the run's link key, src rank, dst rank, channel) to a heap ring: a
// RingControl plus a 64-byte-aligned data area, wrapped by ByteRing on each
// side. Whichever side establishes first creates the ring with its
// Context::bufferBytes (rounded up to a multiple of 64); the other side
// finds it. Once both sides have taken their half the registry forgets the
// ring, and the halves' shared pointers free it when both are destroyed.
// establish() never blocks.
//
// A destroyed half marks the ring closed: a receiver whose sender is gone
// throws grove::Error(groveRemoteError) once it has read everything that was
// sent, and a sender whose receiver is gone throws when it asks for room.
#pragma once

#include <memory>
#include <vector>

#include "transports/transport.h"

namespace grove::transport {

/// In-process transport: every peer is another thread of this process
/// using a LoopbackTransport with the same Context::jobId and secret.
class LoopbackTransport : public Transport {
 public:
  /// Uses ctx.rank, ctx.nranks, ctx.jobId, ctx.secret and ctx.bufferBytes.
  explicit LoopbackTransport(Context ctx);
  /// "loopback".
  const char* name() const override { return "loopback"; }
  /// True for every rank of the job (0 <= peer < nranks).
  bool canConnect(int peer) const override;
  /// Creates or finds the rings; never waits for the peers.
  void establish(const std::vector<LinkKey>& sends, const std::vector<LinkKey>& recvs,
                 std::vector<std::unique_ptr<SendHalf>>& outSends,
                 std::vector<std::unique_ptr<RecvHalf>>& outRecvs) override;

  /// Number of rings created by some side and not yet taken by the other,
  /// over all jobs (tests use it to check that nothing leaks).
  static size_t pendingRings();

 private:
  Context ctx_;
};

}  // namespace grove::transport

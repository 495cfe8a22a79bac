// HostStagedTransport: device rings in shared host memory, for GPUs that
// cannot reach each other's memory (no P2P access, separate containers).
//
// How it works: the receiver of a link creates one POSIX shared-memory
// segment (shm/shm_segment.h) in GROVE_SHM_DIR, named
// "<shm transport's name for src -> dst, channel>-dev<route>", holding the
// ring's control block and data (device_ring.h's layout), and puts the name
// in the RingExport. The sender opens the segment by that name once the
// export reached it, checks its size and owner, maps it and removes the
// name (from then on only the two mappings keep the memory). In a CUDA
// build each side registers its mapping with cudaHostRegister(Mapped |
// Portable) and hands its kernels the device pointer cudaHostGetDevicePointer
// gives, so both GPUs read and write the same pinned pages over PCIe.
//
// Emulation mode (a constructor flag; the only mode of a build without
// CUDA) skips the registration: the DevRing holds the host pointers, and
// CPU threads that emulate the device program drive the ring. This is how
// the device path is tested on machines without a GPU.
//
// Destruction sets the closed word of every ring (through this side's host
// mapping, which stays valid until the unmap), unregisters, removes a name
// the sender never took, and unmaps.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transports/device_transport.h"

namespace grove::transport {

/// Device rings in (pinned) shared host memory between ranks of one host ("host_staged").
class HostStagedTransport final : public DeviceTransport {
 public:
  /// Keeps a copy of `ctx` and reads GROVE_SHM_DIR. `emulate`: plain host
  /// memory, no CUDA calls. Throws grove::Error(groveInvalidArgument) for an
  /// inconsistent context, or for emulate == false in a build without CUDA.
  HostStagedTransport(DeviceContext ctx, bool emulate);
  /// Sets every ring's closed word, unregisters and unmaps (see the file comment).
  ~HostStagedTransport() override;

  /// "host_staged".
  const char* name() const override { return "host_staged"; }
  /// True for another rank with the same host hash as this one.
  bool canConnect(int peer) const override;
  /// Creates the segment of the link from key.peer (zeroed, registered
  /// unless emulated). Throws groveInvalidArgument for a peer it cannot
  /// reach or a bad capacity, groveSystemError / groveUnhandledCudaError when
  /// the OS or CUDA refuses.
  DevRing createRecv(const LinkKey& key, uint64_t capacity, RingExport& out) override;
  /// Opens and maps the peer's segment `in` names (checked as checkRingExport
  /// does, plus the owner's pid and host). Throws groveRemoteError if the
  /// segment is gone, groveInternalError for a mismatched export.
  DevRing openSend(const LinkKey& key, const RingExport& in) override;

  /// True in emulation mode (host pointers, no CUDA).
  bool emulated() const { return emulate_; }
  /// Rings this side holds (created and opened).
  size_t ringCount() const { return held_.size(); }
  /// Segment file name of the ring of link src -> dst on (channel, route).
  static std::string segmentName(const std::string& jobId, int src, int dst, int channel,
                                 uint32_t route);

 private:
  struct Held;
  DevRing adopt(std::unique_ptr<Held> held, uint64_t capacity);

  DeviceContext ctx_;
  bool emulate_;
  std::string dir_;
  std::vector<std::unique_ptr<Held>> held_;
};

}  // namespace grove::transport

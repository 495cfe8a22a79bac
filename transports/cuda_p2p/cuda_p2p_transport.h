// CudaP2PTransport: device rings in the receiver's GPU memory, written by
// the sender's GPU directly over NVLink or PCIe (CUDA IPC). Built only with CUDA.
//
// How it works: the receiver allocates each ring with cudaMalloc on its
// device (DevicePeer::cudaDevice), zeroes it, and exports it as a CUDA IPC
// handle (cudaIpcGetMemHandle) plus its raw address. The sender maps it:
// a ring of another process through cudaIpcOpenMemHandle (with lazy peer
// access), a ring of its own process (ranks that are threads) by the raw
// address, enabling peer access when the two devices differ. Several ranks
// may share one GPU (their rings are then plain device memory of that GPU),
// unlike NCCL, which refuses them.
//
// canConnect: the peer is on this host and its GPU (found by PCI bus id, so
// CUDA_VISIBLE_DEVICES may number it differently in each process) is this
// rank's own GPU or one it can access (cudaDeviceCanAccessPeer). Without a
// usable device, canConnect is false and creating or opening a ring throws
// grove::Error(groveUnhandledCudaError) saying why.
//
// Destruction: the closed word of every ring this side allocated or mapped
// over IPC is set (a peer's kernel then fails instead of waiting), IPC
// mappings are closed and allocations freed. A same-process ring opened by
// its raw address is left to its owner (the memory may already be freed).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transports/device_transport.h"

namespace grove::transport {

/// Fills peer.cudaDevice and peer.pciBusId for CUDA device `device` of this
/// process. Returns false (leaving them -1 / empty) when there is no such
/// device; never throws.
bool fillCudaIdentity(DevicePeer& peer, int device);

/// Rings in device memory shared over CUDA IPC ("cuda_p2p").
class CudaP2PTransport final : public DeviceTransport {
 public:
  /// Keeps a copy of `ctx`; this rank's device is ctx.peers[ctx.rank].cudaDevice.
  /// Never fails for want of a GPU (see available()); throws
  /// groveInvalidArgument for an inconsistent context.
  explicit CudaP2PTransport(DeviceContext ctx);
  /// Sets the closed words, closes IPC mappings, frees allocations.
  ~CudaP2PTransport() override;

  /// "cuda_p2p".
  const char* name() const override { return "cuda_p2p"; }
  /// See the file comment.
  bool canConnect(int peer) const override;
  /// cudaMalloc + zero + IPC handle on this rank's device.
  DevRing createRecv(const LinkKey& key, uint64_t capacity, RingExport& out) override;
  /// Maps the peer's ring (raw address in-process, else cudaIpcOpenMemHandle).
  DevRing openSend(const LinkKey& key, const RingExport& in) override;

  /// True when this rank has a usable CUDA device.
  bool available() const { return available_; }
  /// Why the transport is unavailable (empty when available()).
  const std::string& unavailableReason() const { return reason_; }
  /// Rings this side holds (created and opened).
  size_t ringCount() const { return held_.size(); }

 private:
  struct Held;
  void requireAvailable(const char* what) const;

  DeviceContext ctx_;
  int device_ = -1;
  bool available_ = false;
  std::string reason_;
  std::vector<int> peerDevice_;  // each peer's GPU as this process numbers it (-1: unknown)
  std::vector<std::unique_ptr<Held>> held_;
};

}  // namespace grove::transport

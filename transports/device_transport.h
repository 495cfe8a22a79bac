// The narrow interface of the device transports: how the memory of one
// device ring (device_ring.h's DevRing) is made by its receiver and reached
// by its sender.
//
// How it works: the RECEIVER owns a ring's memory. createRecv() allocates it
// (device memory, pinned shared host memory, ...), zeroes the control block
// and fills a RingExport: a fixed-size plain record that says where the
// memory is (a CUDA IPC handle, a shared-memory segment name, or the raw
// pointer when both ends are threads of one process) and what it is for
// (the link's channel and route, the capacity). The core carries the export
// to the sender over the communicator's host links; openSend() checks it
// and maps the memory into the sender's address space. Each side gets a
// DevRing whose pointers are valid where that side runs (device pointers
// for a GPU, host pointers in the emulation).
//
// A transport owns every allocation and mapping it made. Its destructor
// first sets the `closed` word of each ring it can still reach, so a peer
// waiting on the ring fails at once instead of timing out, then releases
// the memory.
//
// Which transport serves a peer is chosen by the core from the registry's
// device rows (registry.h), in order of priority, by canConnect() over the
// per-peer facts (DevicePeer) every rank publishes at init.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "transports/device_ring.h"
#include "transports/transport.h"

namespace grove::transport {

/// What every rank tells the others about itself for device links (fixed-size, POD).
struct DevicePeer {
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t hostHash = 0;    ///< same value on every rank of one host
  int32_t cudaDevice = -1;  ///< CUDA device index in the rank's process; -1: none
  int32_t flags = 0;        ///< kDevicePeer* bits
  char pciBusId[32] = {};   ///< the device's PCI bus id ("0000:3b:00.0"); empty: none
};
static_assert(std::is_trivially_copyable_v<DevicePeer>, "DevicePeer travels as bytes");
/// DevicePeer::flags: an MPS control daemon runs for the rank's process.
inline constexpr int32_t kDevicePeerMps = 1;
/// DevicePeer::flags: the rank's device can run stream tapes (64-bit stream
/// memory operations), or the rank emulates its device.
inline constexpr int32_t kDevicePeerStreamOps = 2;

/// What kind of memory a RingExport describes.
enum class RingKind : uint32_t {
  kNone = 0,
  kHostStaged = 1,    ///< shared host memory registered with CUDA (host_staged)
  kHostEmulated = 2,  ///< plain shared host memory (host_staged, emulation mode)
  kCudaIpc = 3,       ///< device memory shared by CUDA IPC (cuda_p2p)
};

/// Name of a ring kind ("host_staged", ...), for messages.
inline const char* ringKindName(RingKind k) {
  switch (k) {
    case RingKind::kNone: return "none";
    case RingKind::kHostStaged: return "host_staged";
    case RingKind::kHostEmulated: return "host_staged (emulated)";
    case RingKind::kCudaIpc: return "cuda_p2p";
  }
  return "invalid";
}

/// Size of a CUDA IPC memory handle (cudaIpcMemHandle_t), opaque here.
inline constexpr size_t kIpcHandleBytes = 64;
/// Most bytes of a shared-memory segment name in a RingExport (with the NUL).
inline constexpr size_t kExportNameBytes = 160;
/// Marks a RingExport as one (guards against reading garbage off a link).
inline constexpr uint32_t kRingExportMagic = 0x47525845;  // "GRXE"

/// What a receiver tells the sender about one ring (fixed-size, POD; sent as bytes).
struct RingExport {
  uint32_t magic = kRingExportMagic;  ///< kRingExportMagic in every real export
  RingKind kind = RingKind::kNone;    ///< what memory this is, and which transport made it
  int32_t channel = 0;                ///< the link's channel (the sender checks it)
  uint32_t route = 0;                 ///< the link's route id (the sender checks it)
  int32_t ownerRank = -1;             ///< the receiver
  int32_t ownerPid = 0;               ///< the receiver's process
  uint64_t hostHash = 0;              ///< the receiver's host
  uint64_t capacity = 0;              ///< data bytes of the ring (a multiple of kRingCapacityAlign)
  uint64_t rawPtr = 0;  ///< the memory's address in the owner's process (same-process use)
  uint8_t ipcHandle[kIpcHandleBytes] = {};  ///< CUDA IPC handle (kCudaIpc)
  char shmName[kExportNameBytes] = {};      ///< segment file name in GROVE_SHM_DIR (host kinds)
};
static_assert(std::is_trivially_copyable_v<RingExport>, "RingExport travels as bytes");
static_assert(sizeof(RingExport) % 16 == 0, "RingExport keeps 16-byte steps");

/// What a device transport needs to know about its communicator.
struct DeviceContext {
  int rank = 0;
  int nranks = 1;
  std::string jobId;              ///< unique per communicator: names segments
  std::vector<DevicePeer> peers;  ///< indexed by rank (peers[rank] is this rank)
};

/// A way of making device rings between this rank and its peers.
///
/// Two kinds open their links differently. An exporting transport (the
/// default: cuda_p2p, host_staged) shares one ring between both ends: the
/// receiver's createRecv() makes it, the core carries the RingExport to the
/// sender, whose openSend() maps it. A bridging transport (bridged() true:
/// the proxy to other hosts) gives each end a ring of its own that it pumps
/// to or from one of the communicator's host links (bridgeSend/bridgeRecv);
/// nothing is exported.
class DeviceTransport {
 public:
  /// Sets the closed word of every ring it still reaches and releases them all.
  virtual ~DeviceTransport() = default;
  /// "cuda_p2p", "host_staged", ...
  virtual const char* name() const = 0;
  /// True if this transport can make rings between this rank and `peer`.
  virtual bool canConnect(int peer) const = 0;
  /// Receiver side: allocates a zeroed ring of `capacity` data bytes (a
  /// multiple of kRingCapacityAlign) for the link from key.peer, fills `out`
  /// and returns this side's handle. Throws grove::Error on failure.
  virtual DevRing createRecv(const LinkKey& key, uint64_t capacity, RingExport& out) = 0;
  /// Sender side: maps the ring `in` describes (the peer's ring for the link
  /// to key.peer) after checking it is the ring of this link and of this
  /// transport's kind. Throws grove::Error on a mismatch or failure.
  virtual DevRing openSend(const LinkKey& key, const RingExport& in) = 0;

  /// True if links open through bridgeSend/bridgeRecv instead of an export.
  virtual bool bridged() const { return false; }
  /// Bridging transports: a ring of `capacity` bytes the device sends on,
  /// drained into `host` (which must outlive this transport).
  virtual DevRing bridgeSend(const LinkKey& key, uint64_t capacity, SendHalf& host) {
    (void)capacity, (void)host;
    throwInternalError(std::string(name()) + ": not a bridging transport (send to rank " +
                       std::to_string(key.peer) + ")");
  }
  /// Bridging transports: a ring of `capacity` bytes the device receives
  /// on, filled from `host` (which must outlive this transport).
  virtual DevRing bridgeRecv(const LinkKey& key, uint64_t capacity, RecvHalf& host) {
    (void)capacity, (void)host;
    throwInternalError(std::string(name()) + ": not a bridging transport (receive from rank " +
                       std::to_string(key.peer) + ")");
  }
  /// The first failure this transport saw on its own (a bridging
  /// transport's pumping thread), "" while none.
  virtual std::string error() const { return {}; }
};

/// Throws grove::Error(groveInvalidArgument) when `ctx` is inconsistent
/// (rank out of range, peers not one per rank, empty jobId); `who` prefixes the message.
inline void checkDeviceContext(const DeviceContext& ctx, const char* who) {
  const std::string w(who);
  if (ctx.nranks < 1 || ctx.rank < 0 || ctx.rank >= ctx.nranks)
    throwInvalidArgument(w + ": rank " + std::to_string(ctx.rank) + " out of range for " +
                         std::to_string(ctx.nranks) + " ranks");
  if (static_cast<int>(ctx.peers.size()) != ctx.nranks)
    throwInvalidArgument(w + ": peers has " + std::to_string(ctx.peers.size()) + " entries for " +
                         std::to_string(ctx.nranks) + " ranks");
  if (ctx.jobId.empty()) throwInvalidArgument(w + ": empty jobId");
}

/// The RingExport of a ring this rank (ctx.rank, this process and host)
/// made for the link from key.peer: kind, link, owner, capacity and the
/// memory's address here; the transport adds its handle or segment name.
inline RingExport makeRingExport(RingKind kind, const LinkKey& key, const DeviceContext& ctx,
                                 uint64_t capacity, const void* base) {
  RingExport out;
  out.kind = kind;
  out.channel = key.channel;
  out.route = key.route;
  out.ownerRank = ctx.rank;
  out.ownerPid = static_cast<int32_t>(getpid());
  out.hostHash = ctx.peers[ctx.rank].hostHash;
  out.capacity = capacity;
  out.rawPtr = reinterpret_cast<uintptr_t>(base);
  return out;
}

/// Throws grove::Error(groveInternalError) unless `in` is a RingExport of
/// `kind` for the link `key` (channel, route, owner = key.peer) with a valid capacity.
inline void checkRingExport(const RingExport& in, const LinkKey& key, RingKind kind,
                            const char* who) {
  const std::string link = std::string(who) + ": ring to rank " + std::to_string(key.peer) +
                           " channel " + std::to_string(key.channel) + " route " +
                           std::to_string(key.route);
  if (in.magic != kRingExportMagic)
    throwInternalError(link + ": the peer's ring description is garbled");
  if (in.kind != kind)
    throwInternalError(link + ": the peer made a " + ringKindName(in.kind) + " ring, expected " +
                       ringKindName(kind) + " (both ends must choose the same transport)");
  if (in.ownerRank != key.peer || in.channel != key.channel || in.route != key.route)
    throwInternalError(link + ": the peer described the ring of rank " +
                       std::to_string(in.ownerRank) + " channel " + std::to_string(in.channel) +
                       " route " + std::to_string(in.route) +
                       " (the two ends opened links out of order)");
  if (in.capacity == 0 || in.capacity % kRingCapacityAlign != 0)
    throwInternalError(link + ": bad ring capacity " + std::to_string(in.capacity));
}

}  // namespace grove::transport

// DeviceConnections: a communicator's device rings -- the DevRing tables a
// lowered device program (exec/device/dev_program.h) runs on -- opened
// lazily over the device transports.
//
// How it works: every rank runs the same collective, so both ends of a
// link ask for it in the same ensure() call. For each link this rank
// RECEIVES on and has not opened yet, the transport chosen for that peer
// creates the ring's memory here and describes it in a RingExport
// (transports/device_transport.h). The exports then travel to the senders
// over the communicator's host links, in a one-off send/recv program
// (plan::buildP2P, run by exec::runProgram) on a reserved control channel,
// kDeviceControlChannel, so they never share a stream with collective
// bytes. Both ends list a peer's links in the same order (sorted by
// channel, then route), so the sender's k-th missing link to a peer is
// described by the peer's k-th export; the sender checks the channel and
// route and maps the ring. Rings stay open for the communicator's life;
// the transports set every ring's closed word when they are destroyed.
//
// Choice per peer, fixed at construction and the same on both ends: the
// first of the registry's device rows (transports/registry.h), in order of
// priority, whose transport can connect -- cuda_p2p (same host, same GPU or
// P2P access both ways), host_staged (same host), the proxy (another host).
// The proxy bridges: rings in this rank's own pinned memory, pumped by a
// proxy thread over host links of their own (channel
// kDeviceProxyChannelBase + the device channel); those need no export
// exchange. The emulation flag makes host_staged and the proxy's rings
// plain host memory (no CUDA) for every peer -- the mode tests use without
// a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "algorithms/builders/builders.h"
#include "base/wait.h"
#include "exec/device/dev_program.h"
#include "exec/host_executor.h"
#include "transports/device_transport.h"

namespace grove::core {

/// Connection channel of the ring-export exchange: above the collectives'
/// channels and grouped send/recv's, so its bytes never mix with theirs.
inline constexpr int kDeviceControlChannel = plan::kP2PChannel + plan::kMaxP2PChannels;

/// Host links of the network proxy: device channel c to a rank on another
/// host is pumped over host channel kDeviceProxyChannelBase + c.
inline constexpr int kDeviceProxyChannelBase = kDeviceControlChannel + 1;

/// Opens (if needed) the host links `program` uses and returns the table to
/// run it on: Connections::ensure in a communicator, a harness in tests.
using HostLinks = std::function<exec::LinkTable&(const plan::Program&)>;
/// Every rank contributes `bytes` bytes; returns nranks * bytes in rank order
/// (Bootstrap::allGather).
using AllGatherFn = std::function<std::vector<uint8_t>(const void* data, size_t bytes)>;

/// Knobs of DeviceConnections.
struct DeviceLinkOptions {
  bool emulate = false;       ///< host_staged in emulation mode for every peer (no CUDA at all)
  uint64_t ringCapacity = 0;  ///< data bytes of each ring (see deviceRingCapacity)
  bool disableP2P =
      false;  ///< never cuda_p2p: host_staged between GPUs of one host (GROVE_P2P_DISABLE)
};

/// Ring capacity for a communicator: bufferBytes rounded up to
/// kRingCapacityAlign, and at least chunkBytes + 64 (a whole chunk plus its
/// step padding always fits).
uint64_t deviceRingCapacity(size_t bufferBytes, uint64_t chunkBytes);

/// This process's DevicePeer as `rank`: pid, host hash and, for a CUDA
/// device index >= 0 in a CUDA build, the device and its PCI bus id.
transport::DevicePeer localDevicePeer(int rank, int cudaDevice);
/// Every rank's DevicePeer (all-gather of `self`); throws
/// grove::Error(groveInternalError) if an entry is not the rank it should be.
std::vector<transport::DevicePeer> gatherDevicePeers(const transport::DevicePeer& self, int nranks,
                                                     const AllGatherFn& allGather);

/// The ring tables of one program, in its key order.
struct DeviceRingTables {
  std::vector<transport::DevRing> sends;  ///< sends[i] is the ring of DevProgram::sendKeys[i]
  std::vector<transport::DevRing> recvs;  ///< recvs[i] is the ring of DevProgram::recvKeys[i]
};

/// One rank's device rings to its peers, opened on demand (see the file comment).
class DeviceConnections {
 public:
  /// Makes a transport of every device row of the registry that takes part
  /// under these options (cuda_p2p not when emulating or with disableP2P).
  /// `hostLinks` carries the exchange and the proxy's bytes; `wait` bounds
  /// them. Throws grove::Error(groveInvalidUsage) when a peer cannot be
  /// reached, groveInvalidArgument for a bad context or capacity.
  DeviceConnections(transport::DeviceContext ctx, HostLinks hostLinks, const WaitContext& wait,
                    const DeviceLinkOptions& options);
  /// As above with given transports, tried in this order per peer (null
  /// entries skipped).
  DeviceConnections(transport::DeviceContext ctx, HostLinks hostLinks, const WaitContext& wait,
                    const DeviceLinkOptions& options,
                    std::vector<std::unique_ptr<transport::DeviceTransport>> transports);
  /// Closes every ring (the transports set the closed words) and releases
  /// them; the proxy drains and stops first. Must go before the host links
  /// the proxy pumps into (the communicator's Connections).
  ~DeviceConnections();
  DeviceConnections(const DeviceConnections&) = delete;
  DeviceConnections& operator=(const DeviceConnections&) = delete;

  /// Opens every ring `program` uses that is not open yet (a collective
  /// call: every rank whose links are missing must call it with its part of
  /// the same collective) and returns both tables in the program's key order.
  /// Throws grove::Error on a bad key, a transport failure, or a failed exchange.
  DeviceRingTables ensure(const exec::dev::DevProgram& program);

  /// The transport serving `peer` ("cuda_p2p", "host_staged", "proxy"), or "" for none (self).
  const char* transportName(int peer) const;
  /// What this rank's peers are reached with, '+'-joined ("cuda_p2p",
  /// "host_staged", "proxy"; "none"), plus " (emulated)" in emulation mode.
  const std::string& summary() const { return summary_; }
  /// Data bytes of each ring.
  uint64_t ringCapacity() const { return capacity_; }
  /// Sending rings open so far.
  size_t sendCount() const { return sends_.size(); }
  /// Receiving rings open so far.
  size_t recvCount() const { return recvs_.size(); }
  /// The first failure a transport saw on its own (the proxy's pumping
  /// thread) as "name: what", "" while none.
  std::string transportError() const;

 private:
  void choose();
  void checkPeer(int peer, const char* what) const;
  void openBridged(const std::set<transport::LinkKey>& sends,
                   const std::set<transport::LinkKey>& recvs);
  void openExported(const std::set<transport::LinkKey>& sends,
                    const std::set<transport::LinkKey>& recvs);
  void exchange(const std::map<int, std::vector<transport::RingExport>>& outgoing,
                std::map<int, std::vector<transport::RingExport>>& incoming);
  transport::DeviceTransport& transportFor(int peer, const char* what) const;

  transport::DeviceContext ctx_;
  HostLinks hostLinks_;
  WaitContext wait_;
  uint64_t capacity_ = 0;
  bool emulated_ = false;
  std::vector<std::unique_ptr<transport::DeviceTransport>> transports_;
  std::vector<transport::DeviceTransport*> byPeer_;
  std::map<transport::LinkKey, transport::DevRing> sends_;
  std::map<transport::LinkKey, transport::DevRing> recvs_;
  std::string summary_;
};

}  // namespace grove::core

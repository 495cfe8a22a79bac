// The transport registry: one table row per kind of link, which the core
// reads instead of naming any transport.
//
// How it works. A row says what its links provide (TransportEntry::provides:
// byte streams, slots for small whole messages, one-sided writes, device
// rings), its traits and how to make it; the core and the tools read rows,
// never names.
//
// Byte links (rows with `make`): a communicator opens them in two stages
// around the bootstrap. Before peers are known, each enabled row's `open`
// makes what peers need to reach this rank (the socket transport's
// listener, the network transport's fabric endpoints) and returns it as an
// Endpoint whose address() is an opaque blob; the core stores the blob in
// PeerInfo::addresses[slot] (slot = the row's index; byte rows come first),
// and the bootstrap's all-gather carries it to every rank. Then `make` turns
// the endpoint and the full Context (every rank's blob for this transport in
// Context::addresses) into the Transport. For each peer the core takes the
// first transport, in order of priority, whose `canConnect(self, peer)`
// says yes. The selector and the cost model read the `traits` of the
// slowest transport in use, never its name.
//
// Device rings (rows with `makeDevice`): a CUDA communicator makes one
// DeviceTransport per such row (a row may decline: nullptr) and reaches
// each peer with the first, in order of priority, whose canConnect says
// yes: cuda_p2p, host_staged, and the proxy that bridges device rings to
// the byte links of ranks on other hosts.
//
// Adding a transport: a folder of its own under transports/ implementing
// transport.h or device_transport.h (the build finds the folder), and one
// row in registry.cc. A program can also add a row at run time
// (registerTransport) before its first communicator.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/link_traits.h"
#include "base/wait.h"
#include "transports/device_transport.h"
#include "transports/transport.h"

namespace grove::transport {

/// What a transport opened before peers were known: its address.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  /// The blob peers need to reach this rank (at most Address::kMaxBytes).
  virtual Address address() const = 0;
};

/// What `open` knows: the communicator's settings that precede the bootstrap.
struct OpenArgs {
  double timeoutSec = 30;
  /// The topology's links carry IP addresses: listen on every address.
  bool linkAddresses = false;
  /// GROVE_TRANSPORT names this transport (not "auto"): a transport that
  /// would give way to a faster one by default (the network transport on a
  /// plain TCP provider) opens anyway.
  bool named = false;
  /// Names of the NIC closest to this rank's GPU or CPU in the local
  /// topology (verbs device, interface, node name), or none: a transport
  /// with several NICs puts that one first.
  std::vector<std::string> closestNics;
};

/// One rank as canConnect sees it: what it published.
struct PeerEnd {
  const PeerInfo& info;
  const Address& address;  ///< this transport's blob for that rank
};

/// What `makeDevice` knows: the communicator's device settings.
struct DeviceOpenArgs {
  /// Rings in plain host memory driven by CPU threads (no CUDA at all).
  bool emulate = false;
  /// No peer-to-peer GPU access (GROVE_P2P_DISABLE): host memory between GPUs.
  bool disableP2P = false;
  /// The abort flag and timeouts of threads a transport runs (the proxy's pump).
  WaitContext wait;
};

/// What a row's links provide (TransportEntry::provides, bits).
enum Provides : unsigned {
  kByteStreams = 1u << 0,  ///< SendHalf/RecvHalf byte streams (transport.h)
  kSlots = 1u << 1,        ///< slot links for small whole messages (SlotSender)
  kOneSided = 1u << 2,     ///< one-sided writes with signals (OneSided)
  kDeviceRings = 1u << 3,  ///< DevRing memory that GPU kernels drive (device_transport.h)
};

/// One row of the registry.
struct TransportEntry {
  const char* name;         ///< GROVE_TRANSPORT names it ("shm", "socket", "net")
  const char* description;  ///< one line for grove-info
  int priority;             ///< higher is tried first for a peer (among rows of its kind)
  LinkTraits traits;        ///< what the selector and the cost model know of the links
  unsigned provides = 0;    ///< Provides bits
  // --- byte links (kByteStreams) ---
  /// True if this transport can link `self` to `peer` (both published).
  std::function<bool(const PeerEnd& self, const PeerEnd& peer)> canConnect;
  /// Opens what peers need before the bootstrap, or returns nullptr when the
  /// transport cannot work on this host (why is logged). May throw.
  std::function<std::unique_ptr<Endpoint>(const OpenArgs&)> open;
  /// The transport, from its endpoint and the full context.
  std::function<std::unique_ptr<Transport>(const Context&, std::unique_ptr<Endpoint>)> make;
  // --- device rings (kDeviceRings) ---
  /// The device transport of one communicator, or nullptr when this row
  /// sits out under these settings (cuda_p2p when emulating). May throw.
  std::function<std::unique_ptr<DeviceTransport>(const DeviceContext&, const DeviceOpenArgs&)>
      makeDevice;

  /// True if the row's links provide every bit of `what`.
  bool has(unsigned what) const { return (provides & what) == what; }
};

/// What `provides` says, in words ("byte streams, slots").
std::string describeProvides(unsigned provides);

/// Every transport built into this library (and registered since), byte
/// rows first and each kind highest priority first. The slot of a byte row
/// (PeerInfo::addresses) is its index here.
const std::vector<TransportEntry>& registry();

/// Adds a row (a transport built outside this library, or a test's): byte
/// rows go after the last byte row, device rows at the end, each after the
/// rows of its kind with a priority at least its own. Only while nothing
/// has read the registry (program start-up, before any communicator, tool
/// or lookup): throws grove::Error(groveInvalidUsage) once it was read,
/// groveInvalidArgument for a row with no name, a taken name, no way to
/// make it, or no address slot left. Every rank must register the same
/// rows (communicator creation checks).
void registerTransport(TransportEntry row);

/// Marks the registry read (every lookup does): from then on the rows and
/// their slots never change, so references to rows stay valid.
void sealRegistry();

/// The row named `name` (case-insensitive), or nullptr.
const TransportEntry* findTransport(const std::string& name);

/// The first row, highest priority first, whose links provide every bit of
/// `what`; nullptr if none.
const TransportEntry* firstProviding(unsigned what);

/// Comma-separated names of the registered rows whose links provide every
/// bit of `what` (0: every row) (help texts, errors).
std::string transportNames(unsigned what = 0);

/// Fills into `peer` what the device rows need to know of this process's
/// CUDA device `cudaDevice` (its index and PCI bus id). Returns false,
/// leaving them unset, when the build or the process has no such device;
/// never throws.
bool describeLocalDevice(DevicePeer& peer, int cudaDevice);

/// Context for the transport in registry slot `slot`: ctx with addresses
/// filled from its peers' PeerInfo::addresses[slot].
Context contextForSlot(const Context& ctx, int slot);

}  // namespace grove::transport

// The transport registry: one table row per transport, which the core reads
// instead of naming any transport.
//
// How it works: a communicator opens its transports in two stages around
// the bootstrap. Before peers are known, each enabled transport's `open`
// makes what peers need to reach this rank (the socket transport's
// listener, the network transport's fabric endpoints) and returns it as an
// Endpoint whose address() is an opaque blob; the core stores the blob in
// PeerInfo::addresses[slot] (slot = the row's index), and the bootstrap's
// all-gather carries it to every rank. Then `make` turns the endpoint and
// the full Context (every rank's blob for this transport in
// Context::addresses) into the Transport. For each peer the core takes the
// first transport, in order of priority, whose `canConnect(self, peer)`
// says yes. The selector and the cost model read the `traits` of the
// slowest transport in use, never its name.
//
// Adding a transport: a folder of its own implementing transport.h, and one
// row in registry.cc.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/link_traits.h"
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

/// One row of the registry.
struct TransportEntry {
  const char* name;         ///< GROVE_TRANSPORT names it ("shm", "socket", "net")
  const char* description;  ///< one line for grove-info
  int priority;             ///< higher is tried first for a peer
  LinkTraits traits;
  /// True if this transport can link `self` to `peer` (both published).
  std::function<bool(const PeerEnd& self, const PeerEnd& peer)> canConnect;
  /// Opens what peers need before the bootstrap, or returns nullptr when the
  /// transport cannot work on this host (why is logged). May throw.
  std::function<std::unique_ptr<Endpoint>(const OpenArgs&)> open;
  /// The transport, from its endpoint and the full context.
  std::function<std::unique_ptr<Transport>(const Context&, std::unique_ptr<Endpoint>)> make;
};

/// Every transport built into this library, highest priority first. The
/// slot of a row (PeerInfo::addresses) is its index here.
const std::vector<TransportEntry>& registry();

/// The row named `name` (case-insensitive), or nullptr.
const TransportEntry* findTransport(const std::string& name);

/// Comma-separated names of every registered transport (help texts, errors).
std::string transportNames();

/// Context for the transport in registry slot `slot`: ctx with addresses
/// filled from its peers' PeerInfo::addresses[slot].
Context contextForSlot(const Context& ctx, int slot);

}  // namespace grove::transport

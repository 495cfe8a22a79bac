// Connections: a communicator's transports and its table of open links.
//
// Links open lazily, the first time a program needs them: every rank runs
// the same collective, so both ends of a link ask for it in the same call.
// Transports are asked in a fixed order (the registry's, transports/
// registry.h), and each does its non-waiting part first, so ranks that open
// at once never wait in a cycle. Which transport serves a peer is fixed at
// init: the first enabled one, by priority, that can reach it (shared memory
// on this host, then the network transport where a fast fabric is present,
// then TCP sockets); GROVE_TRANSPORT names the ones enabled.
//
// Eager collectives (exec/eager.h) run over slot links, opened with every
// peer at the first eager call; only when every peer is on shared memory.
//
// Planned routes: a program built from topology plans names the route of
// some of its links (Program::routes). Where the topology gives the route's
// end addresses and the peer's transport is routable (sockets), the link is opened as
// a connection of its own over that route (LinkKey::route = an id both ends
// derive from the route's addresses) and the program runs over a view of the
// table that maps its (peer, channel) to that connection. Programs that share
// a route share its connections; links without one use the default path.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/options.h"
#include "exec/eager.h"
#include "exec/host_executor.h"
#include "ir/schedule.h"
#include "transports/registry.h"
#include "transports/transport.h"

namespace grove::core {

/// A planned route as the transports see it: an id (0 = none: the default
/// path) and the addresses of its two ends.
struct PlannedRoute {
  uint32_t id = 0;
  transport::PeerRoute addresses;  ///< local = the sender's end, remote = the receiver's
};

/// Maps one of a program's planned links to its route (the core derives it
/// from the topology); must give both ends of a link the same id.
using RouteResolver = std::function<PlannedRoute(const plan::LinkRoute&)>;

/// A transport opened before the bootstrap: its registry slot and endpoint.
struct OpenedTransport {
  int slot = -1;
  std::unique_ptr<transport::Endpoint> endpoint;
};

/// Opens every transport GROVE_TRANSPORT (`mode`: "auto", or names separated
/// by commas) enables, in registry order, and writes each one's address into
/// self->addresses. "auto" enables every transport of positive priority
/// whose open() succeeds here. Throws groveInvalidArgument for an unknown
/// name, or a named transport that cannot work on this host.
std::vector<OpenedTransport> openTransports(const std::string& mode,
                                            const transport::OpenArgs& args,
                                            transport::PeerInfo* self);

/// Checks GROVE_TRANSPORT text ("auto" or registered names); returns it
/// normalised (lower case, no blanks) or throws groveInvalidArgument naming `source`.
std::string parseTransportMode(const std::string& text, const char* source);

class Connections {
 public:
  /// Makes the opened transports with `ctx` (whose peers carry every rank's
  /// addresses) and picks one per peer. `mode` is GROVE_TRANSPORT (errors).
  /// `routes` resolves planned routes (empty: every link on its default path).
  Connections(const transport::Context& ctx, std::vector<OpenedTransport> opened,
              const std::string& mode = "auto", RouteResolver routes = {});
  ~Connections();

  /// Opens every link `program` uses that is not open yet and returns the
  /// table to run it with. A program seen before (held by the caller's
  /// cache) is recognised and costs nothing. `lowered`, if given, receives
  /// the program's exec::LoweredProgram for that table (kept here with it).
  exec::LinkTable& ensure(const std::shared_ptr<const plan::Program>& program,
                          exec::LoweredProgram** lowered = nullptr);
  /// As above, for a program built for one call (the returned table is
  /// valid until the next call).
  exec::LinkTable& ensure(const plan::Program& program);
  /// "shm", "socket", "shm+net", ...: what this rank's peers are reached with.
  const std::string& summary() const { return summary_; }
  /// True if any peer is reached over a network (not shared memory).
  bool usesNetwork() const { return traits_.network(); }
  /// The traits of the slowest transport this rank uses (for the selector
  /// and the cost model); shm's when it has no peers.
  const LinkTraits& traits() const { return traits_; }
  /// True if every peer is reached by a transport with slot links (eager).
  bool slotLinks() const { return slotLinks_; }
  /// The eager collectives over slot links to every peer (all on shared
  /// memory), opened on first use -- every rank asks in the same call -- with
  /// slots for blocks of `maxBytes` (and their call tags with `tags`). Throws
  /// groveInternalError if some peer is not reached over shared memory.
  exec::EagerCollectives& eager(size_t maxBytes, bool tags) {
    if (eager_ && eager_->maxBytes() >= maxBytes && eager_->tags() == tags) return *eager_;
    return openEager(maxBytes, tags);
  }
  /// Slots per slot link (how many eager calls a rank may run ahead of a
  /// peer): as many as fit kEagerBudgetBytes of receive slots per rank,
  /// between kEagerMinSlots and kEagerMaxSlots.
  static int eagerSlots(int nranks, size_t slotStride);
  static constexpr size_t kEagerBudgetBytes = 4u << 20;
  static constexpr int kEagerMinSlots = 8;
  static constexpr int kEagerMaxSlots = 64;

  /// One-sided access to `peer` (transport.h's OneSided) when the transport
  /// that reaches it has one (net), else nullptr.
  transport::OneSided* oneSidedTo(int peer) const;

 private:
  class RoutedLinks;
  transport::Transport* transportFor(int peer) const;
  std::unique_ptr<RoutedLinks> open(const plan::Program& program);
  exec::EagerCollectives& openEager(size_t maxBytes, bool tags);

  std::vector<std::unique_ptr<transport::Transport>> transports_;  // registry order
  std::vector<transport::Transport*> byPeer_;
  exec::MapLinkTable table_;
  RouteResolver resolver_;
  // Programs whose links are all open (kept alive so their addresses stay
  // unique), with the routed view they run on (null: the table itself) and
  // their lowered form for it.
  struct Ready {
    std::unique_ptr<RoutedLinks> view;
    exec::LoweredProgram lowered;
  };
  std::map<std::shared_ptr<const plan::Program>, Ready> ready_;
  std::unique_ptr<RoutedLinks> oneOff_;  // the view of the last ensure(const Program&)
  std::string summary_;
  LinkTraits traits_;
  bool slotLinks_ = true;
  int rank_ = 0;
  int nranks_ = 1;
  std::unique_ptr<exec::EagerCollectives> eager_;
};

}  // namespace grove::core

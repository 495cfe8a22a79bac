// Connections: a communicator's transports and its table of open links.
//
// Links open lazily, the first time a program needs them: every rank runs
// the same collective, so both ends of a link ask for it in the same call.
// Transports are asked in a fixed order (shm, then socket), and each does its
// non-waiting part first, so ranks that open at once never wait in a cycle.
// Which transport serves a peer is fixed at init: shared memory for ranks on
// this host (unless GROVE_TRANSPORT=socket), TCP sockets otherwise.
//
// Eager collectives (exec/eager.h) run over slot links, opened with every
// peer at the first eager call; only when every peer is on shared memory.
//
// Planned routes: a program built from topology plans names the route of
// some of its links (Program::routes). Where the topology gives the route's
// end addresses and the peer is reached over sockets, the link is opened as
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

#include "algorithms/schedule.h"
#include "core/options.h"
#include "exec/eager.h"
#include "exec/host_executor.h"
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

class Connections {
 public:
  /// `socket` is the socket transport (already listening); shm is made here.
  /// `routes` resolves planned routes (empty: every link on its default path).
  Connections(const transport::Context& ctx, TransportMode mode,
              std::unique_ptr<transport::Transport> socket, RouteResolver routes = {});
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
  /// "shm", "socket" or "shm+socket": what this rank's peers are reached with.
  const std::string& summary() const { return summary_; }
  /// True if any peer is reached over the network transport.
  bool usesSocket() const { return socketPeers_ > 0; }
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
  static int eagerSlots(int nranks, size_t maxBytes);
  static constexpr size_t kEagerBudgetBytes = 4u << 20;
  static constexpr int kEagerMinSlots = 8;
  static constexpr int kEagerMaxSlots = 64;

 private:
  class RoutedLinks;
  transport::Transport* transportFor(int peer) const;
  std::unique_ptr<RoutedLinks> open(const plan::Program& program);
  exec::EagerCollectives& openEager(size_t maxBytes, bool tags);

  std::unique_ptr<transport::Transport> shm_;
  std::unique_ptr<transport::Transport> socket_;
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
  int socketPeers_ = 0;
  int rank_ = 0;
  int nranks_ = 1;
  std::unique_ptr<exec::EagerCollectives> eager_;
};

}  // namespace grove::core

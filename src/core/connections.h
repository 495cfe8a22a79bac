// Connections: a communicator's transports and its table of open links.
//
// Links open lazily, the first time a program needs them: every rank runs
// the same collective, so both ends of a link ask for it in the same call.
// Transports are asked in a fixed order (shm, then socket), and each does its
// non-waiting part first, so ranks that open at once never wait in a cycle.
// Which transport serves a peer is fixed at init: shared memory for ranks on
// this host (unless GROVE_TRANSPORT=socket), TCP sockets otherwise.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "core/options.h"
#include "exec/host_executor.h"
#include "transports/transport.h"

namespace grove::core {

class Connections {
 public:
  /// `socket` is the socket transport (already listening); shm is made here.
  Connections(const transport::Context& ctx, TransportMode mode,
              std::unique_ptr<transport::Transport> socket);
  ~Connections();

  /// Opens every link `program` uses that is not open yet. A program seen
  /// before (held by the caller's cache) is recognised and costs nothing.
  void ensure(const std::shared_ptr<const plan::Program>& program);
  /// As above, for a program built for one call.
  void ensure(const plan::Program& program);
  /// The open links, for the executor.
  exec::LinkTable& links() { return table_; }
  /// "shm", "socket" or "shm+socket": what this rank's peers are reached with.
  const std::string& summary() const { return summary_; }
  /// True if any peer is reached over the network transport.
  bool usesSocket() const { return socketPeers_ > 0; }

 private:
  transport::Transport* transportFor(int peer) const;

  std::unique_ptr<transport::Transport> shm_;
  std::unique_ptr<transport::Transport> socket_;
  std::vector<transport::Transport*> byPeer_;
  exec::MapLinkTable table_;
  // Programs whose links are all open (kept alive so their addresses stay unique).
  std::set<std::shared_ptr<const plan::Program>> ready_;
  std::string summary_;
  int socketPeers_ = 0;
};

}  // namespace grove::core

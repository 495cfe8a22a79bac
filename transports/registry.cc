// The transport registry's table (see registry.h). One row per transport.
#include "transports/registry.h"

#include <strings.h>

#include "base/error.h"
#include "grove_build_info.h"
#include "transports/loopback/loopback_transport.h"
#include "transports/shm/shm_transport.h"
#include "transports/socket/socket_transport.h"
#if GROVE_HAVE_LIBFABRIC
#include "transports/net/net_transport.h"
#endif

namespace grove::transport {
namespace {

/// A transport that needs nothing published before the bootstrap.
class NoEndpoint final : public Endpoint {
 public:
  Address address() const override { return Address{}; }
};

std::unique_ptr<Endpoint> noEndpoint(const OpenArgs&) { return std::make_unique<NoEndpoint>(); }

/// The socket transport's listener, published as its sockaddr.
class SocketEndpoint final : public Endpoint {
 public:
  explicit SocketEndpoint(std::unique_ptr<SocketListener> l) : listener(std::move(l)) {}
  Address address() const override { return packSocketAddress(listener->address()); }
  std::unique_ptr<SocketListener> listener;
};

bool sameHost(const PeerEnd& a, const PeerEnd& b) { return a.info.hostHash == b.info.hostHash; }

std::vector<TransportEntry> makeRegistry() {
  std::vector<TransportEntry> rows;
  rows.push_back(TransportEntry{
      "shm", "POSIX shared memory between ranks of one host", 300,
      LinkTraits{.latencyUs = 1, .stepOverheadUs = 2, .sharedMemory = true, .slotLinks = true},
      sameHost, noEndpoint,
      [](const Context& ctx, std::unique_ptr<Endpoint>) -> std::unique_ptr<Transport> {
        return std::make_unique<ShmTransport>(ctx);
      }});
#if GROVE_HAVE_LIBFABRIC
  rows.push_back(TransportEntry{
      "net", "libfabric reliable-datagram endpoints, one-sided writes (verbs, efa, tcp, ...)", 200,
      LinkTraits{.latencyUs = 10, .stepOverheadUs = 10, .sharedMemory = false},
      [](const PeerEnd& a, const PeerEnd& b) { return netCanConnect(a.address, b.address); },
      [](const OpenArgs& args) { return openNetEndpoint(args); },
      [](const Context& ctx, std::unique_ptr<Endpoint> e) {
        return makeNetTransport(ctx, std::move(e));
      }});
#endif
  rows.push_back(TransportEntry{
      "socket", "TCP, one connection per directed link", 100,
      LinkTraits{.latencyUs = 25, .stepOverheadUs = 20, .sharedMemory = false},
      [](const PeerEnd&, const PeerEnd& b) {
        return net::addressUsable(unpackSocketAddress(b.address));
      },
      [](const OpenArgs& args) -> std::unique_ptr<Endpoint> {
        return std::make_unique<SocketEndpoint>(
            SocketTransport::listen(args.timeoutSec, args.linkAddresses));
      },
      [](const Context& ctx, std::unique_ptr<Endpoint> e) -> std::unique_ptr<Transport> {
        auto* s = dynamic_cast<SocketEndpoint*>(e.get());
        if (s == nullptr) throwInternalError("socket transport made without its listener");
        return std::make_unique<SocketTransport>(ctx, std::move(s->listener));
      }});
  // Threads of one process only; never chosen unless GROVE_TRANSPORT names it.
  rows.push_back(TransportEntry{
      "loopback", "heap rings between threads of one process (tests)", 0,
      LinkTraits{.latencyUs = 1, .stepOverheadUs = 2, .sharedMemory = true},
      [](const PeerEnd& a, const PeerEnd& b) { return sameHost(a, b) && a.info.pid == b.info.pid; },
      noEndpoint,
      [](const Context& ctx, std::unique_ptr<Endpoint>) -> std::unique_ptr<Transport> {
        return std::make_unique<LoopbackTransport>(ctx);
      }});
  if (rows.size() > static_cast<size_t>(kMaxTransports))
    throwInternalError("more transports registered than PeerInfo carries addresses for");
  return rows;
}

}  // namespace

const std::vector<TransportEntry>& registry() {
  static const std::vector<TransportEntry> rows = makeRegistry();
  return rows;
}

const TransportEntry* findTransport(const std::string& name) {
  for (const TransportEntry& e : registry())
    if (strcasecmp(e.name, name.c_str()) == 0) return &e;
  return nullptr;
}

std::string transportNames() {
  std::string names;
  for (const TransportEntry& e : registry())
    names += (names.empty() ? "" : ", ") + std::string(e.name);
  return names;
}

Context contextForSlot(const Context& ctx, int slot) {
  if (slot < 0 || slot >= kMaxTransports) throwInternalError("transport slot out of range");
  Context c = ctx;
  c.addresses.assign(ctx.peers.size(), Address{});
  for (size_t r = 0; r < ctx.peers.size(); ++r) c.addresses[r] = ctx.peers[r].addresses[slot];
  return c;
}

}  // namespace grove::transport

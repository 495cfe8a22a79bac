// SocketTransport: ranks talk over TCP, one connection per directed link.
//
// How it works: before peers are known each rank opens a SocketListener on
// the interface chosen by GROVE_SOCKET_IFNAME / GROVE_SOCKET_FAMILY (port 0)
// and publishes its address (packSocketAddress) through the bootstrap as the
// socket transport's blob in PeerInfo::addresses (registry.h). The
// transport then takes the listener together with the full Context.
// For each directed link (peer, channel) the SENDER connects to the
// receiver's listener and sends a hello {magic, mac, nonce, src rank, dst
// rank, channel, route}; the mac is SipHash-2-4 of the hello under the job's
// key (its secret and id), so the secret never travels and only a holder of
// it can open a link; the receiver accepts, checks the mac, that the random
// nonce is new (a replayed hello is refused) and the destination, and routes
// the connection by (src, channel). establish() keeps the no-deadlock
// rule of transport.h: it first makes every send connection (connect + hello;
// the kernel completes connections into the peer's listen backlog, so this
// never waits for the peer to call anything), then accepts until every
// requested receive link has arrived (poll with a timeout, abort checks).
// Connections for links not asked for yet (a peer that runs ahead, or links of
// a later establish call) are stashed and handed out when they are asked for.
// The halves (socket_link.h) are non-blocking with TCP_NODELAY. The receiving
// end has a large kernel buffer (GROVE_SOCKET_RCVBUF, 4 MiB), so a sender
// rarely waits on a slow reader; the sending end a small one
// (GROVE_SOCKET_SNDBUF, 512 KiB), so one sendmsg hands the kernel at most
// about a megabyte and returns. Measured on one host with 4 ranks on 2 CPUs,
// against 4 MiB at both ends: all-reduce 1.1-1.2x faster from 2 MiB up,
// all-gather 1.05-1.15x, broadcast 1.3x from 8 MiB; 128-512 KiB up to 10-20%
// slower (broadcast, all-gather); 2 ranks unchanged. As far as we can tell,
// a sendmsg that copies megabytes at once holds its CPU while the rank
// sharing it, which forwards or reduces the bytes before, waits.
// Link addresses: when Context::routes names a local and/or remote address
// for a peer (from a topology whose links carry IP addresses), the sender
// binds the local address (port 0) and connects to the remote address on
// the port of the peer's dataAddr, so the connection crosses that link.
// Such a job listens on the wildcard address (listen(..., anyAddress)), so
// a connection arriving on any of its link addresses is accepted, and
// still publishes the chosen interface's address with the listener's port.
// Planned routes: a link whose LinkKey::route is not 0 connects over the
// addresses registered for that route with addRoute() instead (a tree edge
// the planner sent over PCIe rather than the NVLink between the two ranks);
// the route id travels in the hello, so the receiver files the connection
// under (src, channel, route).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "base/socket.h"
#include "transports/transport.h"

namespace grove::transport {

/// The socket transport's published address as a registry blob, and back
/// (an AF_UNSPEC address for a blob that is not one).
Address packSocketAddress(const sockaddr_storage& addr);
sockaddr_storage unpackSocketAddress(const Address& blob);

/// The socket transport's listening socket, opened before peers are known.
class SocketListener {
 public:
  /// Listens on `addr` (port 0: a free port). Throws Error(groveSystemError).
  explicit SocketListener(sockaddr_storage addr);
  /// Listens on `bindAddr` (e.g. the wildcard address, port 0) and publishes
  /// `published` with the bound port as address().
  SocketListener(sockaddr_storage bindAddr, sockaddr_storage published);
  /// Listens on the interface chosen by GROVE_SOCKET_IFNAME / GROVE_SOCKET_FAMILY;
  /// `anyAddress`: on the wildcard address of its family, publishing the interface's.
  static std::unique_ptr<SocketListener> open(bool anyAddress = false);
  /// The published address (packed into the rank's PeerInfo::addresses).
  const sockaddr_storage& address() const { return addr_; }
  /// The address the socket is bound to (the wildcard address, or address()).
  const sockaddr_storage& boundAddress() const { return bound_; }
  /// The listening descriptor.
  int fd() const { return fd_.get(); }

 private:
  net::Fd fd_;
  sockaddr_storage addr_{};
  sockaddr_storage bound_{};
};

/// TCP transport (name "socket"): reaches any peer with a data address.
class SocketTransport final : public Transport {
 public:
  /// Opens the data listener on the chosen interface (call before the
  /// bootstrap; publish address()). `timeoutSec` is
  /// accepted for symmetry with the other init steps and not used;
  /// `anyAddress` listens on the wildcard address (link addresses in use).
  static std::unique_ptr<SocketListener> listen(double timeoutSec = 0, bool anyAddress = false);
  /// Takes the full context (peers' addresses, routes, secret, bufferBytes,
  /// wait) and this rank's listener. Throws Error(groveInvalidArgument) if
  /// either is bad (routes: neither empty nor one per rank).
  SocketTransport(const Context& ctx, std::unique_ptr<SocketListener> listener);
  ~SocketTransport() override;

  /// "socket".
  const char* name() const override { return "socket"; }
  /// True for any rank (this one included) whose address is usable.
  bool canConnect(int peer) const override;
  /// True: links follow planned routes.
  bool routable() const override { return true; }
  /// Registers the local and remote addresses of planned route `route` to `peer`.
  void addRoute(int peer, uint32_t route, const PeerRoute& addresses) override;
  /// Connects every send link (connect + hello), then accepts until every
  /// receive link arrived. Throws groveInvalidArgument for links to peers it
  /// cannot reach or asked twice, groveRemoteError on timeout or abort.
  void establish(const std::vector<LinkKey>& sends, const std::vector<LinkKey>& recvs,
                 std::vector<std::unique_ptr<SendHalf>>& outSends,
                 std::vector<std::unique_ptr<RecvHalf>>& outRecvs) override;

  /// Connections that arrived before they were asked for (tests, logs).
  size_t stashedCount() const { return stash_.size(); }

 private:
  struct Unverified;  // an accepted connection whose hello has not all arrived
  net::Fd connectLink(const LinkKey& key);
  void acceptLinks(std::map<LinkKey, size_t>& pending,
                   std::vector<std::unique_ptr<RecvHalf>>& outRecvs);
  /// Accepts every connection waiting on the listener into unverified_.
  void acceptWaiting();
  /// Reads what arrived of c's hello; true once c is done (identified into
  /// *key, or to be dropped with *key left invalid).
  bool readHello(Unverified& c, LinkKey* key);

  Context ctx_;
  std::vector<sockaddr_storage> peerAddrs_;  // by rank, from ctx_.addresses
  std::unique_ptr<SocketListener> listener_;
  std::map<LinkKey, net::Fd> stash_;                     // keyed by (src rank, channel, route)
  std::vector<std::unique_ptr<Unverified>> unverified_;  // oldest first
  std::set<uint64_t> seenNonces_;  // of the hellos accepted: a replay is refused
  std::map<std::pair<int, uint32_t>, PeerRoute> planned_;  // (peer, route) -> addresses
  std::set<LinkKey> recvOpened_;                           // receive links already handed out
  std::set<LinkKey> sendOpened_;                           // send links already made
  size_t sendBuf_ = 0;  // SO_SNDBUF of the connections made here (GROVE_SOCKET_SNDBUF)
};

}  // namespace grove::transport

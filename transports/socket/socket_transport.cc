// Socket transport; see socket_transport.h for how it works.
#include "transports/socket/socket_transport.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "base/config.h"
#include "base/entropy.h"
#include "base/error.h"
#include "base/log.h"
#include "base/siphash.h"
#include "transports/socket/socket_link.h"

namespace grove::transport {
namespace {

// The socket transport's settings (grove-info lists them with the library's).
const config::VarTable kSocketSettings{
    {"GROVE_SOCKET_SNDBUF", config::Type::kSize, "512K",
     "SO_SNDBUF of socket-transport connections (the kernel doubles it); 0 = autotuning", nullptr,
     0, 1024.0 * 1024 * 1024},
    {"GROVE_SOCKET_RCVBUF", config::Type::kSize, "4M",
     "SO_RCVBUF of socket-transport connections (the kernel doubles it); 0 = autotuning", nullptr,
     0, 1024.0 * 1024 * 1024},
};

/// First bytes on every link connection.
struct LinkHello {
  uint64_t magic = 0;
  uint64_t mac = 0;    ///< helloMac(this hello, the job's key)
  uint64_t nonce = 0;  ///< random per connection: no two hellos alike
  int32_t src = -1;
  int32_t dst = -1;
  int32_t channel = -1;
  uint32_t version = 0;
  uint32_t route = 0;  ///< LinkKey::route
  uint32_t reserved = 0;
};
constexpr uint64_t kLinkMagic = 0x47524f56534f434bull;  // "GROVSOCK"
constexpr uint32_t kLinkVersion = 3;
constexpr double kHelloWaitSec = 5.0;  // an accepted connection must say hello within this
// Accepted connections still saying hello at once; beyond it the oldest goes.
constexpr size_t kMaxUnverified = 64;

std::string linkText(const LinkKey& k) {
  return "rank " + std::to_string(k.peer) + " channel " + std::to_string(k.channel) +
         (k.route ? " route " + std::to_string(k.route) : "");
}

// The job's key: its secret and a hash of its id (both ends know both).
SipKey jobKey(const Context& ctx) {
  return SipKey{ctx.secret, fnv1a64(ctx.jobId.data(), ctx.jobId.size())};
}

// SipHash of the hello with its mac field zero: proves the sender holds the
// job's secret without sending it.
uint64_t helloMac(const LinkHello& hello, const SipKey& key) {
  LinkHello h = hello;
  h.mac = 0;
  return sipHash24(key, &h, sizeof(h));
}

uint64_t randomNonce() { return randomU64(); }

bool given(const sockaddr_storage& a) { return a.ss_family == AF_INET || a.ss_family == AF_INET6; }

// net::connectUntil with the socket bound to `local` (port 0) first: the
// same retries while the peer refuses or is unreachable, until the deadline.
net::Fd connectFrom(const sockaddr_storage& local, const sockaddr_storage& addr,
                    const net::Deadline& deadline, const net::AbortView& abort) {
  int delayMs = 10;
  for (;;) {
    abort.check();
    net::Fd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) throwSystemError("socket", errno);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&local), net::addressLength(local)) != 0)
      throwSystemError("bind to the link address " + net::formatHost(local), errno);
    int err = 0;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), net::addressLength(addr)) !=
        0)
      err = errno;
    while (err == EINPROGRESS || err == EINTR) {
      abort.check();
      pollfd p{fd.get(), POLLOUT, 0};
      if (::poll(&p, 1, deadline.pollMs(100)) > 0) {
        socklen_t len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      } else if (deadline.expired()) {
        err = ETIMEDOUT;
      }
    }
    if (err == 0) {
      net::setNonBlocking(fd.get(), false);
      return fd;
    }
    const bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH ||
                       err == EHOSTUNREACH || err == ECONNRESET || err == EAGAIN ||
                       err == ECONNABORTED || err == EADDRNOTAVAIL;
    if (!retry) throwSystemError("connect to " + net::formatAddress(addr), err);
    if (deadline.expired())
      throwRemoteError("could not connect to " + net::formatAddress(addr) + " from " +
                       net::formatHost(local) + " before the timeout (" + std::strerror(err) +
                       "; is the peer running? GROVE_TIMEOUT)");
    fd.reset();
    const int nap = deadline.pollMs(delayMs);
    if (nap > 0) ::poll(nullptr, 0, nap);
    delayMs = delayMs < 200 ? delayMs * 2 : 200;
  }
}

}  // namespace

Address packSocketAddress(const sockaddr_storage& addr) {
  Address blob;
  static_assert(sizeof(addr) <= Address::kMaxBytes, "a sockaddr fits a transport address");
  blob.size = sizeof(addr);
  std::memcpy(blob.bytes, &addr, sizeof(addr));
  return blob;
}

sockaddr_storage unpackSocketAddress(const Address& blob) {
  sockaddr_storage addr{};
  if (blob.size == sizeof(addr)) std::memcpy(&addr, blob.bytes, sizeof(addr));
  return addr;
}

// ------------------------------------------------------------------ listener

SocketListener::SocketListener(sockaddr_storage addr) : addr_(addr) {
  fd_ = net::listenOn(addr_);
  bound_ = addr_;
  net::setNonBlocking(fd_.get());
  // Accepted connections (the receiving ends) inherit the listener's receive
  // buffer, and with it the window scale announced in the handshake.
  net::setBufferSizes(fd_.get(), 0, config::getSize("GROVE_SOCKET_RCVBUF"));
}

SocketListener::SocketListener(sockaddr_storage bindAddr, sockaddr_storage published)
    : SocketListener(bindAddr) {
  addr_ = published;
  net::setAddressPort(addr_, net::addressPort(bound_));
}

std::unique_ptr<SocketListener> SocketListener::open(bool anyAddress) {
  sockaddr_storage addr = net::pickInterface().addr;
  net::setAddressPort(addr, 0);
  std::unique_ptr<SocketListener> l;
  if (anyAddress) {
    sockaddr_storage any{};  // all zero: 0.0.0.0 / ::
    any.ss_family = addr.ss_family;
    l = std::make_unique<SocketListener>(any, addr);
  } else {
    l = std::make_unique<SocketListener>(addr);
  }
  GROVE_INFO(log::kNet, "socket transport listening on %s%s%s",
             net::formatAddress(l->boundAddress()).c_str(), anyAddress ? ", published as " : "",
             anyAddress ? net::formatAddress(l->address()).c_str() : "");
  return l;
}

// ------------------------------------------------------------------ transport

std::unique_ptr<SocketListener> SocketTransport::listen(double /*timeoutSec*/, bool anyAddress) {
  return SocketListener::open(anyAddress);
}

SocketTransport::SocketTransport(const Context& ctx, std::unique_ptr<SocketListener> listener)
    : ctx_(ctx), listener_(std::move(listener)) {
  if (!listener_) throwInvalidArgument("socket transport: no listener");
  if (ctx_.nranks < 1 || ctx_.rank < 0 || ctx_.rank >= ctx_.nranks ||
      ctx_.peers.size() != static_cast<size_t>(ctx_.nranks))
    throwInvalidArgument("socket transport: inconsistent context (rank " +
                         std::to_string(ctx_.rank) + ", nranks " + std::to_string(ctx_.nranks) +
                         ", " + std::to_string(ctx_.peers.size()) + " peers)");
  if (ctx_.bufferBytes == 0) throwInvalidArgument("socket transport: bufferBytes is 0");
  if (!ctx_.routes.empty() && ctx_.routes.size() != static_cast<size_t>(ctx_.nranks))
    throwInvalidArgument("socket transport: " + std::to_string(ctx_.routes.size()) +
                         " peer routes for " + std::to_string(ctx_.nranks) + " ranks");
  if (ctx_.addresses.size() != static_cast<size_t>(ctx_.nranks))
    throwInvalidArgument("socket transport: " + std::to_string(ctx_.addresses.size()) +
                         " peer addresses for " + std::to_string(ctx_.nranks) + " ranks");
  for (const Address& a : ctx_.addresses) peerAddrs_.push_back(unpackSocketAddress(a));
  sendBuf_ = config::getSize("GROVE_SOCKET_SNDBUF");
}

SocketTransport::~SocketTransport() = default;

void SocketTransport::addRoute(int peer, uint32_t route, const PeerRoute& addresses) {
  if (peer < 0 || peer >= ctx_.nranks || route == 0)
    throwInvalidArgument("socket transport: bad planned route " + std::to_string(route) +
                         " to rank " + std::to_string(peer));
  planned_[{peer, route}] = addresses;
}

bool SocketTransport::canConnect(int peer) const {
  return peer >= 0 && peer < ctx_.nranks && net::addressUsable(peerAddrs_[peer]);
}

void SocketTransport::establish(const std::vector<LinkKey>& sends,
                                const std::vector<LinkKey>& recvs,
                                std::vector<std::unique_ptr<SendHalf>>& outSends,
                                std::vector<std::unique_ptr<RecvHalf>>& outRecvs) {
  std::set<LinkKey> seenSend, seenRecv;
  for (const LinkKey& k : sends)
    if (!canConnect(k.peer) || sendOpened_.count(k) || !seenSend.insert(k).second)
      throwInvalidArgument("socket transport: cannot open send link to " + linkText(k) +
                           " (unreachable or opened twice)");
  for (const LinkKey& k : recvs)
    if (!canConnect(k.peer) || recvOpened_.count(k) || !seenRecv.insert(k).second)
      throwInvalidArgument("socket transport: cannot open receive link from " + linkText(k) +
                           " (unreachable or opened twice)");
  // 1. Every send: connect + hello. Never waits for the peer to call anything.
  std::vector<std::unique_ptr<SendHalf>> sendHalves(sends.size());
  for (size_t i = 0; i < sends.size(); ++i) {
    net::Fd fd = connectLink(sends[i]);
    sendHalves[i] = std::make_unique<SocketSendHalf>(std::move(fd), ctx_.bufferBytes, sends[i].peer,
                                                     sends[i].channel);
    sendOpened_.insert(sends[i]);
  }
  // 2. Every receive: from the stash, else accept until it arrives.
  std::vector<std::unique_ptr<RecvHalf>> recvHalves(recvs.size());
  std::map<LinkKey, size_t> pending;
  for (size_t i = 0; i < recvs.size(); ++i) {
    auto it = stash_.find(recvs[i]);
    if (it == stash_.end()) {
      pending[recvs[i]] = i;
      continue;
    }
    recvHalves[i] = std::make_unique<SocketRecvHalf>(std::move(it->second), ctx_.bufferBytes,
                                                     recvs[i].peer, recvs[i].channel);
    recvOpened_.insert(recvs[i]);
    stash_.erase(it);
  }
  acceptLinks(pending, recvHalves);
  outSends = std::move(sendHalves);
  outRecvs = std::move(recvHalves);
  GROVE_TRACE(log::kNet, "rank %d: socket links open: %zu send, %zu receive, %zu stashed",
              ctx_.rank, sends.size(), recvs.size(), stash_.size());
}

net::Fd SocketTransport::connectLink(const LinkKey& key) {
  net::AbortView av{ctx_.wait.abortFlag, ctx_.wait.abortReason};
  net::Deadline deadline = net::Deadline::in(ctx_.wait.timeoutSec);
  sockaddr_storage addr = peerAddrs_[key.peer];
  const PeerRoute* route = ctx_.routes.empty() ? nullptr : &ctx_.routes[key.peer];
  if (key.route != 0) {
    auto it = planned_.find({key.peer, key.route});
    if (it == planned_.end())
      throwInternalError("socket transport: no addresses for " + linkText(key));
    route = &it->second;
  }
  if (route && given(route->remote)) {  // the link's address, on the peer's listening port
    const int port = net::addressPort(addr);
    addr = route->remote;
    net::setAddressPort(addr, port);
  }
  net::Fd fd;
  try {
    fd = route && given(route->local) ? connectFrom(route->local, addr, deadline, av)
                                      : net::connectUntil(addr, deadline, av);
  } catch (const Error& e) {
    throw Error(e.code(), "socket transport: rank " + std::to_string(ctx_.rank) +
                              " cannot connect to " + linkText(key) + " at " +
                              net::formatAddress(addr) + ": " + e.what());
  }
  net::setNoDelay(fd.get());
  net::setBufferSizes(fd.get(), sendBuf_, 0);  // the sending end: only ACKs come back
  if (log::enabled(log::Level::kTrace, log::kNet)) {
    sockaddr_storage me{};
    socklen_t len = sizeof(me);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&me), &len);
    GROVE_TRACE(log::kNet, "rank %d: connected to %s from %s to %s", ctx_.rank,
                linkText(key).c_str(), net::formatAddress(me).c_str(),
                net::formatAddress(addr).c_str());
  }
  LinkHello h;
  h.magic = kLinkMagic;
  h.nonce = randomNonce();
  h.src = ctx_.rank;
  h.dst = key.peer;
  h.channel = key.channel;
  h.version = kLinkVersion;
  h.route = key.route;
  h.mac = helloMac(h, jobKey(ctx_));
  if (net::sendAll(fd.get(), &h, sizeof(h), deadline, av) != net::IoResult::kOk)
    throwRemoteError("socket transport: rank " + std::to_string(ctx_.rank) +
                     " could not send its hello to " + linkText(key) + " at " +
                     net::formatAddress(addr));
  return fd;
}

// How receive links arrive: the listener is polled together with every
// connection accepted but not yet identified, and each of those is read as
// its bytes come (non-blocking), so a stranger that connects and says
// nothing, or says it slowly, never holds up a peer's real connection. A
// connection must complete a valid hello (magic, version, a mac made with
// this job's secret and a nonce not seen before, addressed to this rank)
// within kHelloWaitSec, or it is dropped; at most
// kMaxUnverified wait at once (a flood drops the oldest). Nothing is
// allocated for a connection before its hello checks out.
struct SocketTransport::Unverified {
  net::Fd fd;
  LinkHello hello;
  size_t got = 0;  // bytes of hello received
  net::Deadline deadline;
  sockaddr_storage from{};
};

void SocketTransport::acceptWaiting() {
  for (;;) {
    sockaddr_storage from{};
    socklen_t len = sizeof(from);
    int fd = ::accept4(listener_->fd(), reinterpret_cast<sockaddr*>(&from), &len,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      throwSystemError("socket transport: accept", errno);
    }
    auto c = std::make_unique<Unverified>();
    c->fd = net::Fd(fd);
    c->deadline = net::Deadline::in(kHelloWaitSec);
    c->from = from;
    if (unverified_.size() >= kMaxUnverified) {
      GROVE_WARN(log::kNet,
                 "rank %d: %zu connections are still to say hello; dropping the "
                 "oldest, from %s",
                 ctx_.rank, unverified_.size(),
                 net::formatAddress(unverified_.front()->from).c_str());
      unverified_.erase(unverified_.begin());
    }
    unverified_.push_back(std::move(c));
  }
}

bool SocketTransport::readHello(Unverified& c, LinkKey* key) {
  *key = LinkKey{};
  auto* bytes = reinterpret_cast<uint8_t*>(&c.hello);
  while (c.got < sizeof(c.hello)) {
    ssize_t n = ::recv(c.fd.get(), bytes + c.got, sizeof(c.hello) - c.got, 0);
    if (n > 0) {
      c.got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!c.deadline.expired()) return false;  // more to come
      GROVE_WARN(log::kNet, "rank %d: dropping a socket connection from %s: no hello within %g s",
                 ctx_.rank, net::formatAddress(c.from).c_str(), kHelloWaitSec);
      return true;
    }
    GROVE_WARN(log::kNet, "rank %d: dropping a socket connection from %s: closed before its hello",
               ctx_.rank, net::formatAddress(c.from).c_str());
    return true;
  }
  const LinkHello& h = c.hello;
  if (h.magic != kLinkMagic || h.version != kLinkVersion) {
    GROVE_WARN(log::kNet, "rank %d: dropping a socket connection from %s: no valid hello",
               ctx_.rank, net::formatAddress(c.from).c_str());
    return true;
  }
  const bool authentic = h.mac == helloMac(h, jobKey(ctx_));
  const bool replayed = authentic && !seenNonces_.insert(h.nonce).second;
  if (!authentic || replayed || h.dst != ctx_.rank || h.src < 0 || h.src >= ctx_.nranks) {
    GROVE_WARN(log::kNet, "rank %d: refusing a socket connection from %s (claims rank %d): %s",
               ctx_.rank, net::formatAddress(c.from).c_str(), h.src,
               !authentic ? "wrong secret (its hello's mac does not check out)"
               : replayed ? "a replayed hello"
                          : "not addressed to this rank");
    return true;
  }
  *key = LinkKey{h.src, h.channel, h.route};
  return true;
}

void SocketTransport::acceptLinks(std::map<LinkKey, size_t>& pending,
                                  std::vector<std::unique_ptr<RecvHalf>>& outRecvs) {
  using Clock = std::chrono::steady_clock;
  net::AbortView av{ctx_.wait.abortFlag, ctx_.wait.abortReason};
  const double timeout = ctx_.wait.timeoutSec;
  auto lastProgress = Clock::now();
  std::vector<pollfd> fds;
  while (!pending.empty()) {
    av.check();
    double idle = std::chrono::duration<double>(Clock::now() - lastProgress).count();
    if (timeout > 0 && idle >= timeout) {
      std::string missing;
      for (auto& [k, i] : pending) missing += (missing.empty() ? "" : ", ") + linkText(k);
      throwRemoteError("socket transport: rank " + std::to_string(ctx_.rank) + " timed out after " +
                       std::to_string(static_cast<int>(idle)) + " s waiting for connections from " +
                       missing + " (GROVE_TIMEOUT)");
    }
    // A peer known to be in another call will never connect (base/wait.h).
    if (ctx_.wait.probe != nullptr && idle > 0.002) ctx_.wait.probe->probe();
    // Wait for a new connection or more hello bytes; wake every 20 ms for
    // aborts and hello deadlines.
    fds.assign(1, pollfd{listener_->fd(), POLLIN, 0});
    for (const auto& c : unverified_) fds.push_back(pollfd{c->fd.get(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), 20);
    if (rc < 0 && errno != EINTR) throwSystemError("socket transport: poll", errno);
    acceptWaiting();
    for (size_t i = 0; i < unverified_.size();) {
      LinkKey key;
      if (!readHello(*unverified_[i], &key)) {
        ++i;
        continue;
      }
      net::Fd fd = std::move(unverified_[i]->fd);
      unverified_.erase(unverified_.begin() + static_cast<ptrdiff_t>(i));
      if (key.peer < 0) continue;  // dropped
      lastProgress = Clock::now();
      auto it = pending.find(key);
      if (it != pending.end()) {
        outRecvs[it->second] = std::make_unique<SocketRecvHalf>(std::move(fd), ctx_.bufferBytes,
                                                                key.peer, key.channel);
        recvOpened_.insert(key);
        pending.erase(it);
      } else if (recvOpened_.count(key) || stash_.count(key)) {
        GROVE_WARN(log::kNet, "rank %d: dropping a duplicate socket connection from %s", ctx_.rank,
                   linkText(key).c_str());
      } else {
        stash_[key] = std::move(fd);  // a peer ran ahead: kept until asked for
      }
    }
  }
}

}  // namespace grove::transport

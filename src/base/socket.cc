// Socket utilities; see socket.h for how they work.
#include "base/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"

namespace grove::net {
namespace {

constexpr int kSliceMs = 100;  // longest single poll(): bounds abort-check latency

std::string toLower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool isLinkLocal6(const sockaddr_storage& a) {
  if (a.ss_family != AF_INET6) return false;
  const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&a);
  return IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr);
}

}  // namespace

// ------------------------------------------------------------------ Fd, Deadline

void Fd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);
  fd_ = fd;
}

Deadline Deadline::in(double seconds) {
  Deadline d;
  if (seconds > 0 && seconds < 1e9) {
    d.infinite_ = false;
    d.at_ = Clock::now() +
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  return d;
}

bool Deadline::expired() const { return !infinite_ && Clock::now() >= at_; }

double Deadline::remainingSec() const {
  if (infinite_) return 1e18;
  double left = std::chrono::duration<double>(at_ - Clock::now()).count();
  return left > 0 ? left : 0;
}

int Deadline::pollMs(int capMs) const {
  if (infinite_) return capMs;
  double ms = remainingSec() * 1000.0;
  int m = static_cast<int>(ms + 0.999);
  if (capMs >= 0 && m > capMs) m = capMs;
  return m;
}

void AbortView::check() const {
  if (raised()) throw Error(groveRemoteError, reason != nullptr ? *reason : "communicator aborted");
}

// ------------------------------------------------------------------ addresses

HostPort parseHostPort(const std::string& text) {
  HostPort hp;
  std::string portText;
  if (text.empty()) throwInvalidArgument("empty address");
  if (text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) throwInvalidArgument("bad address '" + text + "': missing ]");
    hp.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throwInvalidArgument("bad address '" + text + "'");
      portText = text.substr(close + 2);
      if (portText.empty()) throwInvalidArgument("bad address '" + text + "': empty port");
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') != colon) {
      hp.host = text;  // bare IPv6 address without brackets: no port
    } else if (colon != std::string::npos) {
      hp.host = text.substr(0, colon);
      portText = text.substr(colon + 1);
      if (portText.empty()) throwInvalidArgument("bad address '" + text + "': empty port");
    } else {
      hp.host = text;
    }
  }
  if (hp.host.empty()) throwInvalidArgument("bad address '" + text + "': empty host");
  if (!portText.empty()) {
    char* end = nullptr;
    long p = std::strtol(portText.c_str(), &end, 10);
    if (*end != '\0' || p < 0 || p > 65535)
      throwInvalidArgument("bad port '" + portText + "' in address '" + text + "'");
    hp.port = static_cast<int>(p);
  }
  return hp;
}

sockaddr_storage resolveAddress(const std::string& text, int defaultPort) {
  HostPort hp = parseHostPort(text);
  int port = hp.port >= 0 ? hp.port : defaultPort;
  if (port < 0) throwInvalidArgument("address '" + text + "' has no port");
  addrinfo hints{};
  hints.ai_family = configuredFamily();
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(hp.host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    throwInvalidArgument("cannot resolve '" + hp.host + "': " + gai_strerror(rc));
  sockaddr_storage out{};
  // Prefer IPv4 when the family is not forced (matches the interface default).
  const addrinfo* pick = res;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  std::memcpy(&out, pick->ai_addr, pick->ai_addrlen);
  freeaddrinfo(res);
  setAddressPort(out, port);
  return out;
}

std::string formatHost(const sockaddr_storage& addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, buf, sizeof(buf));
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof(buf));
  } else {
    return "<none>";
  }
  return buf;
}

std::string formatAddress(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return formatHost(addr) + ":" + std::to_string(addressPort(addr));
  if (addr.ss_family == AF_INET6)
    return "[" + formatHost(addr) + "]:" + std::to_string(addressPort(addr));
  return "<none>";
}

socklen_t addressLength(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return sizeof(sockaddr_in);
  if (addr.ss_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

int addressPort(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

void setAddressPort(sockaddr_storage& addr, int port) {
  if (addr.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&addr)->sin_port = htons(static_cast<uint16_t>(port));
  else if (addr.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = htons(static_cast<uint16_t>(port));
}

bool addressUsable(const sockaddr_storage& addr) {
  return (addr.ss_family == AF_INET || addr.ss_family == AF_INET6) && addressPort(addr) != 0;
}

bool addressIsAny(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (addr.ss_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr);
  return false;
}

// ------------------------------------------------------------------ interfaces

int configuredFamily() {
  std::string f = toLower(config::getString("GROVE_SOCKET_FAMILY"));
  if (f.empty()) return AF_UNSPEC;
  if (f == "af_inet" || f == "inet" || f == "ipv4" || f == "4") return AF_INET;
  if (f == "af_inet6" || f == "inet6" || f == "ipv6" || f == "6") return AF_INET6;
  throwInvalidArgument("GROVE_SOCKET_FAMILY=" + f + " is not AF_INET or AF_INET6");
}

bool ifnameMatches(const std::string& specIn, const std::string& name) {
  std::string spec = specIn;
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  bool hit = false;
  size_t pos = 0;
  while (pos <= spec.size() && !hit) {
    size_t comma = spec.find(',', pos);
    std::string item =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t colon = item.find(':');  // NCCL allows "eth0:port"; the port is ignored here
    if (colon != std::string::npos) item.resize(colon);
    if (!item.empty()) hit = exact ? name == item : name.compare(0, item.size(), item) == 0;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return hit != exclude;
}

std::vector<Interface> listInterfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throwSystemError("getifaddrs", errno);
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    Interface itf;
    itf.name = i->ifa_name;
    std::memcpy(&itf.addr, i->ifa_addr,
                fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    if (isLinkLocal6(itf.addr)) continue;  // needs a scope id; NCCL skips these too
    out.push_back(itf);
  }
  freeifaddrs(list);
  return out;
}

std::vector<Interface> selectInterfaces(const std::vector<Interface>& all, const std::string& spec,
                                        int family) {
  auto pass = [&](const std::string& s) {
    std::vector<Interface> hits;
    for (const Interface& itf : all) {
      if (family != AF_UNSPEC && itf.addr.ss_family != family) continue;
      if (!ifnameMatches(s, itf.name)) continue;
      bool merged = false;
      for (Interface& h : hits) {
        if (h.name != itf.name) continue;
        merged = true;
        if (h.addr.ss_family == AF_INET6 && itf.addr.ss_family == AF_INET) h = itf;  // IPv4 first
      }
      if (!merged) hits.push_back(itf);
    }
    return hits;
  };
  if (!spec.empty()) return pass(spec);
  for (const char* s : {"ib", "^docker,lo,virbr", "docker", "virbr", "lo"}) {
    auto hits = pass(s);
    if (!hits.empty()) return hits;
  }
  return {};
}

Interface pickInterface() {
  std::string spec = config::getString("GROVE_SOCKET_IFNAME");
  int family = configuredFamily();
  auto hits = selectInterfaces(listInterfaces(), spec, family);
  if (hits.empty())
    throw Error(groveSystemError, "no network interface matches GROVE_SOCKET_IFNAME='" + spec +
                                      "'" +
                                      (family != AF_UNSPEC ? " and GROVE_SOCKET_FAMILY" : ""));
  GROVE_INFO(log::kNet, "using interface %s %s", hits[0].name.c_str(),
             formatHost(hits[0].addr).c_str());
  return hits[0];
}

// ------------------------------------------------------------------ options

void setNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) throwSystemError("fcntl(F_GETFL)", errno);
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) < 0) throwSystemError("fcntl(F_SETFL)", errno);
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void setBufferSizes(int fd, size_t sendBytes, size_t recvBytes) {
  auto set = [fd](int option, size_t bytes) {
    if (bytes == 0) return;
    int v = bytes > (1u << 30) ? (1 << 30) : static_cast<int>(bytes);
    setsockopt(fd, SOL_SOCKET, option, &v, sizeof(v));
  };
  set(SO_SNDBUF, sendBytes);
  set(SO_RCVBUF, recvBytes);
}

void setKeepAlive(int fd) {
  int one = 1, idle = 10, intvl = 5, cnt = 4;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

// ------------------------------------------------------------------ listen / accept / connect

Fd listenOn(sockaddr_storage& addr, int backlog) {
  Fd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throwSystemError("socket", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), addressLength(addr)) != 0)
    throwSystemError("bind to " + formatAddress(addr), errno);
  if (::listen(fd.get(), backlog) != 0) throwSystemError("listen on " + formatAddress(addr), errno);
  socklen_t len = sizeof(addr);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throwSystemError("getsockname", errno);
  return fd;
}

Fd acceptUntil(int listenFd, const Deadline& deadline, const AbortView& abort,
               sockaddr_storage* peer) {
  for (;;) {
    abort.check();
    pollfd p{listenFd, POLLIN, 0};
    int rc = ::poll(&p, 1, deadline.pollMs(kSliceMs));
    if (rc < 0 && errno != EINTR) throwSystemError("poll(accept)", errno);
    if (rc > 0) {
      sockaddr_storage tmp{};
      socklen_t len = sizeof(tmp);
      int fd = ::accept4(listenFd, reinterpret_cast<sockaddr*>(&tmp), &len, SOCK_CLOEXEC);
      if (fd >= 0) {
        if (peer != nullptr) *peer = tmp;
        return Fd(fd);
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
        throwSystemError("accept", errno);
    }
    if (deadline.expired()) return Fd();
  }
}

Fd connectUntil(const sockaddr_storage& addr, const Deadline& deadline, const AbortView& abort) {
  int delayMs = 10;
  for (;;) {
    abort.check();
    Fd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) throwSystemError("socket", errno);
    int err = 0;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), addressLength(addr)) != 0) {
      err = errno;
      while (err == EINPROGRESS || err == EINTR) {
        abort.check();
        pollfd p{fd.get(), POLLOUT, 0};
        int rc = ::poll(&p, 1, deadline.pollMs(kSliceMs));
        if (rc > 0) {
          socklen_t len = sizeof(err);
          getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        } else if (deadline.expired()) {
          err = ETIMEDOUT;
        }
      }
    }
    if (err == 0) {
      setNonBlocking(fd.get(), false);
      return fd;
    }
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH ||
                 err == EHOSTUNREACH || err == ECONNRESET || err == EAGAIN || err == ECONNABORTED;
    if (!retry) throwSystemError("connect to " + formatAddress(addr), err);
    if (deadline.expired())
      throwRemoteError("could not connect to " + formatAddress(addr) + " before the timeout (" +
                       std::strerror(err) + "; is the peer running? GROVE_TIMEOUT)");
    fd.reset();
    int nap = deadline.pollMs(delayMs);
    if (nap > 0) ::poll(nullptr, 0, nap);
    delayMs = delayMs < 200 ? delayMs * 2 : 200;
  }
}

// ------------------------------------------------------------------ transfers

IoResult sendAll(int fd, const void* data, size_t bytes, const Deadline& deadline,
                 const AbortView& abort) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return IoResult::kClosed;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      throwSystemError("send", errno);
    abort.check();
    if (deadline.expired()) return IoResult::kTimeout;
    pollfd pf{fd, POLLOUT, 0};
    ::poll(&pf, 1, deadline.pollMs(abort.flag != nullptr ? kSliceMs : -1));
  }
  return IoResult::kOk;
}

IoResult recvAll(int fd, void* data, size_t bytes, const Deadline& deadline,
                 const AbortView& abort) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return IoResult::kClosed;
    if (errno == ECONNRESET || errno == ENOTCONN || errno == EPIPE) return IoResult::kClosed;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) throwSystemError("recv", errno);
    abort.check();
    if (deadline.expired()) return IoResult::kTimeout;
    pollfd pf{fd, POLLIN, 0};
    ::poll(&pf, 1, deadline.pollMs(abort.flag != nullptr ? kSliceMs : -1));
  }
  return IoResult::kOk;
}

}  // namespace grove::net

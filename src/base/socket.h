// Small RAII socket utilities shared by the bootstrap and the socket transport.
//
// How it works:
//  - Fd owns one file descriptor and closes it when it goes away.
//  - Addresses are sockaddr_storage values; parseHostPort/resolveAddress turn
//    "host:port", "1.2.3.4:5" and "[::1]:5" into one, formatAddress turns one
//    back into text.
//  - Interfaces are chosen the way NCCL does it (GROVE_SOCKET_IFNAME with a
//    comma list of name prefixes, a leading '^' to exclude, a leading '=' for
//    exact names; by default InfiniBand IPoIB first, then anything but docker,
//    lo and virbr, then docker/virbr, then lo), restricted to
//    GROVE_SOCKET_FAMILY when that is set.
//  - Every blocking helper (accept, connect, send-all, recv-all) waits in
//    poll() with a bounded slice, so it never burns a core, honours a
//    deadline, and watches an abort flag between slices. Connect retries
//    while the peer refuses (it may not be listening yet) until the deadline.
//  - Every send uses MSG_NOSIGNAL so a closed peer is an error, not SIGPIPE.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace grove::net {

/// Owner of one file descriptor (closed on destruction; move-only).
class Fd {
 public:
  Fd() = default;
  /// Takes ownership of `fd` (may be -1).
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  /// The descriptor (-1 if none).
  int get() const { return fd_; }
  /// True when a descriptor is owned.
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  /// Gives up ownership and returns the descriptor.
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  /// Closes the owned descriptor (if any) and takes `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// A point in time after which a wait fails.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  /// A deadline `seconds` from now (<= 0 or infinite: never).
  static Deadline in(double seconds);
  /// A deadline that never passes.
  static Deadline never() { return Deadline(); }
  /// True once the deadline has passed.
  bool expired() const;
  /// Milliseconds to wait in poll(): min(remaining, cap), -1 = forever if cap < 0 and no deadline.
  int pollMs(int capMs) const;
  /// Seconds left (a large number when there is no deadline).
  double remainingSec() const;

 private:
  bool infinite_ = true;
  Clock::time_point at_{};
};

/// What a blocking helper watches besides its deadline: a raised flag makes
/// it throw Error(groveRemoteError, *reason).
struct AbortView {
  const std::atomic<bool>* flag = nullptr;  ///< may be null: nothing to watch
  const std::string* reason = nullptr;      ///< read only when flag is true
  /// Throws Error(groveRemoteError) if the flag is raised.
  void check() const;
  /// True when the flag is raised.
  bool raised() const { return flag != nullptr && flag->load(std::memory_order_acquire); }
};

/// "host" and "port" parts of "host:port", "[v6]:port" or "host".
struct HostPort {
  std::string host;  ///< without brackets
  int port = -1;     ///< -1 when the text had no port
};

/// Splits "host:port", "[v6addr]:port", a bare v6 address or a bare host;
/// throws Error(groveInvalidArgument) on malformed text or a port out of range.
HostPort parseHostPort(const std::string& text);

/// Resolves "host:port" (names via getaddrinfo, honouring GROVE_SOCKET_FAMILY);
/// `defaultPort` is used when the text has none. Throws Error(groveInvalidArgument).
sockaddr_storage resolveAddress(const std::string& text, int defaultPort = -1);

/// "1.2.3.4:5", "[::1]:5" (or "<none>" for an empty address).
std::string formatAddress(const sockaddr_storage& addr);
/// The address part only ("1.2.3.4", "::1").
std::string formatHost(const sockaddr_storage& addr);
/// sizeof the family's sockaddr (0 for an unknown family).
socklen_t addressLength(const sockaddr_storage& addr);
/// Port in host byte order (0 for an unknown family).
int addressPort(const sockaddr_storage& addr);
/// Sets the port (host byte order).
void setAddressPort(sockaddr_storage& addr, int port);
/// True for an AF_INET/AF_INET6 address with a non-zero port.
bool addressUsable(const sockaddr_storage& addr);
/// True if the address is 0.0.0.0 or ::.
bool addressIsAny(const sockaddr_storage& addr);

/// One network interface address.
struct Interface {
  std::string name;         ///< e.g. "eth0"
  sockaddr_storage addr{};  ///< its address (port 0)
};

/// AF_INET, AF_INET6, or AF_UNSPEC from GROVE_SOCKET_FAMILY (throws on bad text).
int configuredFamily();
/// True if interface `name` passes an NCCL-style spec ("eth,ib", "^docker", "=eth0").
bool ifnameMatches(const std::string& spec, const std::string& name);
/// Every up interface with an IPv4 or IPv6 (non link-local) address, in system order.
std::vector<Interface> listInterfaces();
/// Filters `all` by `spec` (empty: NCCL's default preference order) and
/// `family` (AF_UNSPEC: any, IPv4 first per interface name). One entry per name.
std::vector<Interface> selectInterfaces(const std::vector<Interface>& all, const std::string& spec,
                                        int family);
/// The first interface chosen by GROVE_SOCKET_IFNAME / GROVE_SOCKET_FAMILY;
/// throws Error(groveSystemError) naming the spec when none matches.
Interface pickInterface();

/// Makes fd non-blocking (or blocking); throws on failure.
void setNonBlocking(int fd, bool on = true);
/// Sets TCP_NODELAY (ignored for non-TCP sockets).
void setNoDelay(int fd);
/// Sets SO_SNDBUF to `sendBytes` and SO_RCVBUF to `recvBytes` (0 leaves that
/// one to the kernel's autotuning).
void setBufferSizes(int fd, size_t sendBytes, size_t recvBytes);
/// Turns on TCP keep-alive probes so a vanished host is noticed in ~30 s.
void setKeepAlive(int fd);

/// Listens on `addr`; a port of 0 picks a free one. On return `addr` holds the
/// bound address (with the port). SO_REUSEADDR is set. Throws Error(groveSystemError).
Fd listenOn(sockaddr_storage& addr, int backlog = 1024);
/// Waits for a connection until the deadline; returns an invalid Fd on timeout.
/// Throws Error(groveRemoteError) if `abort` is raised, groveSystemError on failure.
Fd acceptUntil(int listenFd, const Deadline& deadline, const AbortView& abort = {},
               sockaddr_storage* peer = nullptr);
/// Connects to `addr`, retrying while refused/unreachable (the peer may not
/// listen yet) until the deadline; throws Error(groveRemoteError) on timeout
/// or abort. The returned socket is blocking.
Fd connectUntil(const sockaddr_storage& addr, const Deadline& deadline,
                const AbortView& abort = {});

/// Outcome of a blocking transfer.
enum class IoResult { kOk, kClosed, kTimeout };
/// Sends all bytes (poll-based). kClosed if the peer reset/closed; kTimeout at the deadline.
/// Throws Error(groveRemoteError) on abort, groveSystemError on other errors.
IoResult sendAll(int fd, const void* data, size_t bytes, const Deadline& deadline,
                 const AbortView& abort = {});
/// Receives exactly `bytes` bytes. kClosed on EOF/reset (even part way).
IoResult recvAll(int fd, void* data, size_t bytes, const Deadline& deadline,
                 const AbortView& abort = {});

}  // namespace grove::net

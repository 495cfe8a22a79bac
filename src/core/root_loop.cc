// The bootstrap root's event loop: one poll() over the listener and every
// connection; non-blocking reads and queued writes, the hello deadline, and
// a rank's closed connection as its death. See bootstrap_root.h.
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap.h"
#include "core/root_loop.h"

namespace grove::core {

void RootLoop::run() {
  try {
    loop();
  } catch (const std::exception& e) {
    GROVE_WARN(log::kBoot, "bootstrap root %s failed: %s",
               net::formatAddress(server_->address()).c_str(), e.what());
  }
  conns_.clear();
  listener_.reset();
  {
    std::lock_guard<std::mutex> lock(rootRegistryMutex());
    auto it = rootRegistry().find(nonce_);
    if (it != rootRegistry().end() && it->second.lock() == server_) rootRegistry().erase(it);
    endedRoots().push_back(nonce_);
    if (endedRoots().size() > 1024) endedRoots().pop_front();
  }
  std::lock_guard<std::mutex> lock(server_->mu_);
  server_->finished_ = true;
  server_->cv_.notify_all();
}

void RootLoop::loop() {
  std::vector<pollfd> fds;
  while (!done()) {
    fds.clear();
    if (listener_) fds.push_back({listener_.get(), POLLIN, 0});
    for (auto& c : conns_)
      fds.push_back({c->fd.get(), static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    int rc = ::poll(fds.data(), fds.size(), pollTimeoutMs());
    if (rc < 0 && errno != EINTR) throwSystemError("bootstrap root poll", errno);
    size_t base = listener_ ? 1 : 0;
    size_t n = conns_.size();  // conns accepted below are polled next round
    if (listener_ && (fds[0].revents & POLLIN)) acceptOne();
    for (size_t i = 0; i < n; ++i) {
      Conn& c = *conns_[i];
      short ev = fds[base + i].revents;
      if (!c.gone && (ev & POLLOUT)) flush(c);
      if (!c.gone && (ev & (POLLIN | POLLHUP | POLLERR))) readConn(c);
      if (!c.gone && c.rank < 0 && c.helloBy.expired()) {
        size_t unsaid = 0;
        if (!c.closing && strangerLog_.allow(&unsaid))
          GROVE_WARN(log::kBoot,
                     "bootstrap root: closing connection from %s: no valid hello within %.0f s "
                     "(%zu such messages left out)",
                     c.from.c_str(), kHelloTimeoutSec, unsaid);
        close(c);
      }
    }
    std::erase_if(conns_, [](const std::unique_ptr<Conn>& c) { return c->gone; });
    if (diag_.active && diag_.by.expired()) finishDiagnosis();
    if (complete_ && closeWhenComplete_) listener_.reset();
    publish();
  }
}

int RootLoop::pollTimeoutMs() {
  int ms = diag_.active ? diag_.by.pollMs(-1) : -1;
  for (auto& c : conns_) {
    if (c->rank >= 0) continue;
    int t = c->helloBy.pollMs(-1);
    if (ms < 0 || t < ms) ms = t;
  }
  return ms;
}

void RootLoop::acceptOne() {
  sockaddr_storage peer{};
  net::Fd fd;
  try {
    fd = net::acceptUntil(listener_.get(), net::Deadline::in(1e-3), {}, &peer);
  } catch (const Error& e) {  // e.g. out of descriptors: keep serving the ranks we have
    size_t unsaid = 0;
    if (strangerLog_.allow(&unsaid))
      GROVE_WARN(log::kBoot, "bootstrap root: accept failed: %s (%zu such messages left out)",
                 e.what(), unsaid);
    dropOldestPending("out of descriptors");  // a stranger's slot is worth less than a rank's
    ::poll(nullptr, 0, 10);
    return;
  }
  if (!fd) return;
  net::setNonBlocking(fd.get());
  net::setNoDelay(fd.get());
  net::setKeepAlive(fd.get());
  auto c = std::make_unique<Conn>();
  c->fd = std::move(fd);
  c->helloBy = net::Deadline::in(kHelloTimeoutSec);
  c->from = net::formatAddress(peer);
  c->challenge = randomU64();
  send(*c, makeMessage(MsgType::kChallenge, c->challenge, nullptr, 0));
  if (c->gone) return;
  conns_.push_back(std::move(c));
  size_t pending = 0;
  for (const auto& x : conns_) pending += !x->gone && x->rank < 0 ? 1 : 0;
  if (pending > kMaxPendingHellos) dropOldestPending("too many connections without a hello");
}

void RootLoop::dropOldestPending(const char* why) {
  for (auto& x : conns_) {
    if (x->gone || x->rank >= 0) continue;
    GROVE_INFO(log::kBoot, "bootstrap root: closing connection from %s: %s", x->from.c_str(), why);
    close(*x);
    return;
  }
}

void RootLoop::readConn(Conn& c) {
  uint8_t buf[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      c.in.insert(c.in.end(), buf, buf + n);
      if (static_cast<size_t>(n) < sizeof(buf)) break;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    parse(c);  // a BYE may sit just before the end of the stream
    if (!c.gone) close(c);
    return;
  }
  parse(c);
}

void RootLoop::parse(Conn& c) {
  size_t off = 0;
  while (!c.gone && c.in.size() - off >= sizeof(MsgHeader)) {
    MsgHeader h;
    std::memcpy(&h, c.in.data() + off, sizeof(h));
    size_t limit = c.rank < 0 ? sizeof(HelloMsg) : kMaxMsgBytes;
    if (h.length > limit || (c.rank < 0 && h.type != static_cast<uint32_t>(MsgType::kHello))) {
      GROVE_WARN(log::kBoot, "bootstrap root: protocol error from %s (type %u, %u bytes); closing",
                 c.from.c_str(), h.type, h.length);
      close(c);
      return;
    }
    if (c.in.size() - off < sizeof(h) + h.length) break;
    handle(c, h, c.in.data() + off + sizeof(h));
    off += sizeof(h) + h.length;
  }
  if (off > 0 && !c.gone) c.in.erase(c.in.begin(), c.in.begin() + static_cast<long>(off));
}

void RootLoop::refuse(Conn& c, const std::string& why) {
  send(c, makeMessage(MsgType::kRefuse, 0, why.data(), why.size()));
  c.closing = true;
  c.helloBy = net::Deadline::in(2.0);  // drop it after 2 s even if it never reads
  if (!c.gone && c.out.empty()) close(c);
}

void RootLoop::send(Conn& c, const Buffer& msg) {
  c.out.push_back(msg);
  flush(c);
}

void RootLoop::flush(Conn& c) {
  while (!c.out.empty()) {
    const auto& front = *c.out.front();
    ssize_t n = ::send(c.fd.get(), front.data() + c.outOff, front.size() - c.outOff,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      close(c);  // reset or broken pipe: treated like EOF
      return;
    }
    c.outOff += static_cast<size_t>(n);
    if (c.outOff == front.size()) {
      c.out.pop_front();
      c.outOff = 0;
    }
  }
  if (c.closing) close(c);
}

void RootLoop::close(Conn& c) {
  if (c.gone) return;
  c.gone = true;
  c.fd.reset();
  c.out.clear();
  if (c.rank < 0 || ranks_[c.rank] != RankState::kJoined) return;
  ranks_[c.rank] = RankState::kDead;
  if (diag_.active && !diag_.reports[c.rank].answered && !diag_.reports[c.rank].gone) {
    diag_.reports[c.rank].gone = true;
    if (--diag_.waiting == 0) finishDiagnosis();
  }
  failed_ = true;
  std::string why = describe(c.rank) + " died or closed its bootstrap connection";
  GROVE_WARN(log::kBoot, "bootstrap root: %s", why.c_str());
  abortAll(why, c.rank);
}

void RootLoop::abortAll(const std::string& reason, int except) {
  if (failedWhy_.empty()) failedWhy_ = reason;
  Buffer msg = makeMessage(MsgType::kAbort, 0, reason.data(), reason.size());
  for (auto& c : conns_)
    if (!c->gone && c->rank >= 0 && c->rank != except && !c->bye) send(*c, msg);
}

std::string RootLoop::describe(int rank) const {
  if (rank < 0 || rank >= nranks_) return "an unknown peer";
  return describeRank(rank, infos_[rank]);
}

bool RootLoop::done() const {
  if (!complete_ && !failed_) return false;
  for (auto& c : conns_)
    if (c->rank >= 0) return false;
  return true;
}

void RootLoop::publish() {
  std::lock_guard<std::mutex> lock(server_->mu_);
  server_->complete_ = complete_;
  server_->allLeft_ = nranks_ > 0 && std::all_of(ranks_.begin(), ranks_.end(), [](RankState s) {
                        return s == RankState::kLeft || s == RankState::kDead;
                      });
  auto& gone = server_->rankGone_;
  gone.assign(nranks_, 0);
  uint64_t myHost = localHostHash();
  for (int r = 0; r < nranks_; ++r) {
    bool local = infos_[r].pid == getpid() && infos_[r].hostHash == myHost;
    gone[r] = ranks_[r] == RankState::kLeft || ranks_[r] == RankState::kDead || local ||
              (ranks_[r] == RankState::kAbsent && failed_);
  }
  server_->cv_.notify_all();
}

}  // namespace grove::core

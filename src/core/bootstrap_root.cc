// The bootstrap root server; see bootstrap_root.h for how it works.
#include "core/bootstrap_root.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/siphash.h"
#include "base/socket.h"
#include "core/bootstrap.h"
#include "core/hang_doctor.h"

namespace grove::core {
namespace {

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::map<uint64_t, std::weak_ptr<RootServer>>& registry() {
  static auto* r = new std::map<uint64_t, std::weak_ptr<RootServer>>();  // never destroyed: the
  return *r;  // detached thread may still run while static destructors do
}
// Nonces of this process's roots that have ended, newest last (at most 1024).
std::deque<uint64_t>& endedRoots() {
  static auto* d = new std::deque<uint64_t>();
  return *d;
}

using Buffer = std::shared_ptr<std::vector<uint8_t>>;

Buffer makeMessage(MsgType type, uint64_t seq, const void* payload, size_t bytes) {
  auto buf = std::make_shared<std::vector<uint8_t>>(sizeof(MsgHeader) + bytes);
  MsgHeader h{static_cast<uint32_t>(type), static_cast<uint32_t>(bytes), seq};
  std::memcpy(buf->data(), &h, sizeof(h));
  if (bytes > 0) std::memcpy(buf->data() + sizeof(h), payload, bytes);
  return buf;
}

}  // namespace

uint64_t helloMac(const HelloMsg& m, uint64_t challenge, uint64_t secret) {
  struct Signed {
    HelloMsg hello;
    uint64_t challenge;
  } s{};
  s.hello = m;
  s.hello.mac = 0;
  s.challenge = challenge;
  return sipHash24(SipKey{secret, m.nonce}, &s, sizeof(s));
}

/// The server thread's state and loop.
class RootLoop {
 public:
  RootLoop(std::shared_ptr<RootServer> server, net::Fd listener, uint64_t secret, uint64_t nonce,
           bool closeWhenComplete)
      : server_(std::move(server)),
        listener_(std::move(listener)),
        secret_(secret),
        nonce_(nonce),
        closeWhenComplete_(closeWhenComplete) {}

  /// Runs until the job is over; never throws.
  void run();

 private:
  struct Conn {
    net::Fd fd;
    std::vector<uint8_t> in;  // received bytes not yet parsed
    std::deque<Buffer> out;   // queued messages
    size_t outOff = 0;        // bytes of out.front() already sent
    int rank = -1;            // set by a valid hello
    bool bye = false;         // sent BYE: its end is not a death
    bool closing = false;     // close once `out` is flushed
    bool gone = false;        // closed; erased at the end of the round
    net::Deadline helloBy;
    std::string from;        // peer address text
    uint64_t challenge = 0;  // what its hello's mac must cover
  };
  enum class RankState { kAbsent, kJoined, kLeft, kDead };
  struct Gather {
    uint32_t bytes = 0;
    int count = 0;
    std::vector<uint8_t> data;
    std::vector<uint8_t> have;
  };

  // Logs about strangers (failed accepts, silent or refused connections),
  // at most one line per kQuietSec with the count of those left unsaid, so a
  // flood cannot fill the log.
  struct Throttle {
    net::Deadline next;
    size_t unsaid = 0;
    bool first = true;
    // True when a line may be written now (*unsaid: how many were not).
    bool allow(size_t* unsaidOut) {
      if (!first && !next.expired()) {
        ++unsaid;
        return false;
      }
      first = false;
      next = net::Deadline::in(kQuietSec);
      *unsaidOut = unsaid;
      unsaid = 0;
      return true;
    }
  };
  static constexpr double kQuietSec = 10.0;

  void loop();
  int pollTimeoutMs();
  void acceptOne();
  /// Closes the oldest connection that has not said hello (the pending cap).
  void dropOldestPending(const char* why);
  void readConn(Conn& c);
  void parse(Conn& c);
  void handle(Conn& c, const MsgHeader& h, const uint8_t* payload);
  void onHello(Conn& c, const MsgHeader& h, const uint8_t* payload);
  void onGather(Conn& c, uint64_t seq, const uint8_t* payload, size_t bytes);
  void startDiagnosis();
  void onReport(Conn& c, uint64_t seq, const uint8_t* payload, size_t bytes);
  void finishDiagnosis();
  Buffer joinDiagnosis(uint64_t seq) const;
  void refuse(Conn& c, const std::string& why);
  void send(Conn& c, const Buffer& msg);
  void flush(Conn& c);
  void close(Conn& c);
  void abortAll(const std::string& reason, int except);
  std::string describe(int rank) const;
  bool done() const;
  void publish();

  std::shared_ptr<RootServer> server_;
  net::Fd listener_;
  uint64_t secret_, nonce_;
  bool closeWhenComplete_;
  std::string failedWhy_;  // the first abort's reason (told to ranks that join after it)
  Throttle strangerLog_;
  std::vector<std::unique_ptr<Conn>> conns_;
  int nranks_ = 0;
  int joined_ = 0;
  bool complete_ = false;
  bool failed_ = false;
  std::vector<RankState> ranks_;
  std::vector<transport::PeerInfo> infos_;
  std::map<uint64_t, Gather> gathers_;
  struct Diagnosis {
    uint64_t id = 0;
    bool active = false;
    int waiting = 0;  // reports still expected
    net::Deadline by;
    std::vector<RankReport> reports;
  } diag_;
};

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
    std::lock_guard<std::mutex> lock(registryMutex());
    auto it = registry().find(nonce_);
    if (it != registry().end() && it->second.lock() == server_) registry().erase(it);
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

void RootLoop::handle(Conn& c, const MsgHeader& h, const uint8_t* payload) {
  switch (static_cast<MsgType>(h.type)) {
    case MsgType::kHello:
      if (c.rank >= 0) return refuse(c, "second hello on one connection");
      return onHello(c, h, payload);
    case MsgType::kGather: return onGather(c, h.seq, payload, h.length);
    case MsgType::kAbort: {
      std::string why(reinterpret_cast<const char*>(payload), h.length);
      if (failed_) {  // every rank has been told already; the first reason stands
        GROVE_INFO(log::kBoot, "bootstrap root: %s also aborts: %s", describe(c.rank).c_str(),
                   why.c_str());
        return;
      }
      GROVE_WARN(log::kBoot, "bootstrap root: %s asks to abort: %s", describe(c.rank).c_str(),
                 why.c_str());
      failed_ = true;
      return abortAll(describe(c.rank) + " aborted the communicator: " + why, c.rank);
    }
    case MsgType::kDoctor:
      if (c.rank < 0) return refuse(c, "diagnosis before hello");
      if (!complete_) return send(c, joinDiagnosis(h.seq));
      if (!diag_.active) startDiagnosis();
      return;
    case MsgType::kReport: return onReport(c, h.seq, payload, h.length);
    case MsgType::kBye:
      c.bye = true;
      ranks_[c.rank] = RankState::kLeft;
      GROVE_TRACE(log::kBoot, "bootstrap root: rank %d left", c.rank);
      publish();  // before the rank sees its connection close (RootServer::ending)
      c.closing = true;
      if (c.out.empty()) close(c);
      return;
    default:
      GROVE_WARN(log::kBoot, "bootstrap root: unknown message type %u from %s", h.type,
                 describe(c.rank).c_str());
      return;
  }
}

void RootLoop::onHello(Conn& c, const MsgHeader& h, const uint8_t* payload) {
  HelloMsg m;
  if (h.length != sizeof(m)) return refuse(c, "malformed hello (other grove version?)");
  std::memcpy(&m, payload, sizeof(m));
  if (m.magic != kHelloMagic || m.version != kProtocolVersion)
    return refuse(c, "hello with a wrong magic or protocol version (other grove version?)");
  if (m.nonce != nonce_ || m.mac != helloMac(m, c.challenge, secret_)) {
    size_t unsaid = 0;
    if (strangerLog_.allow(&unsaid))
      GROVE_WARN(log::kBoot,
                 "bootstrap root %s: refusing rank %d from %s: wrong secret "
                 "(a rank of another job, or a stray connection; %zu such messages left out)",
                 net::formatAddress(server_->address()).c_str(), m.rank, c.from.c_str(), unsaid);
    return refuse(c, "wrong secret: this rank's unique id does not belong to this job");
  }
  if (nranks_ == 0 && m.nranks > 0) {
    nranks_ = m.nranks;
    ranks_.assign(nranks_, RankState::kAbsent);
    infos_.resize(nranks_);
  }
  if (m.nranks != nranks_)
    return refuse(c, "nranks mismatch: this rank says " + std::to_string(m.nranks) +
                         ", the first rank to join said " + std::to_string(nranks_));
  if (m.rank < 0 || m.rank >= nranks_)
    return refuse(
        c, "rank " + std::to_string(m.rank) + " out of range [0," + std::to_string(nranks_) + ")");
  if (failed_)
    return refuse(c, "the job already failed" +
                         (failedWhy_.empty() ? " (a rank died or aborted)" : ": " + failedWhy_));
  if (ranks_[m.rank] != RankState::kAbsent)
    return refuse(
        c, "duplicate rank " + std::to_string(m.rank) + ": already joined as " + describe(m.rank));
  c.rank = m.rank;
  m.self.rank = m.rank;
  m.self.hostName[sizeof(m.self.hostName) - 1] = '\0';
  infos_[m.rank] = m.self;
  ranks_[m.rank] = RankState::kJoined;
  GROVE_TRACE(log::kBoot, "bootstrap root: rank %d joined from %s (%d/%d)", m.rank, c.from.c_str(),
              joined_ + 1, nranks_);
  if (++joined_ < nranks_) return;
  complete_ = true;
  Buffer welcome =
      makeMessage(MsgType::kWelcome, 0, infos_.data(), infos_.size() * sizeof(transport::PeerInfo));
  for (auto& other : conns_)
    if (!other->gone && other->rank >= 0) send(*other, welcome);
  GROVE_INFO(log::kBoot, "bootstrap root %s: all %d ranks joined",
             net::formatAddress(server_->address()).c_str(), nranks_);
}

void RootLoop::onGather(Conn& c, uint64_t seq, const uint8_t* payload, size_t bytes) {
  if (c.rank < 0 || !complete_) return refuse(c, "all-gather before the job was complete");
  Gather& g = gathers_[seq];
  if (g.count == 0) {
    g.bytes = static_cast<uint32_t>(bytes);
    g.data.resize(static_cast<size_t>(nranks_) * bytes);
    g.have.assign(nranks_, 0);
  }
  if (bytes != g.bytes || g.have[c.rank]) {
    failed_ = true;
    return abortAll("bootstrap all-gather #" + std::to_string(seq) + " is inconsistent: " +
                        describe(c.rank) + " gave " + std::to_string(bytes) + " bytes, others " +
                        std::to_string(g.bytes) + (g.have[c.rank] ? " (twice)" : ""),
                    -1);
  }
  if (bytes > 0) std::memcpy(g.data.data() + static_cast<size_t>(c.rank) * bytes, payload, bytes);
  g.have[c.rank] = 1;
  if (++g.count < nranks_) return;
  Buffer result = makeMessage(MsgType::kGatherResult, seq, g.data.data(), g.data.size());
  gathers_.erase(seq);
  for (auto& other : conns_)
    if (!other->gone && other->rank >= 0 && !other->bye) send(*other, result);
}

// Asks every connected rank where it is; ranks that left or died count as gone.
void RootLoop::startDiagnosis() {
  diag_.active = true;
  ++diag_.id;
  diag_.waiting = 0;
  diag_.by = net::Deadline::in(kReportWindowSec);
  diag_.reports.assign(nranks_, RankReport{});
  for (int r = 0; r < nranks_; ++r) {
    diag_.reports[r].name = describe(r);
    diag_.reports[r].gone = ranks_[r] != RankState::kJoined;
  }
  Buffer ask = makeMessage(MsgType::kReportAsk, diag_.id, nullptr, 0);
  for (auto& c : conns_) {
    if (c->gone || c->rank < 0 || c->bye) continue;
    send(*c, ask);
    ++diag_.waiting;
  }
  GROVE_INFO(log::kBoot, "bootstrap root: hang doctor asks %d rank(s) where they are",
             diag_.waiting);
  if (diag_.waiting == 0) finishDiagnosis();
}

void RootLoop::onReport(Conn& c, uint64_t seq, const uint8_t* payload, size_t bytes) {
  if (c.rank < 0) return refuse(c, "report before hello");
  if (!diag_.active || seq != diag_.id || bytes != sizeof(Position)) return;  // late or stale
  RankReport& r = diag_.reports[c.rank];
  if (r.answered) return;
  std::memcpy(&r.pos, payload, sizeof(Position));
  r.answered = true;
  if (--diag_.waiting == 0) finishDiagnosis();
}

// Before every rank has joined, the diagnosis is who has not.
Buffer RootLoop::joinDiagnosis(uint64_t seq) const {
  std::string missing;
  int count = 0;
  for (int r = 0; r < nranks_; ++r) {
    if (ranks_[r] != RankState::kAbsent) continue;
    if (count < 8) missing += (count == 0 ? "" : ", ") + std::to_string(r);
    ++count;
  }
  if (count > 8) missing += " and " + std::to_string(count - 8) + " more";
  const std::string text =
      count == 0 ? "every rank has joined"
                 : (count == 1 ? "rank " : "ranks ") + missing + (count == 1 ? " has" : " have") +
                       " not joined (of " + std::to_string(nranks_) +
                       "): not started, stopped or stuck before its init, or given another "
                       "unique id";
  return makeMessage(MsgType::kDiagnosis, seq, text.data(), text.size());
}

void RootLoop::finishDiagnosis() {
  diag_.active = false;
  const std::string text = diagnose(diag_.reports);
  GROVE_WARN(log::kBoot, "hang doctor: %s", text.c_str());
  Buffer msg = makeMessage(MsgType::kDiagnosis, diag_.id, text.data(), text.size());
  for (auto& c : conns_)
    if (!c->gone && c->rank >= 0 && !c->bye) send(*c, msg);
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

std::string describeRank(int rank, const transport::PeerInfo& info) {
  return "rank " + std::to_string(rank) + " (host " + std::string(info.hostName) + " pid " +
         std::to_string(info.pid) + ")";
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

// ------------------------------------------------------------------ RootServer

std::shared_ptr<RootServer> RootServer::start(const sockaddr_storage& addr, uint64_t secret,
                                              uint64_t nonce, bool closeListenerWhenComplete) {
  sockaddr_storage bound = addr;
  net::Fd listener = net::listenOn(bound);
  return startOn(std::move(listener), bound, secret, nonce, closeListenerWhenComplete);
}

std::shared_ptr<RootServer> RootServer::startOn(net::Fd listener, const sockaddr_storage& addr,
                                                uint64_t secret, uint64_t nonce,
                                                bool closeListenerWhenComplete) {
  auto server = std::make_shared<RootServer>();
  server->addr_ = addr;
  server->nonce_ = nonce;
  server->closesWhenComplete_ = closeListenerWhenComplete;  // no thread reads it yet
  net::setNonBlocking(listener.get());
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    registry()[nonce] = server;
  }
  auto loop = std::make_unique<RootLoop>(server, std::move(listener), secret, nonce,
                                         closeListenerWhenComplete);
  std::thread([l = std::move(loop)]() mutable {
    l->run();
    l.reset();
  }).detach();
  GROVE_INFO(log::kBoot, "bootstrap root listening on %s",
             net::formatAddress(server->addr_).c_str());
  return server;
}

bool RootServer::ending() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_ || allLeft_;
}

bool RootServer::complete() {
  std::lock_guard<std::mutex> lock(mu_);
  return complete_ && closesWhenComplete_;
}

bool RootServer::endedLocally(uint64_t nonce) {
  std::lock_guard<std::mutex> lock(registryMutex());
  if (registry().count(nonce) != 0) return false;
  const auto& ended = endedRoots();
  return std::find(ended.begin(), ended.end(), nonce) != ended.end();
}

std::shared_ptr<RootServer> RootServer::findLocal(uint64_t nonce) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto it = registry().find(nonce);
  return it == registry().end() ? nullptr : it->second.lock();
}

bool RootServer::waitRemoteRanksGone(double timeoutSec) {
  std::unique_lock<std::mutex> lock(mu_);
  auto allGone = [&] {
    if (finished_) return true;
    if (rankGone_.empty()) return false;
    for (int g : rankGone_)
      if (!g) return false;
    return true;
  };
  return cv_.wait_for(lock, std::chrono::duration<double>(timeoutSec), allGone);
}

bool RootServer::waitFinished(double timeoutSec) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(timeoutSec), [&] { return finished_; });
}

}  // namespace grove::core

// Bootstrap client side; see bootstrap.h for how it works.
#include "core/bootstrap.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap_root.h"
#include "core/hang_doctor.h"

namespace grove::core {

uint64_t localHostHash() {
  static const uint64_t hash = [] {
    std::string text;
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, text);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    text += "|";
    text += host;
    return hashBytes(text.data(), text.size());
  }();
  return hash;
}

void fillHostIdentity(transport::PeerInfo& info) {
  info.pid = static_cast<int32_t>(getpid());
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  // (a longer name is cut to the field's size)
  std::snprintf(info.hostName, sizeof(info.hostName), "%.*s",
                static_cast<int>(sizeof(info.hostName) - 1), host);
  info.hostHash = localHostHash();
}

transport::PeerInfo localPeerInfo(int rank) {
  transport::PeerInfo info;
  info.rank = rank;
  fillHostIdentity(info);
  return info;
}

Bootstrap::Bootstrap(const UniqueIdData& id, int rank, int nranks, const transport::PeerInfo& self,
                     AbortSignal* abort, double timeoutSec)
    : id_(id),
      rank_(rank),
      nranks_(nranks),
      abort_(abort != nullptr ? abort : &ownAbort_),
      timeoutSec_(timeoutSec) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throwInvalidArgument("bootstrap: rank " + std::to_string(rank) + " out of range [0," +
                         std::to_string(nranks) + ")");
  if (!net::addressUsable(id.root)) throwInvalidArgument("bootstrap: the unique id names no root");
  rootText_ = net::formatAddress(id.root);
  transport::PeerInfo me = self;
  me.rank = rank;
  if (me.pid == 0 || me.hostHash == 0 || me.hostName[0] == '\0') {
    transport::PeerInfo ident;
    fillHostIdentity(ident);
    if (me.pid == 0) me.pid = ident.pid;
    if (me.hostHash == 0) me.hostHash = ident.hostHash;
    if (me.hostName[0] == '\0') std::memcpy(me.hostName, ident.hostName, sizeof(me.hostName));
  }
  if (id.fromEnv && rank == 0)
    startLocalRootFromEnv();
  else if (!id.fromEnv)
    localRoot_ = RootServer::findLocal(id.nonce);
  if (!id.fromEnv && !localRoot_ && RootServer::endedLocally(id.nonce)) throwSpentId();
  if (!id.fromEnv && localRoot_ && localRoot_->ending()) throwSpentId();
  if (!id.fromEnv && localRoot_ && localRoot_->complete())
    throwInvalidUsage("rank " + std::to_string(rank) +
                      ": every rank of this unique id's communicator has joined already (its "
                      "root takes no more ranks); make a new id with groveGetUniqueId");
  join(me);
  watcher_ = std::thread([this] { watch(); });
}

Bootstrap::~Bootstrap() {
  try {
    close();
  } catch (const std::exception& e) {
    GROVE_WARN(log::kBoot, "bootstrap close failed: %s", e.what());
  }
}

void Bootstrap::startLocalRootFromEnv() {
  try {
    localRoot_ =
        RootServer::start(id_.root, id_.secret, id_.nonce, /*closeListenerWhenComplete=*/true);
  } catch (const Error& e) {
    const bool inUse = std::string(e.what()).find("in use") != std::string::npos;
    throw Error(e.code(), "rank 0 cannot start the bootstrap root at " + rootText_ +
                              " named by GROVE_COMM_ID (" + e.what() + "); " +
                              (inUse ? "another process holds that port: is a second process "
                                       "running as rank 0 of this job, or another job on it?"
                                     : "it must be an address of rank 0's host with a free port"));
  }
}

net::IoResult Bootstrap::sendMessage(uint32_t type, uint64_t seq, const void* data, size_t bytes,
                                     const net::Deadline& deadline, bool watchAbort) {
  std::vector<uint8_t> msg(sizeof(MsgHeader) + bytes);
  MsgHeader h{type, static_cast<uint32_t>(bytes), seq};
  std::memcpy(msg.data(), &h, sizeof(h));
  if (bytes > 0) std::memcpy(msg.data() + sizeof(h), data, bytes);
  std::unique_lock<std::timed_mutex> lock(sendMu_, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::duration<double>(deadline.remainingSec())))
    return net::IoResult::kTimeout;
  if (!fd_) return net::IoResult::kClosed;
  net::AbortView av;
  if (watchAbort) av = {abort_->flag(), abort_->reasonPtr()};
  return net::sendAll(fd_.get(), msg.data(), msg.size(), deadline, av);
}

void Bootstrap::throwSpentId() const {
  throwInvalidUsage("rank " + std::to_string(rank_) +
                    ": this unique id is spent: the bootstrap "
                    "root this process started for it at " +
                    rootText_ +
                    " has ended (an init with it failed or its communicator is gone); make a "
                    "new one with groveGetUniqueId");
}

void Bootstrap::join(const transport::PeerInfo& self) {
  std::string who = "rank " + std::to_string(rank_) + " of " + std::to_string(nranks_);
  net::Deadline deadline = net::Deadline::in(timeoutSec_);
  net::AbortView av{abort_->flag(), abort_->reasonPtr()};
  // A root this process hosts may end while we knock (its job is over): then
  // the id is spent, and retrying until the timeout would only hide that.
  const double slice = localRoot_ ? 0.2 : timeoutSec_;
  for (;;) {
    try {
      fd_ = net::connectUntil(id_.root, net::Deadline::in(std::min(slice, deadline.remainingSec())),
                              av);
      break;
    } catch (const Error& e) {
      av.check();
      if (localRoot_ && localRoot_->waitFinished(0)) throwSpentId();
      if (deadline.expired() || !localRoot_)
        throw Error(e.code(),
                    who + " cannot reach the bootstrap root" + rootHost() + ": " + e.what());
    }
  }
  net::setNoDelay(fd_.get());
  net::setKeepAlive(fd_.get());
  openRescueListener();
  // The root speaks first: a challenge the hello's mac must cover.
  MsgHeader challenge;
  auto r = net::recvAll(fd_.get(), &challenge, sizeof(challenge), deadline, av);
  if (r != net::IoResult::kOk || challenge.type != static_cast<uint32_t>(MsgType::kChallenge) ||
      challenge.length != 0) {
    // A root of this process that was ending took the connection and closed it.
    if (r != net::IoResult::kOk && r != net::IoResult::kTimeout && localRoot_ &&
        localRoot_->waitFinished(1.0))
      throwSpentId();
    throwRemoteError(who + ": no challenge from the bootstrap root at " + rootText_ + rootHost() +
                     " (not a grove root of this version, or it closed the connection)");
  }
  HelloMsg hello;
  hello.magic = kHelloMagic;
  hello.version = kProtocolVersion;
  hello.rank = rank_;
  hello.nranks = nranks_;
  hello.nonce = id_.nonce;
  hello.self = self;
  hello.self.rescue = rescueAddr_;
  hello.mac = helloMac(hello, challenge.seq, id_.secret);
  r = sendMessage(static_cast<uint32_t>(MsgType::kHello), 0, &hello, sizeof(hello), deadline, true);
  if (r != net::IoResult::kOk)
    throwRemoteError(who + ": could not send its hello to the bootstrap root at " + rootText_);
  for (;;) {
    MsgHeader h;
    r = net::recvAll(fd_.get(), &h, sizeof(h), deadline, av);
    std::vector<uint8_t> payload;
    if (r == net::IoResult::kOk && h.length <= kMaxMsgBytes) {
      payload.resize(h.length);
      r = net::recvAll(fd_.get(), payload.data(), payload.size(), deadline, av);
    }
    uint32_t lateType = 0;
    std::vector<uint8_t> late;
    const std::string missing =
        r == net::IoResult::kTimeout ? askWhoIsMissing(&lateType, &late) : "";
    if (lateType != 0) {  // the question crossed the root's welcome (or abort): take that
      h.type = lateType;
      payload = std::move(late);
      r = net::IoResult::kOk;
    }
    if (r == net::IoResult::kTimeout) {
      std::string text = who + ": timed out after " + std::to_string(timeoutSec_) +
                         " s waiting for all ranks to join the bootstrap root at " + rootText_ +
                         " (are all ranks started, with the same unique id? GROVE_TIMEOUT)";
      text += missing.empty() ? " -- the root did not answer" + rootHost()
                              : " -- hang doctor: " + missing;
      // The ranks that did join end now, with this reason, not each at its own timeout.
      sendMessage(static_cast<uint32_t>(MsgType::kAbort), 0, text.data(), text.size(),
                  net::Deadline::in(0.2), false);
      throwRemoteError(text);
    }
    if (r == net::IoResult::kClosed && localRoot_ && localRoot_->waitFinished(1.0)) throwSpentId();
    if (r == net::IoResult::kClosed)
      throwRemoteError(who + ": the bootstrap root at " + rootText_ + rootHost() +
                       " closed the connection while joining (wrong unique id or secret, or the "
                       "root exited)");
    std::string text(payload.begin(), payload.end());
    switch (static_cast<MsgType>(h.type)) {
      case MsgType::kWelcome:
        if (payload.size() != nranks_ * sizeof(transport::PeerInfo))
          throwRemoteError(who + ": malformed welcome from the bootstrap root");
        peers_.resize(nranks_);
        std::memcpy(peers_.data(), payload.data(), payload.size());
        GROVE_INFO(log::kBoot, "%s joined the bootstrap at %s", who.c_str(), rootText_.c_str());
        return;
      case MsgType::kRefuse:
        throwInvalidUsage(who + ": the bootstrap root at " + rootText_ + " refused it: " + text);
      case MsgType::kAbort: throwRemoteError(who + ": the job was aborted while joining: " + text);
      default: break;  // nothing else is expected before the welcome
    }
  }
}

std::string Bootstrap::rootHost() const {
  return id_.fromEnv ? ", which rank 0's process hosts (GROVE_COMM_ID): is it stopped, or has it "
                       "exited?"
                     : "";
}

std::string Bootstrap::askWhoIsMissing(uint32_t* otherType, std::vector<uint8_t>* other) {
  if (sendMessage(static_cast<uint32_t>(MsgType::kDoctor), 0, nullptr, 0, net::Deadline::in(0.5),
                  false) != net::IoResult::kOk)
    return "";
  const net::Deadline deadline = net::Deadline::in(1.0);
  for (;;) {
    MsgHeader h;
    if (net::recvAll(fd_.get(), &h, sizeof(h), deadline) != net::IoResult::kOk ||
        h.length > kMaxMsgBytes)
      return "";
    std::vector<uint8_t> payload(h.length);
    if (net::recvAll(fd_.get(), payload.data(), payload.size(), deadline) != net::IoResult::kOk)
      return "";
    if (h.type == static_cast<uint32_t>(MsgType::kDiagnosis))
      return std::string(payload.begin(), payload.end());
    if (h.type == static_cast<uint32_t>(MsgType::kWelcome) ||
        h.type == static_cast<uint32_t>(MsgType::kAbort) ||
        h.type == static_cast<uint32_t>(MsgType::kRefuse)) {
      *otherType = h.type;
      *other = std::move(payload);
      return "";
    }
  }
}

void Bootstrap::watch() {
  std::string lost;
  try {
    for (;;) {
      MsgHeader h;
      if (net::recvAll(fd_.get(), &h, sizeof(h), net::Deadline::never()) != net::IoResult::kOk)
        break;
      if (h.length > kMaxMsgBytes) {
        lost = "protocol error from the bootstrap root (message of " + std::to_string(h.length) +
               " bytes)";
        break;
      }
      std::vector<uint8_t> payload(h.length);
      if (net::recvAll(fd_.get(), payload.data(), payload.size(), net::Deadline::never()) !=
          net::IoResult::kOk)
        break;
      if (h.type == static_cast<uint32_t>(MsgType::kGatherResult)) {
        std::lock_guard<std::mutex> lock(mu_);
        results_[h.seq] = std::move(payload);
        cv_.notify_all();
      } else if (h.type == static_cast<uint32_t>(MsgType::kReportAsk)) {
        std::shared_ptr<CallTracker> tracker;
        {
          std::lock_guard<std::mutex> lock(mu_);
          tracker = tracker_;
        }
        Position p;
        p.rank = rank_;
        if (tracker) p = tracker->snapshot();
        sendMessage(static_cast<uint32_t>(MsgType::kReport), h.seq, &p, sizeof(p),
                    net::Deadline::in(1.0), false);
      } else if (h.type == static_cast<uint32_t>(MsgType::kDiagnosis)) {
        std::lock_guard<std::mutex> lock(mu_);
        diagnosis_.assign(payload.begin(), payload.end());
        diagnosisSeq_ = h.seq;
        cv_.notify_all();
      } else if (h.type == static_cast<uint32_t>(MsgType::kAbort)) {
        std::string why(payload.begin(), payload.end());
        GROVE_WARN(log::kBoot, "rank %d: abort from the bootstrap root: %s", rank_, why.c_str());
        abort_->raise(why);
        std::lock_guard<std::mutex> lock(mu_);
        cv_.notify_all();
      }
    }
  } catch (const std::exception& e) {
    lost = e.what();
  }
  // Which of this host's ranks went with the root, from the call board.
  std::function<std::string()> doctor;
  {
    std::lock_guard<std::mutex> lock(mu_);
    doctor = hostDoctor_;
  }
  const std::string seen = doctor && !byeSent_.load() ? doctor() : "";
  std::lock_guard<std::mutex> lock(mu_);
  watcherDone_ = true;
  if (!byeSent_.load()) {
    rootLost_ = true;
    lostReason_ = "rank " + std::to_string(rank_) +
                  " lost its connection to the bootstrap root at " + rootText_ +
                  (lost.empty() ? "" : " (" + lost + ")") +
                  ": the process hosting the root exited or the network failed" +
                  (seen.empty() ? "" : " -- hang doctor: " + seen);
    GROVE_WARN(log::kBoot, "%s", lostReason_.c_str());
    abort_->raise(lostReason_);
  }
  cv_.notify_all();
}

std::vector<uint8_t> Bootstrap::allGather(const void* data, size_t bytes) {
  if (closed_) throwInvalidUsage("bootstrap allGather after close");
  if (bytes > kMaxMsgBytes / static_cast<size_t>(nranks_))
    throwInvalidArgument("bootstrap allGather of " + std::to_string(bytes) + " bytes is too large");
  return collective(MsgType::kGather, "all-gather", " (" + std::to_string(bytes) + " bytes)", data,
                    bytes, timeoutSec_, bytes * static_cast<size_t>(nranks_));
}

std::vector<uint8_t> Bootstrap::broadcast(int source, const std::vector<uint8_t>& data,
                                          double waitSec) {
  if (closed_) throwInvalidUsage("bootstrap broadcast after close");
  if (source < 0 || source >= nranks_)
    throwInvalidArgument("bootstrap broadcast from rank " + std::to_string(source) + " of " +
                         std::to_string(nranks_));
  const bool mine = source == rank_;
  if (mine && data.size() > kMaxMsgBytes - sizeof(int32_t))
    throwInvalidArgument("bootstrap broadcast of " + std::to_string(data.size()) +
                         " bytes is too large");
  const int32_t from = source;
  std::vector<uint8_t> part(sizeof(from) + (mine ? data.size() : 0));
  std::memcpy(part.data(), &from, sizeof(from));
  if (mine && !data.empty()) std::memcpy(part.data() + sizeof(from), data.data(), data.size());
  return collective(MsgType::kBroadcast, "broadcast", " from rank " + std::to_string(source),
                    part.data(), part.size(), waitSec > 0 ? waitSec : timeoutSec_);
}

std::vector<uint8_t> Bootstrap::collective(MsgType type, const std::string& name,
                                           const std::string& detail, const void* data,
                                           size_t bytes, double waitSec, size_t resultBytes) {
  if (abort_->raised()) throw Error(groveRemoteError, abort_->reason());
  uint64_t seq = nextSeq_++;
  const std::string what =
      "rank " + std::to_string(rank_) + ": bootstrap " + name + " #" + std::to_string(seq) + detail;
  net::Deadline deadline = net::Deadline::in(waitSec);
  auto r = sendMessage(static_cast<uint32_t>(type), seq, data, bytes, deadline, true);
  std::unique_lock<std::mutex> lock(mu_);
  if (r == net::IoResult::kClosed && !rootLost_)
    throwRemoteError(what + ": lost the connection to the bootstrap root at " + rootText_);
  for (;;) {
    auto it = results_.find(seq);
    if (it != results_.end()) {
      std::vector<uint8_t> out = std::move(it->second);
      results_.erase(it);
      if (resultBytes != kAnySize && out.size() != resultBytes)
        throwRemoteError(what + ": the ranks passed different sizes");
      return out;
    }
    if (abort_->raised()) throw Error(groveRemoteError, abort_->reason());
    if (rootLost_) throwRemoteError(lostReason_);
    if (r == net::IoResult::kTimeout || deadline.expired()) {
      // Say who is missing: the root's diagnosis, else this host's boards.
      lock.unlock();
      std::string text = what + ": timed out after " + std::to_string(waitSec) +
                         " s waiting for the other ranks (GROVE_TIMEOUT)";
      std::string d = doctor(kReportWindowSec + 1.0);
      text += d.empty() ? " -- the root did not answer" + rootHost() : " -- hang doctor: " + d;
      throwRemoteError(text);
    }
    cv_.wait_for(lock, std::chrono::milliseconds(deadline.pollMs(100)));
  }
}

void Bootstrap::barrier() {
  uint8_t token = 0;
  allGather(&token, 1);
}

void Bootstrap::abort(const std::string& reason) {
  if (byeSent_.load()) return;
  std::string text = reason.substr(0, 4096);
  // Bounded: at most ~0.2 s for the lock plus 1 s to send; never watches the
  // abort signal (it is usually raised already).
  auto r = sendMessage(static_cast<uint32_t>(MsgType::kAbort), 0, text.data(), text.size(),
                       net::Deadline::in(0.2), false);
  if (r != net::IoResult::kOk)
    GROVE_INFO(log::kBoot, "rank %d: could not tell the bootstrap root to abort", rank_);
}

void Bootstrap::setHostDoctor(std::function<std::string()> doctor) {
  std::lock_guard<std::mutex> lock(mu_);
  hostDoctor_ = std::move(doctor);
}

void Bootstrap::setTracker(std::shared_ptr<CallTracker> tracker) {
  std::lock_guard<std::mutex> lock(mu_);
  tracker_ = std::move(tracker);
}

std::string Bootstrap::diagnose(double waitSec) {
  if (closed_ || byeSent_.load()) return "";
  uint64_t before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (rootLost_) return "";
    before = diagnosisSeq_;
  }
  if (sendMessage(static_cast<uint32_t>(MsgType::kDoctor), 0, nullptr, 0, net::Deadline::in(1.0),
                  false) != net::IoResult::kOk)
    return "";
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(waitSec),
               [&] { return diagnosisSeq_ != before || rootLost_; });
  return diagnosisSeq_ != before ? diagnosis_ : "";
}

std::string Bootstrap::doctor(double waitSec, const std::function<bool()>& told) {
  std::string d = diagnose(waitSec);
  if (told && told()) return "";
  if (!d.empty()) return d;
  std::function<std::string()> host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    host = hostDoctor_;
  }
  return host ? host() : "";
}

void Bootstrap::openRescueListener() {
  // The address this rank reaches the root from is one the job can reach.
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0)
    throwSystemError("bootstrap: getsockname", errno);
  net::setAddressPort(local, 0);
  rescue_ = net::listenOn(local, /*backlog=*/64);
  rescueAddr_ = local;
}

std::shared_ptr<RootServer> Bootstrap::startRescueRoot(uint64_t secret, uint64_t nonce) {
  if (!rescue_) throwInvalidUsage("bootstrap: this rank has no rescue listener (closed)");
  net::Fd dup(::fcntl(rescue_.get(), F_DUPFD_CLOEXEC, 0));
  if (!dup) throwSystemError("bootstrap: dup of the rescue listener", errno);
  return RootServer::startOn(std::move(dup), rescueAddr_, secret, nonce,
                             /*closeListenerWhenComplete=*/true);
}

void Bootstrap::close() {
  if (closed_) return;
  closed_ = true;
  rescue_.reset();
  if (fd_) {
    bool lost;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lost = rootLost_;
    }
    byeSent_.store(true);
    if (!lost)
      sendMessage(static_cast<uint32_t>(MsgType::kBye), 0, nullptr, 0,
                  net::Deadline::in(std::min(2.0, timeoutSec_)), false);
    // After an abort the job is over anyway: do not hold the caller up.
    if (localRoot_ && !abort_->raised() && !localRoot_->waitRemoteRanksGone(timeoutSec_))
      GROVE_WARN(log::kBoot,
                 "rank %d: the bootstrap root this process hosts still has ranks of "
                 "other processes after %.0f s; leaving anyway",
                 rank_, timeoutSec_);
    {
      std::unique_lock<std::mutex> lock(mu_);  // the root closes after BYE: the watcher sees EOF
      cv_.wait_for(lock, std::chrono::seconds(2), [&] { return watcherDone_; });
    }
    ::shutdown(fd_.get(), SHUT_RDWR);
    if (watcher_.joinable()) watcher_.join();
    std::lock_guard<std::timed_mutex> lock(sendMu_);
    fd_.reset();
  }
  localRoot_.reset();
}

}  // namespace grove::core

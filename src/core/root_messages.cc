// What the bootstrap root answers: hellos (the job's secret, ranks and
// their infos), all-gathers, aborts, byes and the hang doctor's rounds of
// reports. See bootstrap_root.h for the protocol.
#include <cstring>
#include <string>

#include "base/log.h"
#include "core/root_loop.h"

namespace grove::core {

void RootLoop::handle(Conn& c, const MsgHeader& h, const uint8_t* payload) {
  switch (static_cast<MsgType>(h.type)) {
    case MsgType::kHello:
      if (c.rank >= 0) return refuse(c, "second hello on one connection");
      return onHello(c, h, payload);
    case MsgType::kGather: return onGather(c, h.seq, payload, h.length);
    case MsgType::kBroadcast: return onBroadcast(c, h.seq, payload, h.length);
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
  if (bytes != g.bytes || g.have[c.rank] || g.source != Gather::kAllGather) {
    failed_ = true;
    return abortAll("bootstrap all-gather #" + std::to_string(seq) + " is inconsistent: " +
                        describe(c.rank) + " gave " + std::to_string(bytes) + " bytes, others " +
                        std::to_string(g.bytes) + (g.have[c.rank] ? " (twice)" : "") +
                        (g.source != Gather::kAllGather ? " to a broadcast" : ""),
                    -1);
  }
  if (bytes > 0) std::memcpy(g.data.data() + static_cast<size_t>(c.rank) * bytes, payload, bytes);
  g.have[c.rank] = 1;
  if (++g.count < nranks_) return;
  finishGather(seq, g.data);
}

void RootLoop::onBroadcast(Conn& c, uint64_t seq, const uint8_t* payload, size_t bytes) {
  if (c.rank < 0 || !complete_) return refuse(c, "broadcast before the job was complete");
  int32_t source = Gather::kAllGather;
  if (bytes >= sizeof(source)) std::memcpy(&source, payload, sizeof(source));
  Gather& g = gathers_[seq];
  if (g.count == 0) {
    g.source = source;
    g.have.assign(nranks_, 0);
  }
  // Every rank names the same source, which is a rank; only it sends data.
  std::string bad;
  if (bytes < sizeof(source) || source < 0 || source >= nranks_)
    bad = "names no rank as its source";
  else if (source != g.source)
    bad = g.source == Gather::kAllGather
              ? "broadcasts to an all-gather"
              : "names rank " + std::to_string(source) + " as the source, others rank " +
                    std::to_string(g.source);
  else if (g.have[c.rank])
    bad = "gave its part twice";
  else if (c.rank != source && bytes != sizeof(source))
    bad = "sent data without being the source";
  if (!bad.empty()) {
    failed_ = true;
    return abortAll("bootstrap broadcast #" + std::to_string(seq) +
                        " is inconsistent: " + describe(c.rank) + " " + bad,
                    -1);
  }
  if (c.rank == source) g.data.assign(payload + sizeof(source), payload + bytes);
  g.have[c.rank] = 1;
  if (++g.count < nranks_) return;
  finishGather(seq, g.data);
}

void RootLoop::finishGather(uint64_t seq, const std::vector<uint8_t>& data) {
  Buffer result = makeMessage(MsgType::kGatherResult, seq, data.data(), data.size());
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

}  // namespace grove::core

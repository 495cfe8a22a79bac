#include "core/hang_doctor.h"

#include <cstdio>

#include "core/call_board.h"

namespace grove::core {
namespace {

// "allreduce(count 64, float, sum) #12" or "send/recv batch #3".
std::string callText(const Position& p) {
  if (p.state == kInSendRecv) return "send/recv batch #" + std::to_string(p.p2pBatches);
  std::string text = exec::describeCall(p.call) + " #" + std::to_string(p.collectives);
  if (p.firstCollective != 0 && p.firstCollective < p.collectives)
    text += " (the last of a group, #" + std::to_string(p.firstCollective) + " to #" +
            std::to_string(p.collectives) + ")";
  return text;
}

// What rank `r` is doing, in words.
std::string doing(const RankReport& r) {
  if (r.died) return "has died (its process is gone)";
  if (r.gone) return "has left the job";
  if (r.unseen) return "is on another host (not seen without the bootstrap root)";
  if (!r.answered) return r.silence.empty() ? "stopped answering" : r.silence;
  const Position& p = r.pos;
  if (p.state == kIdle) {
    // Its send/recv batches too: a rank whose last call was one is not
    // one that never began (a CUDA communicator's launch may still run).
    std::string text = "is not in a call (its last collective: " +
                       (p.collectives == 0 ? std::string("none yet") : callText(p));
    if (p.p2pBatches > 0) text += "; send/recv batches: " + std::to_string(p.p2pBatches);
    return text + ")";
  }
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.1f", p.inCallSec);
  return "is in " + callText(p) + " for " + secs + " s";
}

// Same call number and same call: the ranks are in step. A group's
// collectives that a CUDA communicator's launch is in are a range of
// numbers: in step with a rank in any of them (ranks of one host had
// their calls compared at launch). Idle ranks compare their last numbers.
bool inStep(const Position& a, const Position& b) {
  if (a.state != b.state) return false;
  if (a.state == kInSendRecv) return true;
  const uint64_t aFirst = a.firstCollective != 0 ? a.firstCollective : a.collectives;
  const uint64_t bFirst = b.firstCollective != 0 ? b.firstCollective : b.collectives;
  if (a.state == kInCollective && (aFirst < a.collectives || bFirst < b.collectives))
    return aFirst <= b.collectives && bFirst <= a.collectives;
  return a.collectives == b.collectives && exec::sameCall(a.call, b.call);
}

}  // namespace

void CallTracker::attach(CallBoard* board) {
  std::lock_guard<std::mutex> lock(mu_);
  board_ = board;
  blocked_ = board != nullptr ? board->blockedOn() : &blockedOn_;
}

uint64_t CallTracker::begin(const exec::CallTag& call) {
  const bool p2p = call.coll == static_cast<uint8_t>(plan::Coll::kSendRecv);
  return p2p ? beginCalls(nullptr, 0, true) : beginCalls(&call, 1, false);
}

uint64_t CallTracker::beginLaunch(const std::vector<exec::CallTag>& calls, bool p2p) {
  return beginCalls(calls.data(), calls.size(), p2p);
}

uint64_t CallTracker::beginCalls(const exec::CallTag* calls, size_t n, bool p2p) {
  std::lock_guard<std::mutex> lock(mu_);
  sinceNs_ = monotonicNs();
  blocked_->store(0, std::memory_order_relaxed);
  if (p2p) {
    ++pos_.p2pBatches;
    pos_.state = kInSendRecv;
  }
  if (n > 0) pos_.firstCollective = pos_.collectives + 1;
  for (size_t i = 0; i < n; ++i) {
    ++pos_.collectives;
    pos_.call = calls[i];
    pos_.state = kInCollective;
    if (board_ != nullptr) board_->publish(pos_, sinceNs_, true);
  }
  if (n == 0 && board_ != nullptr) board_->publish(pos_, sinceNs_, false);
  return pos_.collectives;
}

void CallTracker::publishP2P(const std::vector<P2PNote>& notes) {
  std::lock_guard<std::mutex> lock(mu_);  // the page has one writer at a time
  if (board_ != nullptr) board_->publishP2P(notes);
}

void CallTracker::end() {
  std::lock_guard<std::mutex> lock(mu_);
  pos_.state = kIdle;
  blocked_->store(0, std::memory_order_relaxed);
  if (board_ != nullptr) board_->publish(pos_, sinceNs_, false);
}

Position CallTracker::snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  Position p = pos_;
  if (p.state != kIdle) {
    p.inCallSec = static_cast<double>(monotonicNs() - sinceNs_) * 1e-9;
    const int64_t b = blocked_->load(std::memory_order_relaxed);
    p.recvPeer = WaitContext::blockedRecvPeer(b);
    p.sendPeer = WaitContext::blockedSendPeer(b);
  }
  return p;
}

std::string diagnose(const std::vector<RankReport>& reports) {
  const int n = static_cast<int>(reports.size());
  std::vector<std::string> culprits, details;
  auto ok = [&](int r) { return r >= 0 && r < n && reports[r].answered && !reports[r].gone; };
  // Ranks that cannot answer come first: they are the likeliest cause.
  for (int r = 0; r < n; ++r) {
    const RankReport& q = reports[r];
    if (q.died)
      culprits.push_back(q.name + " has died (its process is gone)" +
                         (q.pos.state == kIdle ? "" : " while in " + callText(q.pos)));
    else if (!q.gone && !q.answered && !q.unseen)
      culprits.push_back(q.name + " " +
                         (q.silence.empty()
                              ? "stopped answering: its process is alive (its bootstrap "
                                "connection is open) but did not report within 1 s -- stopped "
                                "(SIGSTOP, a debugger) or stuck outside grove"
                              : q.silence));
  }
  for (int r = 0; r < n; ++r) {
    const RankReport& me = reports[r];
    if (me.gone || !me.answered) continue;
    const Position& p = me.pos;
    if (p.state == kIdle) continue;
    for (int peer : {p.recvPeer, p.sendPeer}) {
      if (peer < 0 || peer >= n) continue;
      const char* verb = peer == p.recvPeer ? "waiting for data from" : "waiting to send to";
      std::string line = me.name + " is in " + callText(p) + " " + verb + " " + reports[peer].name +
                         ", which " + doing(reports[peer]);
      if (ok(peer) && inStep(p, reports[peer].pos))
        details.push_back(line);  // a link in a chain: the cause is elsewhere
      else
        culprits.push_back(line);
      break;
    }
    if (p.recvPeer < 0 && p.sendPeer < 0) details.push_back(me.name + " " + doing(me));
  }
  // Ranks in different calls of one number, when nobody waits visibly.
  if (culprits.empty()) {
    for (int r = 1; r < n; ++r) {
      if (!ok(r) || !ok(0) || inStep(reports[0].pos, reports[r].pos)) continue;
      culprits.push_back(reports[0].name + " " + doing(reports[0]) + "; " + reports[r].name + " " +
                         doing(reports[r]));
      break;
    }
  }
  std::string text;
  int unseen = 0;
  for (const RankReport& q : reports) unseen += q.unseen ? 1 : 0;
  if (culprits.empty() && unseen > 0) {
    text = "no rank of this host is stuck on another; the " + std::to_string(unseen) +
           " rank(s) on other hosts were not seen (no bootstrap root to ask)";
  } else if (culprits.empty()) {
    text = "no rank is stuck on another: every rank answered and they are in step";
  } else {
    text = culprits[0];
    for (size_t i = 1; i < culprits.size() && i < 4; ++i) text += "; " + culprits[i];
    if (culprits.size() > 4) text += "; and " + std::to_string(culprits.size() - 4) + " more";
  }
  for (size_t i = 0; i < details.size() && i < 4; ++i) text += " [" + details[i] + "]";
  return text;
}

}  // namespace grove::core

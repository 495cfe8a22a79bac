#include "core/call_board.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "base/proc_stat.h"

namespace grove::core {

constexpr uint64_t kBoardMagic = 0x4452414f42565247ULL;  // "GRVBOARD"
constexpr size_t kTagWords = sizeof(exec::CallTag) / sizeof(uint64_t);
static_assert(sizeof(exec::CallTag) % sizeof(uint64_t) == 0, "a tag is whole words");

struct BoardPage {
  std::atomic<uint64_t> magic;
  std::atomic<int64_t> pid;       // the owner (getpid()), written before magic
  std::atomic<uint64_t> version;  // odd while the words below are written
  std::atomic<uint64_t> state, collectives, firstCollective, p2pBatches, sinceNs;
  std::atomic<uint64_t> call[kTagWords];
  std::atomic<uint64_t> history[kBoardHistory][kTagWords];  // collective #k at k % kBoardHistory
  // Sends and receives to this host's peers: note #k at k % kBoardP2PHistory
  // (packNoteHead, nth, bytes), the first p2pNotes - kBoardP2PHistory of
  // them forgotten; after the page, by rank, the sends to it and the
  // receives from it noted so far (p2pCount).
  std::atomic<uint64_t> p2pNotes;
  std::atomic<uint64_t> p2p[kBoardP2PHistory][3];
  std::atomic<int64_t> blockedOn;  // outside the sequence: one word
};

namespace {

// The board's bytes: BoardPage and its counts of sends and receives by
// rank, rounded up to whole pages.
size_t pageBytesFor(int nranks) {
  const size_t bytes = sizeof(BoardPage) + 2 * sizeof(uint64_t) * static_cast<size_t>(nranks);
  return (bytes + 4095) / 4096 * 4096;
}

// How many notes of `page` are about rank `peer` in one direction.
std::atomic<uint64_t>& p2pCount(BoardPage& page, int peer, bool send) {
  auto* counts = reinterpret_cast<std::atomic<uint64_t>*>(&page + 1);
  return counts[2 * static_cast<size_t>(peer) + (send ? 1 : 0)];
}
const std::atomic<uint64_t>& p2pCount(const BoardPage& page, int peer, bool send) {
  return p2pCount(const_cast<BoardPage&>(page), peer, send);
}
static_assert(sizeof(BoardPage) % alignof(std::atomic<uint64_t>) == 0, "the counts are aligned");

std::string pathOf(const std::string& jobId, int rank) {
  return config::getString("GROVE_SHM_DIR") + "/grove-" + jobId + "-board-" + std::to_string(rank);
}

void storeTag(std::atomic<uint64_t>* words, const exec::CallTag& tag) {
  uint64_t w[kTagWords];
  std::memcpy(w, &tag, sizeof(tag));
  for (size_t i = 0; i < kTagWords; ++i) words[i].store(w[i], std::memory_order_relaxed);
}

exec::CallTag loadTag(const std::atomic<uint64_t>* words) {
  uint64_t w[kTagWords];
  for (size_t i = 0; i < kTagWords; ++i) w[i] = words[i].load(std::memory_order_relaxed);
  exec::CallTag tag;
  std::memcpy(&tag, w, sizeof(tag));
  return tag;
}

// One consistent read of a page: `fn` copies what it needs; retried while
// the writer is inside an update. False if it never held still.
template <typename Fn>
bool readStill(const BoardPage& p, Fn&& fn) {
  for (int tries = 0; tries < 1000; ++tries) {
    const uint64_t v1 = p.version.load(std::memory_order_acquire);
    if ((v1 & 1) == 0) {
      fn();
      std::atomic_thread_fence(std::memory_order_acquire);
      if (p.version.load(std::memory_order_relaxed) == v1) return true;
    }
    std::this_thread::yield();
  }
  return false;
}

// A note's first word: the peer, the direction and the data type.
uint64_t packNoteHead(const P2PNote& n) {
  return static_cast<uint32_t>(n.peer) | (uint64_t{n.send} << 32) | (uint64_t{n.dtype} << 40);
}

P2PNote unpackNote(uint64_t head, uint64_t nth, uint64_t bytes) {
  P2PNote n;
  n.peer = static_cast<int>(static_cast<uint32_t>(head));
  n.send = ((head >> 32) & 1) != 0;
  n.dtype = static_cast<uint8_t>(head >> 40);
  n.nth = nth;
  n.bytes = bytes;
  return n;
}

}  // namespace

CallBoard::CallBoard(const std::string& jobId, int rank, int nranks)
    : jobId_(jobId),
      rank_(rank),
      pageBytes_(pageBytesFor(nranks)),
      byRank_(static_cast<size_t>(nranks)) {
  own_ = ShmSegment::create(pathOf(jobId, rank), pageBytes_);
  own_.map(pageBytes_);
  own_.closeFd();
  mine_ = reinterpret_cast<BoardPage*>(own_.base());  // zero-filled: a fresh page is idle
  mine_->pid.store(getpid(), std::memory_order_relaxed);
  mine_->magic.store(kBoardMagic, std::memory_order_release);
}

CallBoard::~CallBoard() { unlinkOwn(); }

void CallBoard::unlinkOwn() {
  if (own_.valid()) own_.unlink();
}

void CallBoard::unlinkNames(const std::string& jobId, const std::vector<int>& ranks) {
  for (int r : ranks) ::unlink(pathOf(jobId, r).c_str());  // ENOENT: already gone
}

void CallBoard::openPeers(const std::vector<int>& ranks, const std::vector<int>& pids) {
  for (int r : ranks) {
    if (r == rank_ || r < 0 || r >= static_cast<int>(byRank_.size())) continue;
    // A process this one cannot see (another pid namespace sharing
    // /dev/shm) could not be told alive from dead: no board for it.
    if (pids[r] <= 0 || (kill(pids[r], 0) != 0 && errno == ESRCH)) continue;
    try {
      auto m = std::make_unique<Mapped>();
      m->seg = ShmSegment::tryOpen(pathOf(jobId_, r));
      if (!m->seg.valid() || m->seg.fileSize() < pageBytes_) continue;
      m->seg.map(pageBytes_);
      m->seg.closeFd();
      m->page = reinterpret_cast<BoardPage*>(m->seg.base());
      // Only the page its owner made for this communicator (not a stale one).
      if (m->page->magic.load(std::memory_order_acquire) != kBoardMagic ||
          m->page->pid.load(std::memory_order_relaxed) != pids[r])
        continue;
      m->pid = pids[r];
      byRank_[r] = std::move(m);
      peers_.push_back(r);
    } catch (const Error& e) {
      GROVE_INFO(log::kInit, "rank %d: no call board of rank %d here (%s)", rank_, r, e.what());
    }
  }
}

void CallBoard::publish(const Position& pos, uint64_t sinceNs, bool newCollective) {
  BoardPage& p = *mine_;
  const uint64_t v = p.version.load(std::memory_order_relaxed);
  p.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  p.state.store(pos.state, std::memory_order_relaxed);
  p.collectives.store(pos.collectives, std::memory_order_relaxed);
  p.firstCollective.store(pos.firstCollective, std::memory_order_relaxed);
  p.p2pBatches.store(pos.p2pBatches, std::memory_order_relaxed);
  p.sinceNs.store(sinceNs, std::memory_order_relaxed);
  storeTag(p.call, pos.call);
  if (newCollective) storeTag(p.history[pos.collectives % kBoardHistory], pos.call);
  p.version.store(v + 2, std::memory_order_release);
}

std::atomic<int64_t>* CallBoard::blockedOn() { return &mine_->blockedOn; }

bool CallBoard::peerPosition(int peer, Position* out) const {
  if (!hasPeer(peer)) return false;
  const BoardPage& p = *byRank_[peer]->page;
  Position pos;
  uint64_t since = 0;
  if (!readStill(p, [&] {
        pos.state = static_cast<uint32_t>(p.state.load(std::memory_order_relaxed));
        pos.collectives = p.collectives.load(std::memory_order_relaxed);
        pos.firstCollective = p.firstCollective.load(std::memory_order_relaxed);
        pos.p2pBatches = p.p2pBatches.load(std::memory_order_relaxed);
        since = p.sinceNs.load(std::memory_order_relaxed);
        pos.call = loadTag(p.call);
      }))
    return false;
  pos.rank = peer;
  if (pos.state != kIdle) {
    const uint64_t now = monotonicNs();
    pos.inCallSec = now > since ? static_cast<double>(now - since) * 1e-9 : 0.0;
    const int64_t b = p.blockedOn.load(std::memory_order_relaxed);
    pos.recvPeer = WaitContext::blockedRecvPeer(b);
    pos.sendPeer = WaitContext::blockedSendPeer(b);
  }
  *out = pos;
  return true;
}

bool CallBoard::peerCollective(int peer, uint64_t n, exec::CallTag* out, uint64_t* begunOut) const {
  if (begunOut != nullptr) *begunOut = 0;
  if (n == 0 || !hasPeer(peer)) return false;
  const BoardPage& p = *byRank_[peer]->page;
  uint64_t begun = 0;
  exec::CallTag tag;
  if (!readStill(p, [&] {
        begun = p.collectives.load(std::memory_order_relaxed);
        tag = loadTag(p.history[n % kBoardHistory]);
      }))
    return false;
  if (begunOut != nullptr) *begunOut = begun;
  if (begun < n || begun - n >= kBoardHistory) return false;
  *out = tag;
  return true;
}

bool CallBoard::ownCollective(uint64_t n, exec::CallTag* out) const {
  // Only this rank writes its page, so its own words need no sequence.
  const uint64_t begun = mine_->collectives.load(std::memory_order_relaxed);
  if (n == 0 || begun < n || begun - n >= kBoardHistory) return false;
  *out = loadTag(mine_->history[n % kBoardHistory]);
  return true;
}

void CallBoard::publishP2P(const std::vector<P2PNote>& notes) {
  if (notes.empty()) return;
  BoardPage& p = *mine_;
  const uint64_t v = p.version.load(std::memory_order_relaxed);
  p.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  uint64_t k = p.p2pNotes.load(std::memory_order_relaxed);
  for (const P2PNote& n : notes) {
    std::atomic<uint64_t>* w = p.p2p[k++ % kBoardP2PHistory];
    w[0].store(packNoteHead(n), std::memory_order_relaxed);
    w[1].store(n.nth, std::memory_order_relaxed);
    w[2].store(n.bytes, std::memory_order_relaxed);
    p2pCount(p, n.peer, n.send).store(n.nth, std::memory_order_relaxed);
  }
  p.p2pNotes.store(k, std::memory_order_relaxed);
  p.version.store(v + 2, std::memory_order_release);
}

bool CallBoard::hasPeer(int peer) const {
  return peer >= 0 && peer < static_cast<int>(byRank_.size()) && byRank_[peer] != nullptr;
}

CallBoard::Lookup CallBoard::peerP2P(int peer, int about, bool send, uint64_t nth,
                                     P2PNote* out) const {
  if (!hasPeer(peer) || about < 0 || about >= static_cast<int>(byRank_.size()))
    return Lookup::kNotYet;
  const BoardPage& p = *byRank_[peer]->page;
  Lookup found = Lookup::kNotYet;
  P2PNote note;
  const bool still = readStill(p, [&] {
    found = Lookup::kNotYet;
    if (p2pCount(p, about, send).load(std::memory_order_relaxed) < nth) return;
    found = Lookup::kForgotten;  // unless the notes it remembers hold it
    const uint64_t k = p.p2pNotes.load(std::memory_order_relaxed);
    const uint64_t oldest = k > kBoardP2PHistory ? k - kBoardP2PHistory : 0;
    for (uint64_t i = k; i > oldest; --i) {  // newest first: ranks are seldom far apart
      const std::atomic<uint64_t>* w = p.p2p[(i - 1) % kBoardP2PHistory];
      const P2PNote n =
          unpackNote(w[0].load(std::memory_order_relaxed), w[1].load(std::memory_order_relaxed),
                     w[2].load(std::memory_order_relaxed));
      if (n.peer == about && n.send == send && n.nth == nth) {
        note = n;
        found = Lookup::kFound;
        return;
      }
    }
  });
  if (!still) return Lookup::kNotYet;
  if (found == Lookup::kFound) *out = note;
  return found;
}

int CallBoard::peerPid(int peer) const {
  if (!hasPeer(peer)) return 0;
  return byRank_[peer]->pid;
}

void checkPeersUpTo(const CallBoard& board, uint64_t upTo, std::vector<uint64_t>& checked) {
  for (int peer : board.peers()) {
    uint64_t& done = checked.at(static_cast<size_t>(peer));
    uint64_t n = done + 1;
    uint64_t passed = 0;  // numbers one of the two pages forgot
    while (n <= upTo) {
      exec::CallTag theirs, mine;
      uint64_t begun = 0;
      if (!board.peerCollective(peer, n, &theirs, &begun)) {
        if (begun < n) break;  // not begun yet (or its page never held still): the next launch
        // It ran more than kBoardHistory further on: from the first it remembers.
        const uint64_t from = begun + 1 - kBoardHistory;
        passed += from - n;
        n = from;
        done = n - 1;
        continue;
      }
      if (!board.ownCollective(n, &mine))
        ++passed;
      else if (!exec::sameCall(theirs, mine))
        throwInvalidUsage(exec::callMismatchText(theirs, mine));
      done = n++;
    }
    if (passed > 0)
      GROVE_INFO(log::kColl,
                 "call board: %llu collective(s) of rank %d not compared (more than %llu apart, "
                 "or a group larger than that)",
                 static_cast<unsigned long long>(passed), peer,
                 static_cast<unsigned long long>(kBoardHistory));
  }
}

void checkP2POnBoard(const CallBoard& board, int rank, const std::vector<P2PNote>& mine) {
  uint64_t passed = 0;
  for (const P2PNote& m : mine) {
    P2PNote theirs;
    switch (board.peerP2P(m.peer, rank, !m.send, m.nth, &theirs)) {
      case CallBoard::Lookup::kNotYet:
        continue;  // it compares when it begins the pair (this note is on the board by then)
      case CallBoard::Lookup::kForgotten: ++passed; continue;
      case CallBoard::Lookup::kFound: break;
    }
    const int sender = m.send ? rank : m.peer, receiver = m.send ? m.peer : rank;
    const uint64_t sent = m.send ? m.bytes : theirs.bytes;
    const uint64_t received = m.send ? theirs.bytes : m.bytes;
    if (sent != received)
      throwInvalidUsage(exec::p2pSizeMismatchText(sender, sent, receiver, received) + " (send #" +
                        std::to_string(m.nth) + " from rank " + std::to_string(sender) +
                        " to rank " + std::to_string(receiver) + ")");
    const exec::CallTag theirTag = exec::p2pTagOf(m.peer, theirs.dtype);
    const exec::CallTag myTag = exec::p2pTagOf(rank, m.dtype);
    if (!exec::sameCall(theirTag, myTag))
      throwInvalidUsage(exec::callMismatchText(theirTag, myTag));
  }
  if (passed > 0)
    GROVE_INFO(log::kP2p,
               "call board: %llu send(s)/receive(s) of rank %d not compared (their peers "
               "ran more than %llu sends and receives further on)",
               static_cast<unsigned long long>(passed), rank,
               static_cast<unsigned long long>(kBoardP2PHistory));
}

void CallBoardProbe::probe() const {
  const Position me = tracker_->snapshot();
  if (me.state != kInCollective) return;
  for (int peer : board_->peers()) {
    exec::CallTag theirs;
    if (board_->peerCollective(peer, me.collectives, &theirs) && !exec::sameCall(theirs, me.call))
      throwInvalidUsage(exec::callMismatchText(theirs, me.call));
  }
}

namespace {

// What /proc says of a peer's process: gone, stopped, or running.
enum class Proc { kRunning, kStopped, kGone };

Proc procOf(int pid) {
  if (pid <= 0 || pid == getpid()) return Proc::kRunning;
  if (kill(pid, 0) != 0 && errno == ESRCH) return Proc::kGone;
  ProcStat st;
  if (!readProcStat(pid, &st)) return Proc::kRunning;  // no /proc: only kill() speaks
  if (procEnded(st.state)) return Proc::kGone;
  return procStopped(st.state) ? Proc::kStopped : Proc::kRunning;
}

}  // namespace

std::string hostDiagnosis(const CallBoard& board, const Position& me,
                          const std::vector<std::string>& names, double settleSec) {
  const int n = static_cast<int>(names.size());
  std::vector<RankReport> reports(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    reports[r].name = names[r];
    reports[r].unseen = true;
  }
  const uint64_t end = monotonicNs() + static_cast<uint64_t>(settleSec * 1e9);
  for (;;) {
    bool anyDown = false;
    for (int peer : board.peers()) {
      RankReport& rep = reports[peer];
      rep = RankReport{};
      rep.name = names[peer];
      switch (procOf(board.peerPid(peer))) {
        case Proc::kGone:
          rep.gone = rep.died = true;
          anyDown = true;
          break;
        case Proc::kStopped:
          rep.silence = "is stopped (SIGSTOP or a debugger): its process is alive but not running";
          anyDown = true;
          break;
        case Proc::kRunning:
          rep.answered = board.peerPosition(peer, &rep.pos);
          if (!rep.answered) rep.silence = "is running but its call board never held still";
          break;
      }
      if (rep.died) board.peerPosition(peer, &rep.pos);  // where it was when it died
    }
    if (anyDown || monotonicNs() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (me.rank >= 0 && me.rank < n) {
    reports[me.rank] = RankReport{};
    reports[me.rank].name = names[me.rank];
    reports[me.rank].answered = true;
    reports[me.rank].pos = me;
  }
  return diagnose(reports);
}

}  // namespace grove::core
